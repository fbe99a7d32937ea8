"""`snakemake --executor in-process`: the tests' Snakemake runs, with each job run inside Snakemake's own process.

Why: a tiny model's job does about a second of work, but a job process first spends 5-8 s of CPU importing
torch, transformers and spaCy; the suite's runs schedule several hundred such jobs on a 2-core CI machine. Here
Snakemake is the real one, started as users start it (`python -m snakemake`, the local profile, the tests'
configs): it builds the DAG, decides what to run and why, prepares each job's outputs, records its metadata,
checks its outputs, runs `onsuccess`/`onerror`. Only the last step differs: where Snakemake's local executor
starts `python .snakemake/scripts/tmpXXXX.<script>.py` for a `script:` job, this executor runs the same
script file in its own process with the same `snakemake` object (input, output, params, wildcards, threads,
resources, log, config, rule), as the every-combination test does (tests/workflow/test_every_combination.py);
a `run:` job runs through Snakemake's own `run_wrapper`, as the local profile's `force-use-threads` does, here
in the scheduler's thread. Jobs run one after another; each leaves the process as it found it (job_sandbox).

Its package name makes it a Snakemake executor plugin (found on the PYTHONPATH by name:
snakemake_executor_plugin_<name>); tests/helpers/workflow_runs.py puts its folder on the PYTHONPATH of the
tests' runs and passes `--executor in-process` unless a test asks for real job processes
(`run_snakemake(..., job_processes=True)`: the tests whose subject is Snakemake's own process handling).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import runpy
import sys
import traceback
from pathlib import Path

from snakemake.executors.local import Executor as LocalExecutor
from snakemake.executors.local import run_wrapper
from snakemake_interface_executor_plugins.settings import CommonSettings

common_settings = CommonSettings(
    non_local_exec=False,
    implies_no_shared_fs=False,
    job_deploy_sources=False,
    pass_envvar_declarations_to_cmd=False,
    auto_deploy_default_storage_provider=False,
)


@contextlib.contextmanager
def job_sandbox():
    """What a job's script changes in its process (stderr to its log, logging handlers, sys.path, environment,
    working folder, torch's threads, the random generators) put back afterwards."""
    import random

    import numpy as np
    import torch

    stderr, path, environ, cwd = sys.stderr, list(sys.path), dict(os.environ), os.getcwd()
    threads, rng = torch.get_num_threads(), (torch.get_rng_state(), np.random.get_state(), random.getstate())
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        if sys.stderr is not stderr:
            with contextlib.suppress(Exception):
                sys.stderr.close()
        sys.stderr = stderr
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        for handler in root.handlers:
            if handler not in handlers:
                with contextlib.suppress(Exception):
                    handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        torch.set_num_threads(threads)  # a job sets its rule's threads and seeds: the next job starts afresh
        torch.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])


def run_script(job, config: dict) -> None:
    """A `script:` job's Python script, run as `__main__` in this process with the job's `snakemake` object.

    An exception ends it as it would end the script's own process: its traceback goes to the job's stderr
    (its log, where the script sent stderr), then to Snakemake, which reports the job as failed."""
    from snakemake.iocontainers import Snakemake

    rule = job.rule
    script = Path(str(rule.basedir)) / rule.script
    injected = Snakemake(
        job.input,
        job.output,
        job.params,
        job.wildcards,
        job.threads,
        job.resources,
        job.log,
        config,
        rule.name,
        None,
        scriptdir=str(script.parent),
    )
    with job_sandbox():
        try:
            runpy.run_path(str(script), init_globals={"snakemake": injected}, run_name="__main__")
        except SystemExit as ended:
            if ended.code not in (None, 0):
                raise RuntimeError(f"{rule.script} exited with status {ended.code}") from ended
        except BaseException as error:
            traceback.print_exception(error, file=sys.stderr)
            raise


#: The `benchmark:` file's sampling `interval` (snakemake.benchmark.benchmarked: every 0.5 s for the first
#: `interval` samples, then every `interval` seconds; Snakemake's default is 30, i.e. 0.5 s for 15 s). Each
#: sample reads /proc/<pid>/smaps of this whole process, which holds torch: at Snakemake's default that was
#: ~5 % of the methods run's CPU (py-spy, 2026-11-29).
BENCHMARK_SAMPLE_EVERY_S = 5


class Executor(LocalExecutor):
    """The local executor, each job run here and now (module docstring)."""

    def run_single_job(self, job) -> concurrent.futures.Future:
        done: concurrent.futures.Future = concurrent.futures.Future()
        try:
            if job.rule.script is not None:
                self.workflow.async_run(job.prepare())
                self._run_script(job)
            else:
                self.cached_or_run(job, run_wrapper, *self.job_args_and_prepare(job))
        except BaseException as error:  # noqa: BLE001 (Snakemake reports it: LocalExecutor._callback)
            if isinstance(error, KeyboardInterrupt):
                raise
            done.set_exception(error)
        else:
            done.set_result(None)
        return done

    def _run_script(self, job) -> None:
        """run_script, measured for the rule's `benchmark:` file as Snakemake measures a script's process (here
        the whole process, which runs nothing else meanwhile)."""
        if not job.benchmark:
            run_script(job, self.workflow.config)
            return
        from snakemake.benchmark import benchmarked, write_benchmark_records

        with benchmarked(interval=BENCHMARK_SAMPLE_EVERY_S) as record:
            run_script(job, self.workflow.config)
        write_benchmark_records([record], str(job.benchmark), self.workflow.output_settings.benchmark_extended)
