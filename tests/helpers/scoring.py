"""One benchmark's score file in a test, through the one way to score (lmbias.jobs.model_scoring.score_benchmarks
with the job description rule score_benchmark builds)."""

from __future__ import annotations

from lmbias.jobs.description import one_benchmark_job
from lmbias.jobs.model_scoring import score_benchmarks


def score_one(items, output, model_name, model_entry, method_entry, benchmark_name, benchmark_entry, **options):
    """score_benchmarks of one benchmark; `options` are one_benchmark_job's (weights_dir, threads, max_tokens,
    timing, library, seed). Returns its status, "scored" or "kept"."""
    job = one_benchmark_job(
        items, output, model_name, model_entry, method_entry, benchmark_name, benchmark_entry, **options
    )
    return score_benchmarks(job)[benchmark_name]
