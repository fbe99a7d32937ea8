"""Snakemake script: fine-tune one model with one method and seed (lmbias.training.jobs.train_job).

resources.gpu <= 1: trained in this process. resources.gpu = N > 1: N data-parallel processes through
`accelerate launch ... -m lmbias.cli train` with a rendezvous port derived from the output path.
resources.tasks = N > 1 (a Slurm profile, with resources.mpi, the executor's launcher, e.g. "srun"): one
process per task of the job's allocation, on any number of nodes, started by `srun`; each takes its rank
and rendezvous from Slurm's variables (lmbias.engine.distributed.slurm_rendezvous).
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.distributed import launch_command, launch_env, main_process_port
from lmbias.job_runtime import setup_job_logging

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
tasks = int(getattr(snakemake.resources, "tasks", 1) or 1)  # noqa: F821
args = [
    "--model-name",
    job["model_name"],
    "--model-entry",
    json.dumps(job["model_entry"]),
    "--corpus",
    job["corpus"],
    "--out",
    job["out_dir"],
    "--seed",
    str(job["seed"]),
    "--settings",
    json.dumps(job["settings"]),
]
if tasks > 1:
    from lmbias.engine.distributed import slurm_launch_command, slurm_launch_env

    if not os.environ.get("SLURM_JOB_ID"):
        sys.exit(
            "resources.tasks > 1 starts one process per Slurm task with srun: run it under a Slurm profile "
            "(profiles/slurm); on one machine use resources.gpu"
        )
    launcher = str(getattr(snakemake.resources, "mpi", "srun") or "srun")  # noqa: F821
    cmd = slurm_launch_command(tasks, args, launcher=launcher)
    print("launching:", shlex.join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=slurm_launch_env(), stdout=sys.stderr, stderr=sys.stderr)
elif gpus <= 1:
    from lmbias.training.jobs import train_job

    train_job(**job)
else:
    port = main_process_port(str(Path(job["out_dir"]).resolve()))
    cmd = launch_command(gpus, port, args, subcommand="train")
    print("launching:", shlex.join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=launch_env(), stdout=sys.stderr, stderr=sys.stderr)
