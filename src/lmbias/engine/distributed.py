"""Data-parallel (multi-GPU, or multi-process CPU) scoring of one benchmark through Accelerate.

Launched as ``accelerate launch --config_file resources/accelerate/multi_gpu.yaml --num_processes N
--main_process_port P -m lmbias.cli score ...`` (the score_benchmark rule does this when its
``resources.gpu`` > 1). Every process loads the model on its own device, scores a shard of the items with
the benchmark's ordinary scorer (`registry.definition(dataset).score`, so dedup, length sorting and
batching happen per shard), the per-shard score tables are gathered to the main process
(`accelerate.utils.gather_object`) and only the main process writes the parquet.

How the item order survives: shards are *contiguous* row ranges (`shard_bounds`), ordered by rank, and
concatenated in rank order. That is the original order because every row-local scorer
(ROW_LOCAL_DATASETS) returns exactly one score row per item, in item order, computed from that item
alone — checked for each shard (row count) before gathering. Scorers that aggregate across items (SEAT:
per-unit association means and positions; the classic SEAT tests: effect sizes over whole tests) are not
shardable: the main process scores them whole and the others wait. A new benchmark is treated as
not shardable until it is added to ROW_LOCAL_DATASETS (and to the equality test in
tests/cluster/test_distributed.py), so adding one can never silently produce wrong scores.

One process: exactly `evaluation.score_benchmark_job`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from lmbias import registry
from lmbias.engine import job_timing
from lmbias.engine.batching import EngineStats, scoring_budget, scoring_precision
from lmbias.io import write_table_atomic
from lmbias.progress import job_progress, rate_line

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
ACCELERATE_CONFIGS = REPO_ROOT / "resources" / "accelerate"

#: Datasets whose scorer maps each item to one score row, in item order, from that item alone.
ROW_LOCAL_DATASETS = frozenset(
    {"winobias", "crows_pairs", "da_gender", "logprob", "occupations", "stereoset", "bec_pro"}
)


def shard_bounds(n_items: int, world: int, rank: int) -> tuple[int, int]:
    """[start, stop) of `rank`'s contiguous shard of `n_items` rows; sizes differ by at most one,
    earlier ranks take the extra rows; shards tile 0..n_items in rank order."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank {rank} of world {world}")
    base, extra = divmod(n_items, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def reassemble(parts: list[tuple[int, pa.Table | None]]) -> pa.Table:
    """Concatenate gathered (rank, scores) parts in rank order (None = a process with nothing to score)."""
    tables = [t for _, t in sorted(parts, key=lambda p: p[0]) if t is not None]
    if not tables:
        raise RuntimeError("no process returned scores")
    return pa.concat_tables(tables)


def score_table_sharded(items: pa.Table, dataset: str, rank: int, world: int, score_fn) -> tuple[int, pa.Table | None]:
    """This process's (rank, scores) part: `score_fn(shard)` on its contiguous shard for a row-local
    dataset; the whole table on rank 0 (None elsewhere) otherwise. Pure, so the split is testable
    without launching processes."""
    if dataset in ROW_LOCAL_DATASETS:
        start, stop = shard_bounds(items.num_rows, world, rank)
        if stop == start:
            return rank, None
        shard = items.slice(start, stop - start)
        scores = score_fn(shard)
        if scores.num_rows != shard.num_rows:
            raise RuntimeError(
                f"{dataset} scorer returned {scores.num_rows} rows for {shard.num_rows} items; a row-local "
                f"scorer must return one row per item (remove {dataset!r} from ROW_LOCAL_DATASETS)"
            )
        return rank, scores
    return rank, (score_fn(items) if rank == 0 else None)


def score_distributed_job(
    items_path,
    output_path,
    model_name,
    model_entry,
    method_entry,
    benchmark_name,
    benchmark_entry,
    weights_dir=None,
    threads: int | None = None,
    max_tokens: int | None = None,
    timing_path=None,
) -> None:
    """score_benchmark_job across the processes of an `accelerate launch` (or one plain process). Each process
    batches within `max_tokens`; the main process writes the timing file, with the largest peak memory of the
    processes and the halvings of all of them."""
    from accelerate import PartialState
    from accelerate.utils import gather_object, parse_flag_from_env

    from lmbias.engine.evaluation import effective_precision, load_for_method, score_benchmark_job, scoring_provenance

    # PartialState (unlike AcceleratorState) ignores ACCELERATE_USE_CPU: pass it on, and use CPU/gloo on a
    # host without CUDA, so `accelerate launch` of the cpu.yaml config really runs N gloo processes.
    state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available())
    if state.num_processes == 1:
        score_benchmark_job(
            items_path,
            output_path,
            model_name,
            model_entry,
            method_entry,
            benchmark_name,
            benchmark_entry,
            weights_dir=weights_dir,
            threads=threads,
            max_tokens=max_tokens,
            timing_path=timing_path,
        )
        return
    dataset = registry.measure_of(benchmark_entry)  # the definition that scores it (its dataset's own by default)
    definition = registry.definition(dataset, benchmark_name)
    registry.check_family(benchmark_name, benchmark_entry, model_entry["family"], model_name)
    torch.manual_seed(0)
    if threads:  # the job's threads are shared by the processes of this node
        torch.set_num_threads(max(1, threads // state.num_processes))
    items = pq.read_table(items_path)
    stats = EngineStats()
    loaded = []
    began_job = time.perf_counter()
    budgets = []  # this process's TokenBudget, once it scores

    elapsed = [0.0]
    began: list[float] = []  # when this process started scoring (after loading its model)
    precision = [None]  # `auto` resolved for the loaded model (scoring_provenance records it)

    def score_fn(part: pa.Table) -> pa.Table:
        if not loaded:  # a process with nothing to score loads no model
            loaded.append(load_for_method(model_name, model_entry, method_entry, state.device))
        model, tokenizer = loaded[0]
        start = time.perf_counter()  # scoring only, as in score_benchmark_job's log line
        began.append(start)
        key = f"models.{model_name}.precision"
        precision[0] = effective_precision(model_entry.get("precision", "auto"), model, state.device, key)
        # the main process's bar: its own shard (the others run shards of about the same size)
        with (
            scoring_budget(max_tokens, f"models.{model_name}.max_tokens") as budget,
            scoring_precision(precision[0], key),
            job_progress(
                f"scoring {benchmark_name} (process 0 of {state.num_processes})",
                unit="inputs",
                enabled=state.is_main_process,
            ),
        ):
            budgets.append(budget)
            scores = definition.score(
                part,
                model,
                tokenizer,
                model_entry["family"],
                registry.scoring_config(benchmark_name, benchmark_entry, model_name, model_entry),
                stats,
            )
        elapsed[0] = time.perf_counter() - start
        return scores

    part = score_table_sharded(items, dataset, state.process_index, state.num_processes, score_fn)
    log.info(
        "process %d/%d on %s: %s rows of %d items of %s in %.2f s (%d requests, %d unique inputs, %d forward passes)",
        state.process_index,
        state.num_processes,
        state.device,
        part[1].num_rows if part[1] is not None else 0,
        items.num_rows,
        benchmark_name,
        elapsed[0],
        stats.requests,
        stats.unique_inputs,
        stats.forward_passes,
    )
    parts = gather_object([part])
    # every process's peak memory and budget (a process with nothing to score has none of the latter)
    own = {
        **job_timing.peak_memory(state.device),
        "forward_passes": stats.forward_passes,
        "halvings": budgets[0].halvings if budgets else 0,
        "final": budgets[0].max_tokens if budgets else None,
        "load_s": (began[0] - began_job) if began else None,
    }
    everyone = gather_object([own])
    if state.is_main_process and timing_path:
        finals = [p["final"] for p in everyone if p["final"] is not None]
        loads = [p["load_s"] for p in everyone if p["load_s"] is not None]
        score_s = time.perf_counter() - began[0] if began else None
        job_timing.write_timing(
            timing_path,
            {
                "status": "ok",
                "device": str(state.device),
                "processes": state.num_processes,
                "load_s": max(loads) if loads else None,
                "score_s": score_s,
                "items": items.num_rows,
                "items_per_s": items.num_rows / score_s if score_s else None,
                "forward_passes": sum(p["forward_passes"] for p in everyone),
                "max_tokens": budgets[0].configured if budgets else max_tokens,
                "max_tokens_final": min(finals) if finals else None,
                "oom_halvings": sum(p["halvings"] for p in everyone),
                **job_timing.largest(everyone),
            },
        )
    if state.is_main_process:
        scores = reassemble(parts)
        write_table_atomic(
            scores,
            output_path,
            metadata=scoring_provenance(
                loaded[0][0] if loaded else None, method_entry, state.num_processes, precision[0]
            ),
        )
        log.info(
            "wrote %d score rows of %s from %d processes to %s",
            scores.num_rows,
            benchmark_name,
            state.num_processes,
            output_path,
        )
        if began:  # every process's items, over the main process's scoring time up to the gathered table
            log.info(rate_line("scored", items.num_rows, "items", time.perf_counter() - began[0]))
    state.wait_for_everyone()


# ------------------------------------------------------------------------------------------- launching


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
