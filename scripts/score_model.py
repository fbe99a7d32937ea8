"""Snakemake script: every benchmark of one model/method/seed's summary, scored with the model loaded once.

Score files whose score key still holds are kept (lmbias.engine.model_scoring); resources.gpu = N > 1 (and no
device_map): the benchmarks to score go to one `accelerate launch` of N data-parallel processes.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.model_scoring import score_model_job
from lmbias.job_runtime import setup_job_logging
from lmbias.workflow.inputs import benchmark_items_file, score_file, scoring_libraries

setup_job_logging(snakemake.log[0])  # noqa: F821
wildcards = snakemake.wildcards  # noqa: F821
method_name = wildcards.method
methods = {method_name: snakemake.params.method}  # noqa: F821 (the kind is what scoring_libraries reads)
job = dict(
    model_name=wildcards.model,
    model_entry=snakemake.params.model,  # noqa: F821
    # the method's model folder (fine-tuned or fitted) travels inside the method entry, as in score_benchmark
    method_entry={**snakemake.params.method, "model_dir": snakemake.input.method_model or None},  # noqa: F821
    weights_dir=snakemake.input.weights or None,  # noqa: F821
    seed=int(wildcards.seed),
    threads=snakemake.threads,  # noqa: F821
    max_tokens=int(snakemake.resources.max_tokens),  # noqa: F821 (a resource: no score depends on it)
    benchmarks={
        name: {
            "entry": entry,
            "items": benchmark_items_file(name),
            "scores": score_file(wildcards.model, method_name, wildcards.seed, name),
            "library": scoring_libraries({"methods": methods}, method_name, entry),
        }
        for name, entry in snakemake.params.benchmarks.items()  # noqa: F821
    },
    manifest=snakemake.output[0],  # noqa: F821
    timing=snakemake.log.timing,  # noqa: F821
)
score_model_job(job, gpus=int(getattr(snakemake.resources, "gpu", 1) or 0))  # noqa: F821
