"""The one way to score: `score_benchmarks(job, gpus)` scores 1..N benchmarks of a (model, method, seed) with
the model loaded once, in this process or across the processes of an `accelerate launch`. Both scoring rules
call it: score_model with every benchmark of a summary (and a manifest), score_benchmark with the one benchmark
asked for on its own (`one_benchmark_job`). It keeps a score file that already holds its score key, and holds
the seed's scoring lock (lmbias.engine.score_lock) while it decides and writes, so no file is written by two
jobs (docs/scoring-jobs.md).

The job is a `lmbias.jobs.description.ScoringJob`: the (model, method, seed), and per benchmark a `BenchmarkTask`
(its scoring slice, items file, score file and library fingerprint files), a manifest (score_model only) and the
job's timing file.

For each benchmark it computes the score key (lmbias.metrics.score_keys). A score file that already holds
that key is kept without a forward pass; the others are scored with the model loaded once (not at all when
every file is kept) and each is written atomically with its key as soon as it is done, so a killed job
loses nothing finished and its rerun scores only what is missing.

A benchmark that fails with an error (bad items, an input longer than the token budget, out of memory at
the smallest batch) is logged with its traceback and named on the console at once; the job goes on with the
others and then fails, naming every failed benchmark and its score file (BenchmarksFailedError); a job of one
benchmark raises its error as it is. Going on is sound: a benchmark's scoring holds no state the next one reads
(each gets a fresh token budget and torch's random state as it was after loading), and the failed benchmark's
tensors are freed when its error unwinds (on CUDA the allocator's cache is emptied too, so an out-of-memory
failure does not starve the next one). KeyboardInterrupt and SystemExit (Ctrl-C, Snakemake killing the job)
end the job at once.

Several GPUs (resources.gpu > 1, no device_map): the benchmarks to score go to one `accelerate launch ...
lmbias score --job FILE` (score_launched), whose processes each load the model once and score every listed
benchmark data-parallel (lmbias.jobs.sharded). There a failing benchmark ends the launch (the processes must
stay in step); the benchmarks finished before it keep their files.
"""

from __future__ import annotations

import gc
import logging
import shlex
import subprocess
import sys
import time
from pathlib import Path

from lmbias.benchmarks import catalog
from lmbias.engine import job_timing
from lmbias.engine.score_lock import scoring_lock, seed_folder_of_score_file
from lmbias.errors import BenchmarksFailedError
from lmbias.jobs.description import BenchmarkTask, ScoringJob
from lmbias.lazy import lazy_module
from lmbias.metrics.score_keys import score_key, stored_key, write_manifest

torch = lazy_module("torch")
pq = lazy_module("pyarrow.parquet")

log = logging.getLogger(__name__)


def benchmark_keys(job: ScoringJob) -> dict[str, str]:
    """{benchmark: its score key now} (score_keys.score_key; each folder's identity computed once)."""
    identities: dict = {}
    method_dir = job.method_entry.get("model_dir")
    return {
        name: score_key(
            bench.entry,
            bench.items,
            job.model_entry,
            job.method_entry,
            bench.library,
            job.seed,
            weights_dir=job.weights_dir,
            method_dir=method_dir,
            identities=identities,
        )
        for name, bench in job.benchmarks.items()
    }


def to_score(job: ScoringJob, keys: dict[str, str]) -> list[str]:
    """The benchmarks whose score file does not hold their key, in the job's order."""
    return [name for name, bench in job.benchmarks.items() if stored_key(bench.scores) != keys[name]]


def _console(message: str) -> None:
    """A line on the console the job was started from (the job's stderr goes to its log)."""
    print(message, file=sys.__stderr__, flush=True)


def _rng_state():
    return torch.get_rng_state(), (torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)


def _set_rng_state(state) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _failure_line(name: str, bench: BenchmarkTask, error: BaseException) -> str:
    return f"{name} ({bench.scores}): {type(error).__name__}: {error}"


