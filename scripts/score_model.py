"""Snakemake script: every benchmark of one model/method/seed's summary, scored with the model loaded once.

Score files whose score key still holds are kept (lmbias.jobs.model_scoring); resources.gpu = N > 1 (and no
device_map): the benchmarks to score go to one `accelerate launch` of N data-parallel processes. What each
benchmark's scores depend on from the config comes from its scoring spec (lmbias.workflow.scoring_specs).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.jobs.description import BenchmarkTask, ScoringJob
from lmbias.jobs.model_scoring import score_benchmarks
from lmbias.workflow.inputs import benchmark_items_file, score_file, scoring_libraries
from lmbias.workflow.scoring_specs import read_benchmark_spec, read_model_spec, shared_method_entry

setup_job_logging(snakemake.log[0])  # noqa: F821
wildcards = snakemake.wildcards  # noqa: F821
model_entry = read_model_spec(snakemake.input.model_spec)["model_entry"]  # noqa: F821
specs = [read_benchmark_spec(path) for path in snakemake.input.spec]  # noqa: F821
method_entry = shared_method_entry(specs, list(snakemake.input.spec))  # noqa: F821
methods = {wildcards.method: method_entry}  # the kind is what scoring_libraries reads
job = ScoringJob(
    wildcards.model,
    model_entry,
    # the method's model folder (fine-tuned or fitted) travels inside the method entry, as in score_benchmark
    {**method_entry, "model_dir": snakemake.input.method_model or None},  # noqa: F821
    {
        spec["name"]: BenchmarkTask(
            spec["entry"],
            benchmark_items_file(spec["name"]),
            score_file(wildcards.model, wildcards.method, wildcards.seed, spec["name"]),
            scoring_libraries({"methods": methods}, wildcards.method, spec["entry"]),
        )
        for spec in specs
    },
    weights_dir=snakemake.input.weights or None,  # noqa: F821
    seed=int(wildcards.seed),
    threads=snakemake.threads,  # noqa: F821
    max_tokens=int(snakemake.resources.max_tokens),  # noqa: F821 (a resource: no score depends on it)
    manifest=snakemake.output[0],  # noqa: F821
    timing=snakemake.log.timing,  # noqa: F821
)
score_benchmarks(job, gpus=int(getattr(snakemake.resources, "gpu", 1) or 0))  # noqa: F821
