"""Issue 8 robustness through real Snakemake runs: no silent shrinking (left-out benchmarks recorded),
moving the data folder reruns nothing, unknown names in every path, overlay errors name their file.

One small real run (tiny-bert, WinoBias only, StereoSet configured but without data) is shared.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import yaml

from helpers.workflow_runs import ONE_THREAD_PER_JOB, copy_workflow, run_snakemake, scheduled_outputs
from lmbias.metrics.summary import left_out

pytestmark = pytest.mark.workflow

SUMMARY = "results/tiny-bert/pretrained/summary.parquet"
ONLY = "only_benchmarks=[winobias,stereoset]"


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, repo_root, shared_data):
    root = tmp_path_factory.mktemp("robust")
    workdir = copy_workflow(repo_root, root / "wf")
    data = root / "data-a"
    shutil.copytree(shared_data / "winobias", data / "winobias")  # no StereoSet (neither dev.json nor its flat copy)
    run_snakemake(workdir, "--config", f"data_dir={data}", ONLY, SUMMARY)
    return workdir, data


def test_summary_records_what_it_left_out_and_why(small_run):
    workdir, _ = small_run
    frame = pd.read_parquet(workdir / SUMMARY)
    assert set(frame["benchmark"]) == {"winobias"}
    reasons = {e["benchmark"]: e for e in frame.attrs["left_out"]}
    assert reasons == {e["benchmark"]: e for e in left_out(workdir / SUMMARY)}
    # tiny-bert reads StereoSet through its gender part (models.tiny-bert.stand_ins), whose data is missing too
    assert reasons["stereoset"]["config_key"] == "models.tiny-bert.stand_ins.stereoset"
    assert reasons["stereoset-subset"]["config_key"] == "optional_benchmarks"
    assert "data.stereoset.files.dev.json" in reasons["stereoset-subset"]["reason"]
    assert reasons["seat"] == {
        "benchmark": "seat",
        "reason": "not in this run's only_benchmarks",
        "config_key": "only_benchmarks",
    }
    assert "winobias" not in reasons and "crows_pairs" in reasons


def test_moving_the_data_folder_reruns_nothing(small_run, tmp_path):
    workdir, data = small_run
    moved = tmp_path / "data-b"
    shutil.copytree(data, moved)
    proc = run_snakemake(workdir, "-n", "--config", f"data_dir={moved}", ONLY, SUMMARY)
    assert scheduled_outputs(proc) == [], proc.stdout[-3000:]


def test_missing_data_is_an_error_naming_file_and_key(small_run):
    workdir, _ = small_run
    proc = run_snakemake(workdir, "-n", "--config", "data_dir=/nonexistent", SUMMARY, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    # the error names the first configured benchmark by name whose data is missing
    assert "/nonexistent/" in text and "looked for through data_dir" in text and "data.bbq.files." in text
    # an explicit opt-out runs (what is missing is then recorded as left out)
    run_snakemake(workdir, "-n", "--config", "data_dir=/nonexistent", "missing_data=skip", SUMMARY)


@pytest.mark.parametrize(
    "path, message",
    [
        ("results/nope/pretrained/seed0/scores/winobias.parquet", "unknown model 'nope'"),
        ("results/tiny-bert/magic/seed0/metrics/winobias.parquet", "unknown method 'magic'"),
        ("results/tiny-bert/pretrained/seed0/scores/winobiass.parquet", "unknown benchmark 'winobiass'"),
        ("results/tiny-bert/pretrained/seed3/metrics/winobias.parquet", "runs seed(s) 0, not '3'"),
        ("results/tiny-bert/magic/seed0/metrics.parquet", "unknown method 'magic'"),
        ("results/tiny-bret/pretrained/seed0/metrics.parquet", "unknown model 'tiny-bret'"),
        ("results/tiny-bert/pretrained/seed3/metrics.parquet", "runs seed(s) 0, not '3'"),
        ("resources/models/tiny-bret", "unknown model 'tiny-bret'"),
    ],
)
def test_unknown_names_in_scores_metrics_and_model_paths_are_named(small_run, path, message):
    workdir, _ = small_run
    proc = run_snakemake(workdir, "-n", path, check=False)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr


def test_overlay_errors_name_the_overlay_and_missing_model_path_its_key(small_run, tmp_path):
    workdir, data = small_run
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"models": {"tiny-bert": {"famly": "mlm"}}}))
    proc = run_snakemake(workdir, "-n", "--configfile", str(overlay), check=False)
    assert proc.returncode != 0
    assert f"models.tiny-bert.famly: unknown key (in {overlay})" in proc.stdout + proc.stderr
    overlay.write_text(yaml.safe_dump({"targets": {"models": ["tiny-bert", "nope"], "methods": ["pretrained"]}}))
    proc = run_snakemake(workdir, "-n", "--configfile", str(overlay), check=False)
    assert "targets.models[1]: unknown model 'nope'; configured:" in proc.stdout + proc.stderr
    assert f"(in {overlay})" in proc.stdout + proc.stderr
    overlay.write_text(
        yaml.safe_dump({"models": {"my-bert": {"path": "models/my-bert", "family": "mlm", "revision": "local"}}})
    )
    proc = run_snakemake(
        workdir,
        "-n",
        "results/my-bert/pretrained/seed0/scores/winobias.parquet",
        "--configfile",
        str(overlay),
        "--config",
        f"data_dir={data}",
        check=False,
    )
    assert proc.returncode != 0
    assert "models.my-bert.path: model folder models/my-bert does not exist" in proc.stdout + proc.stderr


def test_a_jobs_named_error_reaches_the_console_without_a_profile(small_run, tmp_path):
    """Issue 21 section 4: the documented commands without --profile load no profile (show-failed-logs off),
    yet the job's ConfigError (here: truncated weights) is on the console, not only "check log file(s)"."""
    import os
    import subprocess
    import sys

    workdir, data = small_run
    broken = tmp_path / "broken-bert"
    shutil.copytree(workdir / "resources/models/tiny-bert", broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        yaml.safe_dump({"models": {"broken": {"path": str(broken), "family": "mlm", "revision": "local"}}})
    )
    assert not (workdir / "profiles/default").exists()
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        "2",
        "results/broken/pretrained/seed0/scores/winobias.parquet",
        *ONE_THREAD_PER_JOB,
        "--configfile",
        str(overlay),
        "--config",
        f"data_dir={data}",
    ]
    proc = subprocess.run(cmd, cwd=workdir, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "profile" not in console.split("Building DAG")[0]  # no profile loaded
    assert "Logfile logs/" not in console  # Snakemake's show-failed-logs dump is off: the line below is ours
    assert (
        "rule score_benchmark (logs/broken/pretrained/seed0/scores/winobias.log):\n"
        f"    ConfigError: models.broken: {weights} is truncated or corrupt"
    ) in proc.stderr, console[-3000:]
