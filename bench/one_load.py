"""One model load for all of a model's benchmarks (issue 28, section 4): the same benchmarks scored (a) as before,
one process per benchmark (a score_benchmark job each: Python start, imports, model load, scoring), and (b) in
one process that loads the model once (the score_model job, lmbias.jobs.model_scoring).

    .venv/bin/python bench/one_load.py --data ../shared/data [--shapes tiny-bert,llama-1b]
        [--benchmarks winobias,crows_pairs,stereoset] [--items 16] [--layers 16] [--vocab 32000] [--threads 2]

Shapes: `tiny-bert` (lmbias.engine.tiny), and `llama-1b`: a randomly initialised LlamaForCausalLM of
Llama-3.2-1B's width (bench/llm_memory.py's build: hidden 2048, 16 layers, 32 heads, 8 key/value heads) saved in
bfloat16 safetensors and loaded as bf16 weights (model entry `dtype: bf16`), with the tiny Llama's tokenizer;
`--vocab` cuts its 128,256-row embedding (default 32,000: 1.0 B parameters) so that it builds on a small machine.
The default run is tiny-bert only, a few items each (about a minute on 2 cores); llama-1b builds a 2 GB model
first and needs about 6 GB of memory.

Every run is a subprocess. Printed per shape and way: wall seconds from the start of the process(es) to their
end (summed over the processes of (a)), seconds outside the forward passes (wall minus the timing files'
score_s: Python start, imports, model loading, writing), and the largest peak RSS of the processes. The score
files of (a) and (b) are checked to be the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

SHAPES = ("tiny-bert", "llama-1b")


def prepare(args, work: Path) -> dict:
    """Items of each benchmark (the first --items rows) and the models: {shape: model entry}."""
    import yaml

    from lmbias.io import write_table_atomic
    from lmbias.parsers import parse_benchmark, required_files

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    for name in args.benchmarks:
        entry = config["benchmarks"][name]
        files = {
            f: Path(args.data) / entry["dataset"] / f for f in required_files(entry, config["data"], name, args.data)
        }
        items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, name)
        write_table_atomic(items.slice(0, args.items), work / "data" / f"{name}.parquet")
        (work / "library").mkdir(exist_ok=True)
        (work / "library" / f"{name}.sha256").write_text(f"0  {name}\n")
    models = {}
    for shape in args.shapes:
        folder = work / "models" / shape
        if shape == "tiny-bert":
            from lmbias.engine.tiny import build_tiny_model

            build_tiny_model("bert", folder, seed=0)
            models[shape] = {"path": str(folder), "family": "mlm", "revision": "local"}
        else:
            sys.path.insert(0, str(REPO / "bench"))
            from llm_memory import build

            info = build(folder, args.layers, args.vocab)
            print(f"llama-1b: {info['parameters'] / 1e9:.2f} B parameters, {info['shape']}", flush=True)
            models[shape] = {"path": str(folder), "family": "clm", "revision": "local", "dtype": "bf16"}
    return {"config": config, "models": models}


def job_spec(args, work: Path, config: dict, shape: str, entry: dict, out: Path, names):
    from lmbias.jobs.description import BenchmarkTask, ScoringJob
    from lmbias.workflow.params import benchmark_scoring_slice

    tasks = {
        name: BenchmarkTask(
            benchmark_scoring_slice(config, name),
            work / "data" / f"{name}.parquet",
            out / "scores" / f"{name}.parquet",
            [work / "library" / f"{name}.sha256"],
        )
        for name in names
    }
    method = {"kind": "pretrained", "model_dir": None}
    return ScoringJob(
        shape,
        entry,
        method,
        tasks,
        weights_dir=entry["path"],
        threads=args.threads,
        max_tokens=8192,
        manifest=out / "scores.json",
        timing=out / "scores.job.tsv",
    )


def worker(spec_path: str, way: str) -> None:
    """In a fresh process, the one way to score (score_benchmarks): (a) with the spec's one benchmark, as rule
    score_benchmark's job does; (b) with all of them, as rule score_model's (the spec has a manifest)."""
    from lmbias.jobs.description import ScoringJob
    from lmbias.jobs.model_scoring import score_benchmarks

    spec = ScoringJob.read(spec_path)
    if way == "a":
        spec = dataclasses.replace(spec, manifest=None)
    score_benchmarks(spec)


def run(spec, way: str, work: Path) -> float:
    path = work / f"spec-{way}-{len(list(Path(work).glob('spec-*')))}.json"
    path.write_text(spec.to_json())
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--worker", str(path), way], check=True)
    return time.perf_counter() - start


def measure(args, work: Path, prepared: dict, shape: str) -> list[dict]:
    from lmbias.engine import job_timing

    config, entry = prepared["config"], prepared["models"][shape]
    rows = []
    # (a) one process per benchmark
    wall, scoring, peak = 0.0, 0.0, 0.0
    for name in args.benchmarks:
        out = work / shape / "a" / name
        spec = job_spec(args, work, config, shape, entry, work / shape / "a", [name])
        spec = dataclasses.replace(spec, timing=out / "job.tsv")
        wall += run(spec, "a", work)
        load, record = job_timing.read_timing_rows(spec.timing)  # (load), then the benchmark
        scoring += float(record["score_s"])
        peak = max(peak, float(record["peak_rss_mib"]))
    rows.append({"shape": shape, "way": "(a) one process per benchmark", "wall": wall, "outside": wall - scoring,
                 "peak": peak, "processes": len(args.benchmarks)})  # fmt: skip
    # (b) one process
    spec = job_spec(args, work, config, shape, entry, work / shape / "b", args.benchmarks)
    wall = run(spec, "b", work)
    records = [r for r in job_timing.read_timing_rows(spec.timing) if r["benchmark"] != job_timing.LOAD_ROW]
    scoring = sum(float(r["score_s"]) for r in records)
    peak = max(float(r["peak_rss_mib"]) for r in records)
    rows.append({"shape": shape, "way": "(b) one process", "wall": wall, "outside": wall - scoring, "peak": peak,
                 "processes": 1})  # fmt: skip
    for name in args.benchmarks:
        a = (work / shape / "a" / "scores" / f"{name}.parquet").read_bytes()
        b = (work / shape / "b" / "scores" / f"{name}.parquet").read_bytes()
        assert a == b, f"{shape} {name}: (a) and (b) wrote different score files"
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="the benchmark data folder (a copy of shared/data)")
    parser.add_argument("--shapes", default="tiny-bert", help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--benchmarks", default="winobias,crows_pairs,stereoset", help="comma-separated names")
    parser.add_argument("--items", type=int, default=16, help="items per benchmark (default 16)")
    parser.add_argument("--layers", type=int, default=16, help="llama-1b's layers (default 16, the 1B's)")
    parser.add_argument("--vocab", type=int, default=32000, help="llama-1b's vocabulary rows (default 32,000)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each process (default 2)")
    parser.add_argument("--worker", nargs=2, metavar=("SPEC", "WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if not args.data:
        parser.error("--data is required")
    args.shapes = args.shapes.split(",")
    args.benchmarks = args.benchmarks.split(",")
    unknown = sorted(set(args.shapes) - set(SHAPES))
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    with tempfile.TemporaryDirectory(prefix="one-load-") as tmp:
        work = Path(tmp)
        prepared = prepare(args, work)
        rows = [row for shape in args.shapes for row in measure(args, work, prepared, shape)]
    print(f"\n{len(args.benchmarks)} benchmarks ({', '.join(args.benchmarks)}), {args.items} items each, "
          f"{args.threads} threads; score files of (a) and (b) byte-identical")  # fmt: skip
    print(f"{'shape':<10} {'way':<32} {'processes':>9} {'wall s':>8} {'outside forward s':>18} {'peak RSS MiB':>13}")
    for r in rows:
        print(f"{r['shape']:<10} {r['way']:<32} {r['processes']:>9} {r['wall']:>8.1f} {r['outside']:>18.1f} "
              f"{r['peak']:>13.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
