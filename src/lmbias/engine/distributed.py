"""Launching a job's processes: `accelerate launch` commands for data-parallel scoring and distributed
training on one machine (a rendezvous port per job), and `srun` commands with the rendezvous read from Slurm's
variables on a cluster. What the launched scoring processes do is lmbias.jobs.sharded's.
"""

from __future__ import annotations

import os
import socket
import sys
import zlib
from pathlib import Path

from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # only apply_slurm_rendezvous reads it

REPO_ROOT = Path(__file__).resolve().parents[3]
ACCELERATE_CONFIGS = REPO_ROOT / "resources" / "accelerate"


def main_process_port(key: str, low: int = 20000, span: int = 20000) -> int:
    """A rendezvous port for one job: derived from `key` (the job's output path), so concurrent launches
    on one node do not all collide on Accelerate's default 29500, then moved up to the first port free
    on this host."""
    port = low + zlib.crc32(key.encode()) % span
    for candidate in range(port, port + 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    raise RuntimeError(f"no free port in {port}..{port + 199}")


def launch_command(
    num_processes: int,
    port: int,
    score_args: list[str],
    config: str = "multi_gpu.yaml",
    cpu: bool = False,
    subcommand: str = "score",
) -> list[str]:
    """`accelerate launch ... -m lmbias.cli <subcommand> <score_args>` with this interpreter (score or train).

    cpu: the cpu.yaml config (use_cpu: true -> ACCELERATE_USE_CPU=true) started by the torchrun launcher
    (`--multi_gpu`). Accelerate 1.15's `--cpu` flag / MULTI_CPU config alone go to its simple launcher,
    which starts ONE process unless an MPI hostfile is given.
    """
    if cpu:
        config = "cpu.yaml"
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ACCELERATE_CONFIGS / config),
        "--num_processes",
        str(num_processes),
        "--main_process_port",
        str(port),
    ]
    if cpu:
        cmd.append("--multi_gpu")
    return cmd + ["-m", "lmbias.cli", "-v", subcommand, *score_args]


def launch_env() -> dict[str, str]:
    """The environment for a launched job: this checkout's library first on the path."""
    env = dict(os.environ)
    src = str(REPO_ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# ------------------------------------------------------------------------------ Slurm: one process per task

#: set by slurm_launch_env: the processes `srun` starts take their rank and rendezvous from Slurm
SLURM_LAUNCH_ENV = "LMBIAS_SLURM_LAUNCH"


def slurm_launch_command(tasks: int, args: list[str], launcher: str = "srun", subcommand: str = "train") -> list[str]:
    """`srun --ntasks=<tasks> ... python -m lmbias.cli <subcommand> <args>`: one process per task of the job's
    allocation (any number of nodes). `launcher` is the rule's resources.mpi (the executor plugin's way to
    run a job's own `srun`; e.g. "srun --mpi=none")."""
    import shlex

    return [
        *shlex.split(launcher),
        f"--ntasks={tasks}",
        "--kill-on-bad-exit=1",
        sys.executable,
        "-m",
        "lmbias.cli",
        "-v",
        subcommand,
        *args,
    ]


def slurm_launch_env() -> dict[str, str]:
    """launch_env plus the flag that makes each task map Slurm's variables to torch's (slurm_rendezvous)."""
    return dict(launch_env(), **{SLURM_LAUNCH_ENV: "1"})


def _first_host(nodelist: str) -> str:
    """The address of the first node of a Slurm node list (`scontrol show hostnames LIST | head -1`, then that
    node's NodeAddr from `scontrol show node`: a NodeName need not be a resolvable host name)."""
    import re
    import subprocess

    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    name = out.stdout.split()[0]
    node = subprocess.run(["scontrol", "show", "node", "--oneliner", name], capture_output=True, text=True)
    found = re.search(r"\bNodeAddr=(\S+)", node.stdout)
    return found.group(1) if node.returncode == 0 and found else name


def slurm_rendezvous(environ: dict[str, str], first_host=_first_host, visible_gpus: int = 0) -> dict[str, str]:
    """torch.distributed's env:// variables of one task started by `srun`, from its Slurm environment:
    RANK = SLURM_PROCID, WORLD_SIZE = SLURM_NTASKS, LOCAL_RANK = SLURM_LOCALID, LOCAL_WORLD_SIZE = the tasks
    on this node, MASTER_ADDR = the first host of the step's (else the job's) node list (where rank 0 runs;
    a MASTER_ADDR the site exports wins),
    MASTER_PORT = 20000 + job id mod 20000 (the same in every task, different for concurrent jobs).
    A task that sees exactly one GPU (Slurm bound one GPU per task, e.g. --ntasks-per-gpu=1) gets LOCAL_RANK 0,
    the index of that GPU (the device is chosen by LOCAL_RANK)."""
    try:
        nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or environ["SLURM_NODELIST"]
        tasks_here = environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE") or "1"
        return {
            "RANK": environ["SLURM_PROCID"],
            "WORLD_SIZE": environ["SLURM_NTASKS"],
            "LOCAL_RANK": "0" if visible_gpus == 1 else environ["SLURM_LOCALID"],
            "LOCAL_WORLD_SIZE": str(int(tasks_here.split("(")[0].split(",")[0])),
            "MASTER_ADDR": environ.get("MASTER_ADDR") or first_host(nodelist),
            "MASTER_PORT": str(20000 + int(environ["SLURM_JOB_ID"]) % 20000),
        }
    except KeyError as exc:
        raise RuntimeError(
            f"{SLURM_LAUNCH_ENV} is set but the Slurm variable {exc.args[0]} is missing: start "
            "this process with srun inside a Slurm job"
        ) from None


def apply_slurm_rendezvous() -> None:
    """In a process started by slurm_launch_command: set torch's rendezvous variables from Slurm's (before
    Accelerate starts the process group); elsewhere nothing."""
    if os.environ.get(SLURM_LAUNCH_ENV) == "1" and "RANK" not in os.environ:
        os.environ.update(slurm_rendezvous(dict(os.environ), visible_gpus=torch.cuda.device_count()))
