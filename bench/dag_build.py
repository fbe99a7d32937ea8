"""DAG-build time of the full paper grid: `snakemake -n` on a copy of the workflow.

The over-debiasing paper's 6 models x (pretrained, cds, er, sd and their Table 11 sweeps: 8 swap rates,
8 lambdas, 8 ratios of pairs) x seeds 0-4, plus Manela et al.'s 7 models x (pretrained, online, gpr-u,
gpr-a); targets: every pair's summary. A dry run fetches nothing: each hub model is one fetch_hub_model
job, data comes from the pinned downloads (not fetched either) and corpora.ontonotes.path points at an
empty stand-in folder. Target: the DAG built in under 15 s.

    .venv/bin/python bench/dag_build.py [--repeats 3] [--keep DIR]

Prints the job count and, per repeat and best of them: seconds until Snakemake says "Building DAG of jobs"
(startup: imports, config, rules), until its job table (the DAG built), and to the end of the dry run
(every job printed), plus the CPU seconds of the whole run and the 1-minute load average: on a shared
machine a load above the core count makes the wall times slower than the code.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COPIED = ["Snakefile", "config.yaml", "rules", "scripts", "schemas", "profiles", "envs", "resources", "src"]
OVER_DEBIASING = ["bert-base", "bert-large", "gpt2", "gpt2-medium", "bart-base", "bart-large"]
OD_METHODS = ["pretrained", "cds", "cds@*", "er", "er@*", "sd", "sd@*"]
MANELA = [
    "bert-base",
    "bert-large",
    "roberta-base",
    "roberta-large",
    "distilbert",
    "albert-xxlarge",
    "xlm-roberta-large",
]
MANELA_METHODS = ["pretrained", "online", "gpr-u", "gpr-a"]
TABLE11 = {
    "cds": {"swap_rate": [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]},
    "er": {"er_lambda": [0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0]},
    "sd": {"ratio_of_pairs": [0.01, 0.05, 0.1, 0.15, 0.2, 0.4, 0.6, 1.0]},
}


def prepare(dest: Path) -> list[str]:
    """A copy of the workflow with the paper grid's config; returns the summary targets."""
    sys.path.insert(0, str(REPO / "src"))
    from lmbias.methods.sweeps import expand_method_targets

    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "data", "models")
    for name in COPIED:
        src = REPO / name
        shutil.copytree(src, dest / name, ignore=ignore) if src.is_dir() else shutil.copy2(src, dest / name)
    config = yaml.safe_load((dest / "config.yaml").read_text())
    config["seeds"] = [0, 1, 2, 3, 4]
    for method, sweep in TABLE11.items():
        config["methods"][method]["sweep"] = sweep
    onto = dest / "ontonotes-stand-in"
    onto.mkdir()
    (onto / "stand_in.gold_conll").write_text("")  # globbed at DAG build, never read in a dry run
    config["corpora"]["ontonotes"]["path"] = str(onto)
    missing = [m for m in OVER_DEBIASING + MANELA if m not in config["models"]]
    if missing:
        raise SystemExit(f"config.yaml lacks models {missing}")
    (dest / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    pairs = [(m, k) for m in OVER_DEBIASING for k in expand_method_targets(OD_METHODS, config["methods"])]
    pairs += [(m, k) for m in MANELA for k in MANELA_METHODS]
    return sorted({f"results/{m}/{k}/summary.parquet" for m, k in pairs})


def dry_run(workdir: Path, targets: list[str]) -> dict:
    # profiles/local: its constant disk_mb spares Snakemake a stat of every input (see the profile)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "--cores",
        "2",
        "--profile",
        "profiles/local",
        *targets,
        "--quiet",
        "rules",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(workdir / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks, tail = {}, []
    for line in proc.stdout:
        now = time.perf_counter() - t0
        if "Building DAG of jobs" in line:
            marks.setdefault("startup", now)
        elif line.startswith("Job stats:"):
            marks.setdefault("dag", now)
        match = re.match(r"total\s+(\d+)", line)
        if match:
            marks["jobs"] = int(match.group(1))
        tail = (tail + [line])[-40:]
    proc.wait()
    marks["end"] = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    marks["cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode != 0 or "dag" not in marks:
        raise SystemExit(f"snakemake -n failed (exit {proc.returncode}):\n{''.join(tail)}")
    return marks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the copy here (default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="lmbias-dag-"))
    try:
        if args.keep and root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
        targets = prepare(root)
        print(f"{len(targets)} summary targets", flush=True)
        runs = []
        for i in range(args.repeats):
            marks = dry_run(root, targets)
            runs.append(marks)
            print(
                f"run {i + 1}: {marks['jobs']} jobs; startup {marks['startup']:.1f} s, DAG built at "
                f"{marks['dag']:.1f} s, "
                f"dry run done at {marks['end']:.1f} s; {marks['cpu']:.1f} CPU s; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        best = min(runs, key=lambda m: m["dag"])
        print(f"jobs: {best['jobs']}")
        print(
            f"DAG built (best of {len(runs)}): {best['dag']:.1f} s wall ({best['dag'] - best['startup']:.1f} "
            "s after startup), "
            f"whole dry run {min(m['end'] for m in runs):.1f} s, {min(m['cpu'] for m in runs):.1f} CPU s; "
            f"target under 15 s: {'met' if best['dag'] < 15 else 'NOT met'}"
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