def score_in_process(
    job: ScoringJob, names: list[str], keys: dict[str, str], timing_rows: list[dict]
) -> dict[str, str]:
    """Score `names` with the model loaded once in this process; {benchmark: failure line} of those that
    failed. `timing_rows` gets the load row and one row per benchmark; the timing file is rewritten after each
    benchmark, so a killed job's keeps what it did."""
    from lmbias.io import write_table_atomic
    from lmbias.jobs.scoring import load_for_method, prepare_scoring, score_file_metadata, score_loaded

    model_name, model_entry, method_entry = job.model_name, job.model_entry, job.method_entry
    device = prepare_scoring(job.threads)
    load = {"benchmark": job_timing.LOAD_ROW, "device": str(device), "processes": 1, "status": "ok"}
    timing_rows.insert(0, load)
    began = time.perf_counter()
    try:
        model, tokenizer = load_for_method(model_name, model_entry, method_entry, device)
    except BaseException as err:
        load["status"] = type(err).__name__
        raise
    finally:
        load.update(load_s=time.perf_counter() - began, **job_timing.peak_memory(device))
        _write_timing(job, timing_rows)
    log.info(
        "loaded %s (%s) once for %d benchmark(s) in %.1f s",
        model_name,
        method_entry["kind"],
        len(names),
        load["load_s"],
    )
    after_load = _rng_state()  # what each benchmark's scoring starts from, as in a job of its own
    failures = {}
    for name in names:
        bench = job.benchmarks[name]
        record = {"benchmark": name, "device": str(device), "processes": 1, "status": "ok"}
        timing_rows.append(record)
        job_timing.reset_peak_cuda(device)
        _set_rng_state(after_load)
        try:
            items = pq.read_table(bench.items)
            record["items"] = items.num_rows
            scores, precision = score_loaded(
                model,
                tokenizer,
                device,
                model_name,
                model_entry,
                name,
                bench.entry,
                items,
                job.max_tokens,
                record,
            )
            metadata = score_file_metadata(model, method_entry, 1, precision, keys[name])
            write_table_atomic(scores, bench.scores, metadata=metadata)
            log.info("wrote %s (score key %s)", bench.scores, keys[name][:12])
        except Exception as err:  # noqa: BLE001 (named, logged and reported when the others are done)
            record.update(status=type(err).__name__, items_per_s=None)
            if len(job.benchmarks) == 1:  # a job of one benchmark (rule score_benchmark): its error as it is
                raise
            failures[name] = _failure_line(name, bench, err)
            log.exception("scoring benchmark %s failed; its score file %s is not written", name, bench.scores)
            _console(f"lmbias: scoring {failures[name]}; going on with the other benchmarks")
        except BaseException as err:  # interrupted: what is finished stays, the job ends now
            record.update(status=type(err).__name__, items_per_s=None)
            raise
        finally:
            record.update(job_timing.peak_memory(device))
            _write_timing(job, timing_rows)
        if name in failures and torch.device(device).type == "cuda":
            # the error (and the frames holding its tensors) is gone: give its memory back before the next one
            gc.collect()
            torch.cuda.empty_cache()
    return failures


def _write_timing(job: ScoringJob, rows: list[dict]) -> None:
    if job.timing:
        job_timing.write_timing_rows(job.timing, rows)


def _kept_rows(job: ScoringJob, kept: list[str]) -> list[dict]:
    return [{"benchmark": name, "status": "kept"} for name in kept]


def score_benchmarks(job: ScoringJob, gpus: int = 1) -> dict[str, str]:
    """Score what is missing of the job's benchmarks; {benchmark: "kept" | "scored"}. With a `manifest` in the
    job (rule score_model) it is written once every file holds its key. `gpus` > 1 (and no device_map):
    data-parallel through `accelerate launch`. The seed's scoring lock is held from the check of the score keys
    to the last file, so two jobs of one seed neither write one file nor read one half-done."""
    for name, bench in job.benchmarks.items():  # a config error stops the job before any loading
        catalog.definition_of(bench.entry, name)
        catalog.check_family(name, bench.entry, job.model_entry["family"], job.model_name)
    keys = benchmark_keys(job)
    with scoring_lock(_seed_folder(job)):
        return _score_locked(job, keys, gpus)


