"""Copies of the workflow and real Snakemake runs on them, as the workflow tests run them: 2 cores, one
thread per model job, the local profile; dry runs read back for what they would schedule."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.snakemake_child import DRY_RUN, forkable, run_forked

COPIED = ["Snakefile", "config.yaml", "rules", "scripts", "schemas", "profiles", "envs", "resources", "src", "report"]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
#: One thread per model job in tests (the shipped rules ask for 2): a tiny model gains nothing from a second
#: torch thread, and the other core runs the other xdist worker's tests (or, with job_processes, a second job).
#: Threads are no rerun trigger, so runs with and without this agree on what is up to date. It goes after the
#: targets: --set-threads takes every following word.
ONE_THREAD_PER_JOB = [
    "--set-threads",
    "score_model=1",
    "score_benchmark=1",
    "finetune=1",
    "fit_sentence_debias=1",
    "fit_inlp=1",
]


def copy_workflow(repo_root: Path, dest: Path) -> Path:
    """The workflow's files (COPIED) under dest, without downloaded data, built models or caches."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "data", "models")
    for name in COPIED:
        src = repo_root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


#: The folder of the tests' Snakemake executor plugin (`--executor in-process`: each job runs in Snakemake's own
#: process; tests/helpers/executor_plugins/snakemake_executor_plugin_in_process).
EXECUTOR_PLUGINS = Path(__file__).resolve().parent / "executor_plugins"


def snakemake_command(*args: str, job_processes: bool = False) -> tuple[list[str], dict]:
    """The command line and environment of a test's Snakemake run (2 cores, one thread per model job, the
    local profile unless one is given). Its jobs run inside Snakemake's process (`--executor in-process`)
    unless job_processes, the run names its own executor or profile, or it is a dry run."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXECUTOR_PLUGINS), os.environ.get("PYTHONPATH")]))
    args = list(args)
    if not (job_processes or (DRY_RUN | {"--executor", "-e", "--profile"}) & set(args)):
        args = ["--executor", "in-process", *args]
    for option in ("--configfile", "--config"):  # they take every following word: they must come last
        if option in args:
            i = args.index(option)
            # --config's values: every word after it with "=" (several may be given); --configfile's: one
            values = [w for w in args[i + 1 :] if "=" in w and not w.startswith("-")] if option == "--config" else []
            values = values or args[i + 1 : i + 2]
            rest = args[:i] + [w for w in args[i + 1 :] if w not in values]
            args = rest + [option, *values]
    cut = next((i for i, a in enumerate(args) if a in ("--configfile", "--config")), len(args))
    args = args[:cut] + ONE_THREAD_PER_JOB + args[cut:]
    profile = (
        [] if "--profile" in args else ["--profile", "profiles/local"]
    )  # the docs' local runs use it (docs/getting-started.md)
    return SNAKEMAKE + ["--cores", "2", *profile, *args], env


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, job_processes: bool = False
) -> subprocess.CompletedProcess:
    """Run Snakemake in workdir (snakemake_command); with check, a failure raises with the end of its output.
    job_processes: each job in a process of its own, as Snakemake's local executor starts it (the tests whose
    subject is that), instead of inside Snakemake's process. A dry run runs in a child forked from the test
    process where that gives the same run (helpers.snakemake_child)."""
    command, env = snakemake_command(*args, job_processes=job_processes)
    if DRY_RUN & set(args) and forkable(env):  # the same dry run without a new interpreter's imports
        return _checked(run_forked(command[len(SNAKEMAKE) :], workdir, env), args, check)
    return _checked(subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True), args, check)


def _checked(proc: subprocess.CompletedProcess, args, check: bool) -> subprocess.CompletedProcess:
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def scheduled_outputs(proc: subprocess.CompletedProcess) -> list[str]:
    """Output paths of the jobs a dry run would execute."""
    text = proc.stdout + proc.stderr
    return re.findall(r"^\s*output: (\S+)", text, re.M)


#: a score_model job's block in a dry run: its inputs (every benchmark's items among them), its manifest
SCORE_MODEL_JOB = re.compile(r"input: ([^\n]*)\n\s*output: results/([^/\s]+)/([^/\s]+)/seed(\d+)/scores\.json")


def scheduled_files(proc: subprocess.CompletedProcess) -> list[str]:
    """The outputs a dry run schedules, and the score file of every benchmark a scheduled score_model job scores
    (its items among its inputs; the score files are not its declared outputs: docs/scoring-jobs.md)."""
    files = [
        f"results/{model}/{method}/seed{seed}/scores/{bench}.parquet"
        for inputs, model, method, seed in SCORE_MODEL_JOB.findall(proc.stdout + proc.stderr)
        for bench in re.findall(r"results/data/([^,\s]+)\.parquet", inputs)
    ]
    return scheduled_outputs(proc) + files


@contextlib.contextmanager
def edited_module(module: Path):
    """A comment appended to a library module for the block; then its content and mtime are put back, so a
    shared run stays up to date for the tests after it."""
    text, stat = module.read_text(), module.stat()
    module.write_text(text + "# edited\n")
    try:
        yield module
    finally:
        module.write_text(text)
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def write_config(workdir: Path, edit) -> Path:
    """workdir's config.yaml changed in place by edit(config), written as edited.yaml (for --configfile)."""
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    edit(config)
    path = workdir / "edited.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
