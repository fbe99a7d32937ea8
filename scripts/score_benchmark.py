"""Snakemake script: per-item scores of one benchmark for one model/method/seed.

The one way to score (lmbias.jobs.model_scoring.score_benchmarks) with this benchmark alone: the file is kept
when it already holds its score key (written by score_model or an earlier run for the same config), else the
model is loaded for this benchmark alone. resources.gpu <= 1, or a model entry with a device_map: scored in this
process; resources.gpu = N > 1: N data-parallel processes through `accelerate launch`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.jobs.description import one_benchmark_job
from lmbias.jobs.model_scoring import score_benchmarks
from lmbias.workflow.scoring_specs import read_benchmark_spec, read_model_spec


def _files(named) -> list[str]:
    """A named input as a list (Snakemake gives one file as a string)."""
    return [named] if isinstance(named, str) else list(named)


setup_job_logging(snakemake.log[0])  # noqa: F821
spec = read_benchmark_spec(snakemake.input.spec)  # noqa: F821
job = one_benchmark_job(
    snakemake.input.benchmark_items,  # noqa: F821
    snakemake.output[0],  # noqa: F821
    snakemake.wildcards.model,  # noqa: F821
    read_model_spec(snakemake.input.model_spec)["model_entry"],  # noqa: F821
    # the method's model folder (fine-tuned or fitted) travels inside the method entry, as in score_model
    {**spec["method_entry"], "model_dir": snakemake.input.method_model or None},  # noqa: F821
    snakemake.wildcards.benchmark,  # noqa: F821
    spec["entry"],
    weights_dir=snakemake.input.weights or None,  # noqa: F821
    threads=snakemake.threads,  # noqa: F821
    # models.<model>.max_tokens: a resource, so editing it reruns nothing (scores do not depend on it)
    max_tokens=int(snakemake.resources.max_tokens),  # noqa: F821
    timing=snakemake.log.timing,  # noqa: F821
    library=[snakemake.input.library] + _files(snakemake.input.method_library),  # noqa: F821
    seed=int(snakemake.wildcards.seed),  # noqa: F821
)
score_benchmarks(job, gpus=int(getattr(snakemake.resources, "gpu", 1) or 0))  # noqa: F821