def _seed_folder(job: ScoringJob) -> Path:
    """The folder whose scoring lock the job holds: the manifest's (seed{k}/), else its first score file's."""
    if job.manifest:
        return Path(job.manifest).parent
    return seed_folder_of_score_file(next(iter(job.benchmarks.values())).scores)


def _score_locked(job: ScoringJob, keys: dict[str, str], gpus: int) -> dict[str, str]:
    """score_benchmarks' work, with the seed's scoring lock held."""
    names = to_score(job, keys)
    kept = [name for name in job.benchmarks if name not in names]
    where = f"{job.model_name}/{job.method_entry['kind']} seed {job.seed}"
    log.info(
        "%s: %d benchmark(s) to score (%s), %d kept by their score key (%s)",
        where,
        len(names),
        ", ".join(names) or "none",
        len(kept),
        ", ".join(kept) or "none",
    )
    for name in kept:
        log.info("%s holds its score key %s: kept", job.benchmarks[name].scores, keys[name][:12])
    for name in names:  # a file there with another key: named as changed (a missing one is plainly scored)
        found = stored_key(job.benchmarks[name].scores)
        if found is not None:
            log.info(
                "%s: its score key %s is not %s now: scored again",
                job.benchmarks[name].scores,
                found[:12],
                keys[name][:12],
            )
    rows = _kept_rows(job, kept)
    failures: dict[str, str] = {}
    if not names:
        _write_timing(job, rows)  # nothing to score: the model is not loaded
    elif gpus <= 1 or job.model_entry.get("device_map") is not None:
        failures = score_in_process(job, names, keys, rows)
    else:
        launch_distributed(job, names, keys, gpus)
        if job.timing and Path(job.timing).exists():  # the launched main process's rows, and the kept
            _write_timing(job, job_timing.read_timing_rows(job.timing) + rows)
    if failures:
        keep_going = (
            " score files are written; a rerun scores only the failed ones, and with --keep-going Snakemake"
            " still builds the other benchmarks' own targets, metrics/<benchmark>.parquet, in this run):\n"
        )
        raise BenchmarksFailedError(
            f"scoring failed for {len(failures)} of {len(job.benchmarks)} benchmark(s) of {where} (the others'"
            + keep_going
            + "\n".join(f"  {failures[name]}" for name in names if name in failures)
        )
    for name, bench in job.benchmarks.items():
        if stored_key(bench.scores) != keys[name]:
            raise BenchmarksFailedError(
                f"{bench.scores}: benchmark {name!r} has no score file with its key after scoring"
            )
    if job.manifest:
        _write_manifest(job, keys, names)
    return {name: ("scored" if name in names else "kept") for name in job.benchmarks}


def _write_manifest(job: ScoringJob, keys: dict[str, str], scored: list[str]) -> None:
    """scores.json: each benchmark's score file, key, rows, and whether (and for how long) this run scored it."""
    seconds: dict[str, float] = {}
    if job.timing and Path(job.timing).exists():
        seconds = {
            row["benchmark"]: float(row["score_s"])
            for row in job_timing.read_timing_rows(job.timing)
            if row.get("score_s") not in (None, "", "NA")
        }
    entries = {
        name: {
            "scores": str(bench.scores),
            "score_key": keys[name],
            "rows": pq.read_metadata(bench.scores).num_rows,
            "scored": name in scored,
            "seconds": seconds.get(name, 0.0) if name in scored else 0.0,
        }
        for name, bench in job.benchmarks.items()
    }
    write_manifest(job.manifest, entries)


