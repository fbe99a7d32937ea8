"""Snakemake script: per-item scores of one benchmark for one model/method/seed.

resources.gpu <= 1, or a model entry with a device_map (one process, the model spread over the job's GPUs):
scored in this process. resources.gpu = N > 1 (profile set-resources): N data-parallel
processes through `accelerate launch` (resources/accelerate/multi_gpu.yaml, a rendezvous port derived from
the output path so concurrent jobs on one node do not collide); see lmbias.engine.distributed.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.distributed import launch_command, launch_env, main_process_port
from lmbias.engine.evaluation import score_benchmark_job
from lmbias.job_runtime import setup_job_logging
from lmbias.metrics.score_keys import score_key


def _files(named) -> list[str]:
    """A named input as a list (Snakemake gives one file as a string)."""
    return [named] if isinstance(named, str) else list(named)


setup_job_logging(snakemake.log[0])  # noqa: F821
# the same key score_model computes for this file, so that job keeps it (lmbias.metrics.score_keys)
key = score_key(
    snakemake.params.benchmark,  # noqa: F821
    snakemake.input.benchmark_items,  # noqa: F821
    snakemake.params.model,  # noqa: F821
    snakemake.params.method,  # noqa: F821
    [snakemake.input.library] + _files(snakemake.input.method_library),  # noqa: F821
    snakemake.wildcards.seed,  # noqa: F821
    weights_dir=snakemake.input.weights or None,  # noqa: F821
    method_dir=snakemake.input.method_model or None,  # noqa: F821
)
job = dict(
    items_path=snakemake.input.benchmark_items,  # noqa: F821
    output_path=snakemake.output[0],  # noqa: F821
    model_name=snakemake.wildcards.model,  # noqa: F821
    model_entry=snakemake.params.model,  # noqa: F821
    # The method's model folder (fine-tuned or fitted) travels inside the method entry, so the multi-process
    # path (`lmbias score --method-entry JSON`) carries it too.
    method_entry={**snakemake.params.method, "model_dir": snakemake.input.method_model or None},  # noqa: F821
    benchmark_name=snakemake.wildcards.benchmark,  # noqa: F821
    benchmark_entry=snakemake.params.benchmark,  # noqa: F821
    weights_dir=snakemake.input.weights or None,  # noqa: F821
    threads=snakemake.threads,  # noqa: F821
    # models.<model>.max_tokens: a resource, so editing it reruns nothing (scores do not depend on it)
    max_tokens=int(snakemake.resources.max_tokens),  # noqa: F821
    timing_path=snakemake.log.timing,  # noqa: F821
    score_key=key,
)
gpus = int(getattr(snakemake.resources, "gpu", 1) or 0)  # noqa: F821
# A model dispatched over the job's GPUs (models.<model>.device_map) is one process that uses all of them.
if gpus <= 1 or job["model_entry"].get("device_map") is not None:
    score_benchmark_job(**job)
else:
    args = [
        "--items",
        job["items_path"],
        "--output",
        job["output_path"],
        "--model",
        job["model_name"],
        "--model-entry",
        json.dumps(job["model_entry"]),
        "--method-entry",
        json.dumps(job["method_entry"]),
        "--benchmark",
        job["benchmark_name"],
        "--benchmark-entry",
        json.dumps(job["benchmark_entry"]),
        "--threads",
        str(job["threads"]),
        "--max-tokens",
        str(job["max_tokens"]),
        "--timing",
        job["timing_path"],
        "--score-key",
        key,
    ]
    if job["weights_dir"]:
        args += ["--weights-dir", str(job["weights_dir"])]
    cmd = launch_command(gpus, main_process_port(str(Path(job["output_path"]).resolve())), args)
    print("launching:", shlex.join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=launch_env(), stdout=sys.stderr, stderr=sys.stderr)
