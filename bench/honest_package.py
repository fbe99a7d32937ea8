"""HONEST against the authors' own package: lmbias's reading, by default and with the metric option
`erased_as_hurtful` (the authors' emoji defect), beside `honest.HonestEvaluator` on real models' completions; and
lmbias's rule for what unidecode erases beside unidecode itself, code point by code point.

    .venv/bin/python bench/honest_package.py [--runs smollm2-135m-instruct:raw,smollm2-135m-instruct:chat,...]
        [--entry honest-subset] [--data-dir ../shared/data] [--threads 2] [--code-points-only]
        [--write-erased-ranges] [--write-fixture tests/fixtures/honest_real_completions.parquet]

1. Installs the package (PACKAGE: honest 0.2.1 and the Unidecode it pins, 1.3.2; pandas and numpy pinned) into its
   own virtual environment, bench/.venv-honest (git-ignored), once. unidecode is GPL: it runs there, never in
   lmbias.
2. Code points (bench/honest_authors/driver.py code-points): which of the 1,114,112 code points unidecode writes
   nothing for, against lmbias.metrics.hurtlex's `erased` (which reads lmbias.metrics.unidecode_erased, the list
   --write-erased-ranges writes from this very output). Any code point that differs is a failure.
3. Each run (MODEL:raw or MODEL:chat: models.MODEL of config.yaml, loaded from its dequantized folder under
   resources/models, the prompts read raw or behind its chat template): config.yaml's --entry (default
   `honest-subset`: the first 20 templates of each category, 20 seeded samples of 10 new tokens; `honest`: all 810
   templates) through the scoring job, as the workflow runs it.
   Then HONEST@k (k = 1, 5, 10, 20) three ways on the same completions: lmbias's default, lmbias with the option,
   and HonestEvaluator.honest (driver.py score; HurtLex EN 1.2 read from --data-dir instead of its URL); and each
   completion's category by the option and by the package's sentence rule. Exit status 1 when the option and the
   package differ at any k or any completion.

--write-fixture writes every run's completions with the package's category of each (parquet), which
tests/metrics/test_honest_real_completions.py reads: the test keeps lmbias's option equal to the package on real
models' texts without unidecode. The models' folders come from the real-model target (docs/real-models.md);
measured figures: docs/benchmarks/honest.md ("The authors' emoji defect").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

VENV = ROOT / "bench" / ".venv-honest"
DRIVER = ROOT / "bench" / "honest_authors" / "driver.py"
PACKAGE = ["honest==0.2.1", "Unidecode==1.3.2", "pandas==3.1.1", "numpy==2.4.6"]
K = (1, 5, 10, 20)
RUNS = "smollm2-135m-instruct:raw,smollm2-135m-instruct:chat,gemma-3-270m:raw"


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    marker = VENV / "lmbias-installed.txt"
    if marker.is_file() and marker.read_text().split() == PACKAGE:
        return python
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGE], check=True)
    marker.write_text(" ".join(PACKAGE) + "\n")
    return python


def driver(python: Path, *args) -> None:
    proc = subprocess.run([str(python), str(DRIVER), *map(str, args)], capture_output=True, text=True)
    if proc.returncode:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"the package's driver failed ({args[0]}, exit {proc.returncode})")


ERASED_MODULE = ROOT / "src" / "lmbias" / "metrics" / "unidecode_erased.py"
ERASED_HEADER = '''"""The code points for which unidecode 1.3.2 (the version the HONEST package pins) writes nothing:
what its folding erases (lmbias.metrics.hurtlex `erased`, the authors' emoji defect). A measurement of what it
writes, for each of the 1,114,112 code points, made by bench/honest_package.py --write-erased-ranges, which wrote
this file and checks it; none of unidecode's transliterations is here. Ranges of hexadecimal code points,
first-last or one.
"""

# fmt: off
ERASED_RANGES = """
'''


def erased_ranges(erased: list[int]) -> list[str]:
    """Sorted code points as ranges, "0080-009F" or "00AD"."""
    ranges: list[list[int]] = []
    for code in erased:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return [f"{a:04X}" if a == b else f"{a:04X}-{b:04X}" for a, b in ranges]


def check_code_points(python: Path, where: Path, write: bool) -> int:
    """lmbias's `erased` against unidecode on every code point (after writing lmbias.metrics.unidecode_erased from
    unidecode's output, with `write`); the count of code points that differ."""
    import textwrap

    out = where / "code_points.json"
    started = time.perf_counter()
    driver(python, "code-points", out)
    theirs = json.loads(out.read_text())["erased"]
    if write:
        body = textwrap.fill(" ".join(erased_ranges(theirs)), 116, initial_indent="    ", subsequent_indent="    ")
        ERASED_MODULE.write_text(ERASED_HEADER + body + '\n"""\n# fmt: on\n')
        print(f"wrote {ERASED_MODULE.relative_to(ROOT)} ({len(erased_ranges(theirs))} ranges)")
    result = subprocess.run(  # a fresh interpreter: the module as written now
        [sys.executable, "-c", "import json, sys; from lmbias.metrics.hurtlex import erased; "
         "print(json.dumps([c for c in range(0x110000) if erased(chr(c))]))"],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    ours = set(json.loads(result.stdout))
    differ = sorted(ours.symmetric_difference(theirs))
    seconds = time.perf_counter() - started
    print(f"code points: 1,114,112 read, unidecode erases {len(theirs):,}, lmbias {len(ours):,} ({seconds:.0f} s)")
    for code in differ[:12]:
        name = unicodedata.name(chr(code), unicodedata.category(chr(code)))
        print(f"  U+{code:04X} {name}: unidecode {'erases' if code in set(theirs) else 'writes'} it, lmbias not")
    print(f"  {len(differ)} differ")
    return len(differ)


def generate(run: str, entry_name: str, config: dict, data_dir: Path, where: Path):
    """The scores of config.yaml's benchmark `entry_name` for one run (MODEL:raw|chat), through the scoring job."""
    import pyarrow.parquet as pq

    from lmbias.jobs import model_scoring
    from lmbias.jobs.description import one_benchmark_job
    from lmbias.parsers import parse_benchmark, parse_inputs

    name, _, reading = run.partition(":")
    if name not in config["models"] or reading not in ("raw", "chat"):
        raise SystemExit(f"--runs: {run!r} is not MODEL:raw or MODEL:chat with MODEL a model of config.yaml")
    entry = {**config["models"][name], "chat_template": reading == "chat"}
    entry["path"] = str(ROOT / entry["path"])
    if not (Path(entry["path"]) / "config.json").is_file():
        raise SystemExit(
            f"{entry['path']}: no dequantized model (run the real-model target first: docs/real-models.md)"
        )
    bench = config["benchmarks"][entry_name]
    files = {key: str(data_dir / d / f) for key, d, f in parse_inputs(bench, config["data"], entry_name)}
    folder = where / run.replace(":", "-")
    folder.mkdir()
    items = folder / "items.parquet"
    pq.write_table(parse_benchmark(bench, files, entry_name), items)
    out = folder / "scores.parquet"
    started = time.perf_counter()
    job = one_benchmark_job(items, out, name, entry, {"kind": "pretrained"}, entry_name, bench)
    model_scoring.score_benchmarks(job)
    print(f"{run}: {entry_name} generated in {time.perf_counter() - started:.0f} s")
    return pq.read_table(out)


def option_categories(scores) -> list:
    """Each completion's category with erased_as_hurtful, in the scores' row order (the metric's own relabelling)."""
    import numpy as np

    from lmbias.metrics.honest import with_erased

    labels = np.asarray(scores.column("hurtlex_conservative").to_pylist(), dtype=object)
    return with_erased(scores, "conservative", labels).tolist()


def honest_at(scores, erased_as_hurtful: bool) -> dict[int, float]:
    from lmbias.metrics.honest import HonestOptions, honest_metric_rows

    rows = honest_metric_rows(scores, HonestOptions(k=K, bootstrap=0, erased_as_hurtful=erased_as_hurtful))
    return {int(r["metric"].removeprefix("honest_k")): r["value"] for r in rows
            if r["metric"].startswith("honest_k") and r["subset"] == "all"}  # fmt: skip


def rank_order(scores) -> list[int]:
    """The scores' row indices by (template, rank): the order the package's driver reads and answers in."""
    keys = list(zip(scores.column("template_id").to_pylist(), scores.column("rank").to_pylist()))
    return sorted(range(scores.num_rows), key=keys.__getitem__)


def by_template(scores) -> list[tuple[int, str, list[str]]]:
    columns = {c: scores.column(c).to_pylist() for c in ("template_id", "category", "completion")}
    templates: dict[int, tuple[str, list[str]]] = {}
    for i in rank_order(scores):
        tid, category, completion = (columns[c][i] for c in ("template_id", "category", "completion"))
        templates.setdefault(tid, (category, []))[1].append(completion)
    return [(tid, category, texts) for tid, (category, texts) in templates.items()]


def compare(run: str, table, package: dict) -> tuple[list[dict], int]:
    """Prints the run's three rows of HONEST@k and the completions the option and the package read differently;
    returns the fixture's rows of the run and the count of differences (completions and k)."""
    ours, option, theirs = honest_at(table, False), honest_at(table, True), package["honest"]
    theirs = {int(k): v for k, v in theirs.items()}
    order = rank_order(table)
    mine = option_categories(table)
    their_rows = [category for per_template in package["categories"] for category in per_template]
    differ = [(i, mine[i], c) for i, c in zip(order, their_rows) if mine[i] != c]
    for reading, values in (("lmbias", ours), ("erased_as_hurtful", option), ("the package", theirs)):
        cells = " | ".join(f"{values[k]:.3f}" for k in K)
        print(f"| {run} | {reading} | {cells} | {len(differ) if reading == 'the package' else ''} |")
    for i, mine_c, their_c in differ[:10]:
        text = table["completion"][i].as_py()
        print(f"    template {table['template_id'][i].as_py()} rank {table['rank'][i].as_py()} {text!r}: "
              f"option {mine_c}, package {their_c}")  # fmt: skip
    gap = [k for k in K if abs(option[k] - theirs[k]) > 1e-9]
    columns = ("template_id", "category", "rank", "completion")
    fixture = [
        {"run": run, **{c: table[c][i].as_py() for c in columns}, "package_category": their_c}
        for i, their_c in zip(order, their_rows)
    ]
    return fixture, len(differ) + len(gap)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default=RUNS, help="MODEL:raw or MODEL:chat, comma-separated (default: %(default)s)")
    ap.add_argument("--entry", default="honest-subset", help="an HONEST entry of config.yaml's benchmarks")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the generation")
    ap.add_argument("--code-points-only", action="store_true", help="only step 2")
    ap.add_argument(
        "--write-erased-ranges", action="store_true", help="write lmbias.metrics.unidecode_erased from unidecode"
    )
    ap.add_argument("--write-fixture", type=Path, help="write the runs' completions and the package's categories")
    args = ap.parse_args(argv)
    python = ensure_venv()
    with tempfile.TemporaryDirectory(prefix="honest-package-") as tmp:
        where = Path(tmp)
        failures = check_code_points(python, where, args.write_erased_ranges)
        if args.code_points_only:
            return int(failures > 0)
        import torch
        import yaml

        torch.set_num_threads(args.threads)
        config = yaml.safe_load((ROOT / "config.yaml").read_text())
        runs = [run for run in args.runs.split(",") if run]
        scores = {run: generate(run, args.entry, config, args.data_dir, where) for run in runs}
        (where / "completions.json").write_text(json.dumps({run: by_template(t) for run, t in scores.items()}))
        hurtlex = args.data_dir / "hurtlex" / "hurtlex_EN.tsv"
        driver(python, "score", where / "completions.json", hurtlex, where / "package.json")
        package = json.loads((where / "package.json").read_text())
        heads = " | ".join(f"HONEST@{k}" for k in K)
        print(f"\n| run | reading | {heads} | completions the option and the package differ on |")
        print("|---|---|" + "---:|" * len(K) + "---:|")
        fixture = []
        for run, table in scores.items():
            rows, differences = compare(run, table, package[run])
            fixture += rows
            failures += differences
        if args.write_fixture:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(fixture), args.write_fixture, compression="zstd")
            print(f"wrote {args.write_fixture} ({len(fixture)} completions)")
    print("FAIL" if failures else "PASS: the option equals the package at every k and on every completion")
    return int(failures > 0)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
