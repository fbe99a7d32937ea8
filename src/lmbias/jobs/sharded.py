"""Data-parallel (multi-GPU, or multi-process CPU) scoring of one benchmark through Accelerate.

Launched as ``accelerate launch --config_file resources/accelerate/multi_gpu.yaml --num_processes N
--main_process_port P -m lmbias.cli score --job FILE`` (lmbias.jobs.model_scoring does this for both scoring
rules when their ``resources.gpu`` > 1). Every process loads the model on its own device, scores a shard of the
items with
the benchmark's ordinary scorer (`catalog.definition(dataset).score`, so dedup, length sorting and
batching happen per shard), the per-shard score tables are gathered to the main process
(`accelerate.utils.gather_object`) and only the main process writes the parquet.

How the item order survives: shards are *contiguous* row ranges (`shard_bounds`), ordered by rank, and
concatenated in rank order. That is the original order because every row-local scorer
(`BenchmarkDef.row_local`) returns exactly one score row per item, in item order, computed from that item
alone — checked for each shard (row count) before gathering. Scorers that aggregate across items (SEAT:
per-unit association means and positions; the classic SEAT tests: effect sizes over whole tests) are not
shardable: the main process scores them whole and the others wait. A new benchmark is treated as
not shardable until its definition says `row_local=True` (and the equality test in
tests/cluster/test_distributed.py covers it), so adding one can never silently produce wrong scores.

One process: lmbias.jobs.model_scoring.score_in_process. The launch commands are lmbias.engine.distributed's.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa
import pyarrow.parquet as pq

from lmbias.benchmarks import catalog
from lmbias.benchmarks.definition import BenchmarkDef, score_items
from lmbias.engine import job_timing
from lmbias.engine.batching import EngineStats, scoring_budget, scoring_precision
from lmbias.io import write_table_atomic
from lmbias.progress import job_progress, rate_line

log = logging.getLogger(__name__)


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


def score_table_sharded(
    items: pa.Table, definition: BenchmarkDef, rank: int, world: int, score_fn
) -> tuple[int, pa.Table | None]:
    """This process's (rank, scores) part: `score_fn(shard)` on its contiguous shard for a row-local
    benchmark (`definition.row_local`); the whole table on rank 0 (None elsewhere) otherwise. Pure, so the
    split is testable without launching processes."""
    dataset = definition.name
    if definition.row_local:
        start, stop = shard_bounds(items.num_rows, world, rank)
        if stop == start:
            return rank, None
        shard = items.slice(start, stop - start)
        scores = score_fn(shard)
        if scores.num_rows != shard.num_rows:
            raise RuntimeError(
                f"{dataset} scorer returned {scores.num_rows} rows for {shard.num_rows} items; a row-local "
                f"scorer must return one row per item (set row_local=False in {dataset!r}'s BenchmarkDef)"
            )
        return rank, scores
    return rank, (score_fn(items) if rank == 0 else None)


def score_sharded(
    state,
    loaded: list,
    began_job: float,
    model_name,
    model_entry,
    method_entry,
    benchmark_name,
    benchmark_entry,
    items_path,
    output_path,
    max_tokens,
    score_key: str | None = None,
) -> dict | None:
    """One benchmark scored across the processes of `state`; the main process writes its score file (with
    `score_key` in its metadata when given) and gets the timing record (None elsewhere). `loaded`: [] or
    [(model, tokenizer)] of this process, filled on first use and kept for the next benchmark."""
    from accelerate.utils import gather_object

    from lmbias.jobs.scoring import effective_precision, load_for_method, score_file_metadata

    dataset = catalog.measure_of(benchmark_entry)  # the definition that scores it (its dataset's own by default)
    definition = catalog.definition(dataset, benchmark_name)
    catalog.check_family(benchmark_name, benchmark_entry, model_entry["family"], model_name)
    items = pq.read_table(items_path)
    stats = EngineStats()
    budgets = []  # this process's TokenBudget, once it scores

    elapsed = [0.0]
    began: list[float] = []  # when this process started scoring (after loading its model)
    precision = [None]  # `auto` resolved for the loaded model (scoring_provenance records it)

    def score_fn(part: pa.Table) -> pa.Table:
        if not loaded:  # a process with nothing to score loads no model
            loaded.append(load_for_method(model_name, model_entry, method_entry, state.device))
        model, tokenizer = loaded[0]
        start = time.perf_counter()  # scoring only, as in score_loaded's log line
        began.append(start)
        key = f"models.{model_name}.precision"
        precision[0] = effective_precision(model_entry.get("precision", "auto"), model, state.device, key)
        # the main process's bar: its own shard (the others run shards of about the same size)
        with (
            scoring_budget(max_tokens, f"models.{model_name}.max_tokens") as budget,
            scoring_precision(precision[0], key),
            job_progress(
                f"scoring {benchmark_name} (process 0 of {state.num_processes})",
                unit="items",
                enabled=state.is_main_process,
                total=part.num_rows,
            ),
        ):
            budgets.append(budget)
            scores = score_items(
                definition, part, model, tokenizer, model_name, model_entry, benchmark_entry.get("scoring", {}), stats
            )
        elapsed[0] = time.perf_counter() - start
        return scores

    part = score_table_sharded(items, definition, state.process_index, state.num_processes, score_fn)
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
    if not state.is_main_process:
        return None
    finals = [p["final"] for p in everyone if p["final"] is not None]
    loads = [p["load_s"] for p in everyone if p["load_s"] is not None]
    score_s = time.perf_counter() - began[0] if began else None
    record = {
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
    }
    scores = reassemble(parts)
    metadata = score_file_metadata(
        loaded[0][0] if loaded else None, method_entry, state.num_processes, precision[0], score_key
    )
    write_table_atomic(scores, output_path, metadata=metadata)
    log.info(
        "wrote %d score rows of %s from %d processes to %s",
        scores.num_rows,
        benchmark_name,
        state.num_processes,
        output_path,
    )
    if began:  # every process's items, over the main process's scoring time up to the gathered table
        log.info(rate_line("scored", items.num_rows, "items", time.perf_counter() - began[0]))
    return record
