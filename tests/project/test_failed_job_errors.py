"""The failed jobs' named errors for the console (issue 21 section 4): read back from their logs as Python
writes tracebacks. The real Snakemake run without a profile: tests/workflow/test_workflow_robust.py."""

from __future__ import annotations

import subprocess
import sys

from lmbias.job_runtime import failed_jobs_report, log_errors


def _traceback_of(code: str) -> str:
    """The stderr of a real Python process that fails with `code`, as a job's log holds it."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    return proc.stderr


CHAINED = """
from lmbias.errors import ConfigError
try:
    open('/nonexistent/model.safetensors')
except OSError as exc:
    raise ConfigError('models.broken: /nonexistent/model.safetensors is truncated or corrupt') from exc
"""


def test_a_chained_named_error_is_read_without_its_module(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("2026-01-01 INFO lmbias: loading\n" + _traceback_of(CHAINED))
    assert log_errors(log) == ["ConfigError: models.broken: /nonexistent/model.safetensors is truncated or corrupt"]


def test_named_errors_of_launched_processes_come_before_the_launchers_own(tmp_path):
    """accelerate: each rank logs the same DataError, then the job raises CalledProcessError."""
    rank = _traceback_of("from lmbias.errors import DataError\nraise DataError('bad row', path='x.jsonl', line=3)")
    launcher = _traceback_of("import subprocess\nsubprocess.run(['false'], check=True)")
    log = tmp_path / "job.log"
    log.write_text(rank + rank + "launching: accelerate ...\n" + launcher)
    assert log_errors(log) == ["DataError: x.jsonl:3: bad row"]
    report = failed_jobs_report([("score_benchmark", [str(log)])])
    assert report.splitlines()[1:] == [f"  rule score_benchmark ({log}):", "    DataError: x.jsonl:3: bad row"]


def test_other_errors_give_the_last_tracebacks_exception_and_indented_message_lines_are_kept(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(_traceback_of("raise ValueError('first')") + _traceback_of("raise KeyError('tokens')"))
    assert log_errors(log) == ["KeyError: 'tokens'"]
    invalid = "from lmbias.cli import InputError\nraise InputError('config.yaml is invalid:\\n  a: x\\n  b: y')"
    log.write_text(_traceback_of(invalid) + "afterwards\n")
    assert log_errors(log) == ["InputError: config.yaml is invalid:\n  a: x\n  b: y"]


def test_no_traceback_or_no_log_reports_nothing(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("2026-01-01 INFO lmbias: step 3 of 10\nKilled\n")
    assert log_errors(log) == [] and log_errors(tmp_path / "missing.log") == []
    assert failed_jobs_report([("finetune", [str(log), str(tmp_path / "missing.log")])]) == ""
