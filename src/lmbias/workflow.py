"""Small helpers for Snakemake scripts: logging into the job's log file, and picking the device."""

from __future__ import annotations

import logging
import os
import sys

from lmbias.io import write_text_atomic
from lmbias.lazy import lazy_module
from lmbias.parsers.sources import sha256_file

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
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def write_source_fingerprint(sources, out: str | os.PathLike, root: str | os.PathLike) -> None:
    """Write 'sha256  path' (path relative to `root`) for each source file, atomically.

    The file (results/library/{library}.sha256) stands for a set of library modules and resource files: a
    benchmark's, in all its scoring and metric jobs, or the trainer's or SentenceDebias'. An edited module is
    newer than the fingerprint, so the fingerprint is rewritten and every job that reads it runs again, as
    with the modules listed one by one; each job has one input instead of six to ten, which a 14,000-job
    DAG builds faster (bench/dag_build.py)."""
    lines = [f"{sha256_file(source)}  {os.path.relpath(source, root)}\n" for source in sorted(str(s) for s in sources)]
    write_text_atomic(out, "".join(lines))