def _accelerate_launch(gpus: int, output, args: list[str]) -> None:
    """`accelerate launch ... -m lmbias.cli score <args>` on `gpus` processes, its rendezvous port derived from
    the job's `output` path (concurrent jobs on one node do not collide), its output in this job's log."""
    from lmbias.engine.distributed import launch_command, launch_env, main_process_port

    cmd = launch_command(gpus, main_process_port(str(Path(output).resolve())), args)
    print("launching:", shlex.join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=launch_env(), stdout=sys.stderr, stderr=sys.stderr)


def launch_distributed(job: ScoringJob, names: list[str], keys: dict[str, str], gpus: int) -> None:
    """`accelerate launch --num_processes <gpus> -m lmbias.cli score --job FILE` for the benchmarks `names`
    (a rendezvous port derived from the manifest's path, or the one score file's, so concurrent jobs on one node
    do not collide)."""
    spec = job.launched({name: keys[name] for name in names})
    if job.timing:  # the launched main process writes it afresh: no rows of an earlier run
        Path(job.timing).unlink(missing_ok=True)
    anchor = Path(job.manifest) if job.manifest else Path(job.benchmarks[names[0]].scores)
    job_file = anchor.with_name(f"{anchor.stem}.job.json")
    job_file.parent.mkdir(parents=True, exist_ok=True)
    job_file.write_text(spec.to_json(), encoding="utf-8")
    try:
        _accelerate_launch(gpus, anchor, ["--job", str(job_file)])
    finally:
        job_file.unlink(missing_ok=True)


def score_launched(job: ScoringJob) -> None:
    """`lmbias score --job FILE`: the benchmarks of a job spec (lmbias.jobs.model_scoring, each with its
    `score_key`), every one of them scored across the processes of an `accelerate launch` with the model
    loaded once per process; the main process writes the score files and the timing rows (job.timing).
    One process: score_in_process. A failing benchmark ends the launch (the processes must stay
    in step), named in the error; the benchmarks finished before it keep their files."""
    from accelerate import PartialState
    from accelerate.utils import gather_object, parse_flag_from_env

    from lmbias.jobs.scoring import load_for_method
    from lmbias.jobs.sharded import score_sharded

    names = list(job.benchmarks)
    keys = {name: job.benchmarks[name].score_key for name in names}
    state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available())
    rows: list[dict] = []
    if state.num_processes == 1:
        failures = score_in_process(job, names, keys, rows)
        if failures:
            raise BenchmarksFailedError("scoring failed:\n" + "\n".join(f"  {line}" for line in failures.values()))
        return
    torch.manual_seed(0)
    if job.threads:  # the job's threads are shared by the processes of this node
        torch.set_num_threads(max(1, int(job.threads) // state.num_processes))
    began = time.perf_counter()
    loaded = [load_for_method(job.model_name, job.model_entry, job.method_entry, state.device)]
    load_s = max(gather_object([time.perf_counter() - began]))  # the slowest process's loading
    load = {"benchmark": job_timing.LOAD_ROW, "status": "ok", "device": str(state.device), "load_s": load_s}
    rows.append({**load, "processes": state.num_processes})
    for name in names:
        bench = job.benchmarks[name]
        try:
            record = score_sharded(
                state,
                loaded,
                time.perf_counter(),
                job.model_name,
                job.model_entry,
                job.method_entry,
                name,
                bench.entry,
                bench.items,
                bench.scores,
                job.max_tokens,
                score_key=keys[name],
            )
        except Exception as err:
            raise BenchmarksFailedError(
                f"scoring {name} ({bench.scores}) failed in process {state.process_index} of "
                f"{state.num_processes}: {type(err).__name__}: {err}"
            ) from err
        if state.is_main_process:
            record.pop("load_s", None)
            rows.append({"benchmark": name, **record})
            if job.timing:
                job_timing.write_timing_rows(job.timing, rows)
    state.wait_for_everyone()
