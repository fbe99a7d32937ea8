"""bench/gpu_check.py, the one-command GPU check, in its CPU dry mode (--cpu: the same steps on CPU at small sizes,
FSDP over 2 gloo processes, the device_map split over CPU and disk) under the GPU machine's conditions: snakemake
and spaCy cannot be imported. Without a GPU and without --cpu it
runs nothing and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BLOCKER = 'import sys\nsys.modules["snakemake"] = None\nsys.modules["spacy"] = None\n'


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


def test_cpu_dry_run_prints_the_table(tmp_path, repo_root, shared_data):
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
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path, repo_root), capture_output=True, text=True, timeout=600)
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
