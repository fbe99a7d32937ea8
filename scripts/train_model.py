"""Snakemake script: fine-tune one model with one method and seed (lmbias.training.jobs.train_job).

resources.gpu <= 1: trained in this process. resources.gpu = N > 1: N data-parallel processes through
`accelerate launch ... -m lmbias.cli train` with a rendezvous port derived from the output path.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.distributed import launch_command, launch_env, main_process_port
from lmbias.workflow import setup_job_logging

setup_job_logging(snakemake.log[0])  # noqa: F821
job = dict(
    model_entry=snakemake.params.model,  # noqa: F821
    model_name=snakemake.wildcards.model,  # noqa: F821
    corpus=snakemake.input.corpus,  # noqa: F821
    out_dir=snakemake.output[0],  # noqa: F821
    seed=int(snakemake.wildcards.seed),  # noqa: F821
    settings=snakemake.params.settings,  # noqa: F821
)
gpus = int(getattr(snakemake.resources, "gpu", 1) or 0)  # noqa: F821
if gpus <= 1:
    from lmbias.training.jobs import train_job

    train_job(**job)
else:
    args = ["--model-name", job["model_name"], "--model-entry", json.dumps(job["model_entry"]),
            "--corpus", job["corpus"], "--out", job["out_dir"], "--seed", str(job["seed"]),
            "--settings", json.dumps(job["settings"])]
    port = main_process_port(str(Path(job["out_dir"]).resolve()))
    cmd = launch_command(gpus, port, args, subcommand="train")
    print("launching:", shlex.join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=launch_env(), stdout=sys.stderr, stderr=sys.stderr)
