"""Snakemake script: per-item scores of one benchmark for one model/method/seed.

The file is kept when it already holds its score key (written by score_model or an earlier run for the same
config); else the model is loaded for this benchmark alone (lmbias.jobs.model_scoring.score_benchmark_file).
resources.gpu <= 1, or a model entry with a device_map: scored in this process; resources.gpu = N > 1: N
data-parallel processes through `accelerate launch` (lmbias.engine.distributed).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.jobs.model_scoring import score_benchmark_file
from lmbias.workflow.scoring_specs import read_benchmark_spec, read_model_spec


def _files(named) -> list[str]:
    """A named input as a list (Snakemake gives one file as a string)."""
    return [named] if isinstance(named, str) else list(named)


setup_job_logging(snakemake.log[0])  # noqa: F821
spec = read_benchmark_spec(snakemake.input.spec)  # noqa: F821
job = dict(
    items_path=snakemake.input.benchmark_items,  # noqa: F821
    output_path=snakemake.output[0],  # noqa: F821
    model_name=snakemake.wildcards.model,  # noqa: F821
    model_entry=read_model_spec(snakemake.input.model_spec)["model_entry"],  # noqa: F821
    # The method's model folder (fine-tuned or fitted) travels inside the method entry, so the multi-process
    # path (`lmbias score --method-entry JSON`) carries it too.
    method_entry={**spec["method_entry"], "model_dir": snakemake.input.method_model or None},  # noqa: F821
    benchmark_name=snakemake.wildcards.benchmark,  # noqa: F821
    benchmark_entry=spec["entry"],
    weights_dir=snakemake.input.weights or None,  # noqa: F821
    threads=snakemake.threads,  # noqa: F821
    # models.<model>.max_tokens: a resource, so editing it reruns nothing (scores do not depend on it)
    max_tokens=int(snakemake.resources.max_tokens),  # noqa: F821
    timing_path=snakemake.log.timing,  # noqa: F821
)
score_benchmark_file(
    job,
    library=[snakemake.input.library] + _files(snakemake.input.method_library),  # noqa: F821
    seed=snakemake.wildcards.seed,  # noqa: F821
    gpus=int(getattr(snakemake.resources, "gpu", 1) or 0),  # noqa: F821
)
