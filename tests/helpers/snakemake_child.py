"""A test's `snakemake -n ...` as a child forked from the test process, where that gives the same run.

Why: a Snakemake process spends 2-3 s of CPU importing Snakemake (its scheduler imports pandas and sqlalchemy,
its plugin registries the Slurm plugin) before it reads the Snakefile; the suite starts about 100 dry runs on a
2-core CI machine, and the test process has those imports already. So `run_snakemake` forks it for a dry run:
the child puts the process in the state a fresh interpreter would have where it matters (below), calls
Snakemake's own command-line entry point (`snakemake.cli.main`, what `python -m snakemake` runs) with the same
arguments in the same folder and environment, and exits with its status; its stdout and stderr come back as a
`subprocess.CompletedProcess`. There is no server and nothing of Snakemake is replaced.

Only dry runs: a run that executes jobs would run torch in a child of a process whose torch (its OpenMP thread
team, a lock another thread held at the fork) may be in any state; one such child hung in its first forward pass
(CI, 2026-11-29). A dry run computes nothing, so it runs no torch and starts no job.

What the child resets: the working folder, the environment, sys.path (the command's PYTHONPATH in front),
stdin/stdout/stderr (fresh files on fds 0-2), the logging tree (no handlers, levels unset: pytest's capture
handlers are gone, a warning with no handler goes to stderr as in a fresh process), the warning filters
(Python's defaults), the SIGINT/SIGTERM handlers, the library's modules (`lmbias*` are imported again, from
the copy's `src/` the Snakefile puts first on sys.path), Snakemake's executor-plugin registry (collected
again with the tests' plugin folder on sys.path), the run directory Snakemake notes when imported, and sys.argv.

When a fork would not give the same run, the command runs as a plain process instead (`forkable`): an
environment that differs from the test process's in a variable that libraries read when imported (Hugging
Face, torch, thread counts), or a hash seed the test process does not have (the tests' runs ask for
PYTHONHASHSEED=0; tests/conftest.py gives the xdist workers that seed).
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

#: Environment variables read when a library is imported (or when the interpreter starts): a run whose
#: environment differs from the test process's in one of them runs as a plain process.
IMPORT_TIME_PREFIXES = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "TORCH",
    "PYTORCH_",
    "CUDA_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "SNAKEMAKE_",
    "XDG_",
    "PYTHON",
)
#: ...except these, which the child applies itself (sys.path) or checks otherwise (the hash seed).
APPLIED_IN_CHILD = {"PYTHONPATH", "PYTHONHASHSEED"}
#: The flags of a dry run, the only runs forked
DRY_RUN = {"-n", "--dry-run"}


def forkable(env: dict) -> bool:
    """Whether a child forked from this process runs `python -m snakemake` as a fresh process with env would."""
    if not hasattr(os, "fork"):
        return False
    fresh_seed_zero = env.get("PYTHONHASHSEED") == "0"
    if fresh_seed_zero != (sys.flags.hash_randomization == 0 and os.environ.get("PYTHONHASHSEED") == "0"):
        return False
    names = {k for k in (*env, *os.environ) if k.startswith(IMPORT_TIME_PREFIXES)} - APPLIED_IN_CHILD
    return all(env.get(k) == os.environ.get(k) for k in names)


@functools.cache
def _import_snakemake() -> None:
    """What every Snakemake process imports before it reads a Snakefile, done once here so that children
    inherit it: its modules, and the plugins its registries import (the Slurm executor plugin imports pandas)."""
    from snakemake.cli import get_argument_parser

    get_argument_parser()  # collects the executor, storage, report and logger plugins
    import snakemake.scheduling.job_scheduler  # noqa: F401


def run_forked(argv: list[str], cwd, env: dict) -> subprocess.CompletedProcess:
    """`python -m snakemake *argv` (a dry run) in cwd with env, in a child of this process (module docstring)."""
    if not DRY_RUN & set(argv):
        raise ValueError(f"only a dry run runs in a forked child (module docstring): {argv}")
    _import_snakemake()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # the child's garbage collections skip this process's objects (and leave their pages shared)
        pid = os.fork()
        if pid != 0:
            gc.unfreeze()
        if pid == 0:  # the child: never returns
            status = 70  # EX_SOFTWARE, should the reset itself fail
            try:
                _fresh_process_state(out.fileno(), err.fileno(), cwd, env)
                status = _snakemake_main(argv)
            finally:
                os._exit(status)
        _, wait_status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(wait_status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return subprocess.CompletedProcess(["python", "-m", "snakemake", *argv], code, stdout, stderr)


def _fresh_process_state(out_fd: int, err_fd: int, cwd, env: dict) -> None:
    import logging

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own descriptors, for its lifetime)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [*extra, *(p for p in sys.path if p not in extra)]
    for name in [m for m in sys.modules if m == "lmbias" or m.startswith("lmbias.")]:
        del sys.modules[name]
    logging.root.handlers.clear()
    logging.root.setLevel(logging.WARNING)
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            logger.handlers.clear()
            logger.setLevel(logging.NOTSET)
            logger.propagate, logger.disabled = True, False
    logging.disable(logging.NOTSET)
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    from snakemake.workflow import Workflow
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    Workflow._rundir = str(Path.cwd().absolute())  # set when snakemake.workflow is imported: here, in the parent

    if getattr(ExecutorPluginRegistry._instance, "plugins", None) is not None:
        ExecutorPluginRegistry._instance.collect_plugins()


def _snakemake_main(argv: list[str]) -> int:
    import snakemake
    from snakemake.cli import main

    sys.argv = [str(Path(snakemake.__file__).parent / "__main__.py"), *argv]  # as `python -m snakemake` has it
    try:
        main(argv)
        status = 0
    except SystemExit as ended:
        code = ended.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # noqa: BLE001 (as the interpreter would: the traceback on stderr, status 1)
        import traceback

        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 (nothing left to report it to)
            pass
    return status
