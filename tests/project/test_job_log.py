"""The log of a job that runs inside Snakemake's process (lmbias.job_runtime.job_log): Snakemake runs `run:`
jobs in threads of its own process, several at once with `--cores N`, so each job's logging records, stderr
and warnings must reach its own log and no other, and a failing job must leave the traceback its error is read
back from (failed_jobs_report). The real Snakemake runs: tests/workflow/test_workflow.py."""

from __future__ import annotations

import logging
import sys
import threading
import warnings

import pytest

from lmbias.errors import ConfigError
from lmbias.job_runtime import failed_jobs_report, job_log, log_errors

_log = logging.getLogger("lmbias.test_job_log")


def _show_on_stderr(message, category, filename, lineno, file=None, line=None):
    """Python's own way of showing a warning (pytest records them instead while a test runs)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _warn_here(name: str) -> None:
    warnings.warn(f"{name}: a warning from one place in the code", UserWarning, stacklevel=1)


def _job(name: str, log_path, started: threading.Barrier, logged: threading.Barrier) -> None:
    """A job that writes each kind of output while the other job is inside its own block."""
    with job_log(log_path):
        started.wait(timeout=10)
        _log.info("%s: a record", name)
        print(f"{name}: to stderr", file=sys.stderr)
        _warn_here(name)
        logged.wait(timeout=10)


def test_concurrent_jobs_write_only_their_own_output_to_their_logs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(warnings, "showwarning", _show_on_stderr)
    level = logging.getLogger().level
    started, logged = threading.Barrier(2), threading.Barrier(2)
    threads = [threading.Thread(target=_job, args=(n, tmp_path / f"{n}.log", started, logged)) for n in "ab"]
    console = sys.stderr
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    for name, other in (("a", "b"), ("b", "a")):
        text = (tmp_path / f"{name}.log").read_text()
        assert f"INFO lmbias.test_job_log: {name}: a record" in text
        assert f"{name}: to stderr\n" in text
        assert f"UserWarning: {name}: a warning from one place in the code" in text  # shown in both jobs' logs
        assert f"{other}:" not in text
    # the main thread (Snakemake's) keeps its stderr and the root logger its level, and saw none of it
    assert sys.stderr is console and logging.getLogger().level == level
    assert "a record" not in capsys.readouterr().err


def test_output_outside_a_job_block_stays_on_the_console(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(warnings, "showwarning", _show_on_stderr)
    started, logged = threading.Barrier(2), threading.Barrier(2)
    job = threading.Thread(target=_job, args=("a", tmp_path / "a.log", started, logged))
    job.start()
    started.wait(timeout=10)  # the job is inside its block now
    print("snakemake: job 3 done", file=sys.stderr)
    logged.wait(timeout=10)
    job.join(timeout=20)
    assert "snakemake: job 3 done" in capsys.readouterr().err
    assert "snakemake" not in (tmp_path / "a.log").read_text()


def test_a_failing_job_leaves_its_named_error_in_its_log(tmp_path):
    log = tmp_path / "metrics.log"
    with pytest.raises(ConfigError), job_log(log):
        _log.info("reading scores")
        try:
            open(tmp_path / "missing.parquet")
        except OSError as exc:
            raise ConfigError("benchmarks.winobias.metric: unknown option 'x'") from exc
    assert log_errors(log) == ["ConfigError: benchmarks.winobias.metric: unknown option 'x'"]
    report = failed_jobs_report([("compute_seed_metrics", [str(log)])])
    assert report.splitlines()[1:] == [
        f"  rule compute_seed_metrics ({log}):",
        "    ConfigError: benchmarks.winobias.metric: unknown option 'x'",
    ]
    # another error: the exception line of the traceback, as for a script's process
    with pytest.raises(KeyError), job_log(log):
        {}["tokens"]
    assert log_errors(log) == ["KeyError: 'tokens'"]


def test_each_job_shows_a_warning_that_an_earlier_job_showed(tmp_path, monkeypatch):
    """Python shows a warning once per place and process: a second job of the same rule would lose it."""
    monkeypatch.setattr(warnings, "showwarning", _show_on_stderr)
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        for name in ("first", "second"):
            with job_log(tmp_path / f"{name}.log"):
                _warn_here("same text")
    for name in ("first", "second"):
        assert "UserWarning: same text: a warning" in (tmp_path / f"{name}.log").read_text(), name
