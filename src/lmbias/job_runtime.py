"""Small helpers for Snakemake jobs and scripts: logging into the job's log file (a script's process, or a
`run:` job inside Snakemake's own process), picking the device, the library fingerprint a job writes; and for
the Snakefile: the failed jobs' errors for the console."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator

from lmbias.io import file_sha256, write_text_atomic
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use: DAG builds and metric jobs never need it


def setup_job_logging(log_path: str | None) -> None:
    """Send Python logging and stderr to the job's log file (the rna-seq-star-deseq2 convention).

    The Hugging Face libraries' own progress bars ("Loading weights") are switched off in a job (and the
    processes it launches): they redraw with carriage returns, which a log file keeps as one long line.
    The job's own progress goes through lmbias.progress, which writes plain lines to a log."""
    if log_path:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        if "transformers" in sys.modules:  # imported before: its switch was read then
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        handle = open(log_path, "w", buffering=1)
        sys.stderr = handle
    logging.basicConfig(
        level=logging.INFO,
        format=LOG_FORMAT,
        stream=sys.stderr,
        force=True,
    )


#: The format of a job log's lines, for scripts (setup_job_logging) and in-process jobs (job_log) alike.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The log file of each thread that runs an in-process job now (thread id -> open file).
_JOB_LOGS: dict[int, io.TextIOBase] = {}
_JOB_LOGS_LOCK = threading.Lock()
_ROOT_LEVEL_BEFORE_JOBS: list[int] = []  # the root logger's level while no in-process job runs


class _ThreadRoutedStream(io.TextIOBase):
    """sys.stderr while in-process jobs run: what a job's thread writes goes to that job's log, what any other
    thread (Snakemake's own) writes goes to the stream this one replaced. Tracebacks, warnings and progress
    bars are written to sys.stderr when they happen, so they follow their job."""

    def __init__(self, console):
        self.console = console

    def _target(self):
        return _JOB_LOGS.get(threading.get_ident(), self.console)

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:  # a progress bar in a job's log draws lines, not a live bar
        return self._target().isatty()

    def fileno(self) -> int:
        return self.console.fileno()

    @property
    def encoding(self):
        return self.console.encoding


class _ThreadFilter(logging.Filter):
    """Only the records logged by one thread: concurrent jobs log to their own files."""

    def __init__(self, thread: int):
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread == self.thread


@contextlib.contextmanager
def job_log(log_path: str | os.PathLike) -> Iterator[io.TextIOBase]:
    """The job log of a `run:` job, which Snakemake runs in a thread of its own process (`--cores N`: several
    at once), what setup_job_logging is to a script's process: the block's logging records (INFO and up, the
    script's level), its warnings and whatever it writes to sys.stderr go to `log_path`, written anew; other
    threads' output, concurrent jobs' included, does not. A block that raises leaves its traceback in the log,
    as a failing script's process does, so the failed job's error names itself on the console
    (failed_jobs_report). Threads that the block starts itself are not followed (the cheap jobs start none).

    Python shows a warning once per place in the code and process: the record of warnings shown is reset
    when a job starts (a filter is added, once: the final `default` action Python applies anyway), so each
    job's log holds its warnings as a job of its own process would."""
    thread = threading.get_ident()
    handle = open(log_path, "w", buffering=1, encoding="utf-8")
    handler = logging.StreamHandler(handle)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(_ThreadFilter(thread))
    root = logging.getLogger()
    with _JOB_LOGS_LOCK:
        if not _JOB_LOGS:
            _ROOT_LEVEL_BEFORE_JOBS[:] = [root.level]
            root.setLevel(logging.INFO)
        if not isinstance(sys.stderr, _ThreadRoutedStream):
            sys.stderr = _ThreadRoutedStream(sys.stderr)
        _JOB_LOGS[thread] = handle
        root.addHandler(handler)
        warnings.filterwarnings("default", append=True)  # resets the warnings already shown (see above)
    try:
        yield handle
    except BaseException:
        traceback.print_exc(file=handle)
        raise
    finally:
        with _JOB_LOGS_LOCK:
            root.removeHandler(handler)
            del _JOB_LOGS[thread]
            if not _JOB_LOGS:
                root.setLevel(_ROOT_LEVEL_BEFORE_JOBS.pop())
                if isinstance(sys.stderr, _ThreadRoutedStream):
                    sys.stderr = sys.stderr.console
        handle.close()


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def write_source_fingerprint(sources, out: str | os.PathLike, root: str | os.PathLike) -> None:
    """Write 'sha256  path' (path relative to `root`) for each source file, atomically.

    The file (results/library/{library}.sha256) stands for a set of library modules and resource files: a
    benchmark's, in all its scoring and metric jobs, or the trainer's or SentenceDebias'. An edited module is
    newer than the fingerprint, so the fingerprint is rewritten and every job that reads it runs again, as
    with the modules listed one by one; each job has one input instead of six to ten, which a 14,000-job
    DAG builds faster (bench/dag_build.py)."""
    lines = [f"{file_sha256(source)}  {os.path.relpath(source, root)}\n" for source in sorted(str(s) for s in sources)]
    write_text_atomic(out, "".join(lines))


_TRACEBACK = "Traceback (most recent call last):"
_NAMED = re.compile(r"^lmbias(?:\.\w+)*\.(\w+): ")  # an error class of this library, as a traceback prints it


def log_errors(log_path: str | os.PathLike, max_lines: int = 10) -> list[str]:
    """The errors a failed job's log names: every error of this library (LmbiasError: ConfigError, DataError,
    ...) that a traceback in it ends with, as `ConfigError: message`, in order and once each; or, where none
    does, the last traceback's exception line (`KeyError: 'x'`). [] for a missing log or one without a traceback.

    Python's traceback format: after `Traceback (most recent call last):` the frames are indented and the first
    line that is not is `module.Class: message`. Its indented lines after it are kept as the message's (a
    list of config errors); an unindented line may be the job's next output and ends it. A job that launches
    processes (accelerate) logs their tracebacks too, before its own CalledProcessError: the named error comes
    from them."""
    try:
        lines = open(log_path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return []
    found = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != _TRACEBACK:
            i += 1
            continue
        i += 1
        while i < len(lines) and (not lines[i] or lines[i][0].isspace()):
            i += 1
        if i == len(lines):
            break
        message = [lines[i]]
        i += 1
        while i < len(lines) and lines[i][:1].isspace() and lines[i].strip() and len(message) < max_lines:
            message.append(lines[i])
            i += 1
        found.append("\n".join(message))
    named = [_NAMED.sub(lambda m: f"{m.group(1)}: ", text, count=1) for text in found if _NAMED.match(text)]
    if named:
        return list(dict.fromkeys(named))
    return found[-1:]


def failed_jobs_report(jobs) -> str:
    """The console's account of failed jobs, one paragraph per job with an error in its logs (`jobs`: pairs of
    rule name and log paths). Snakemake itself prints only "check log file(s) for error details" unless
    show-failed-logs is set, and no profile is loaded by default (profiles/local, docs/clusters.md,
    "Running on Slurm"); the Snakefile's onerror handler prints this whatever the profile and executor."""
    paragraphs = []
    for rule, logs in jobs:
        for log in logs:
            for error in log_errors(log):
                paragraphs.append(f"  rule {rule} ({log}):\n" + "\n".join(f"    {line}" for line in error.splitlines()))
    if not paragraphs:
        return ""
    return "Errors of the failed jobs (the tracebacks are in their logs):\n" + "\n".join(paragraphs)
