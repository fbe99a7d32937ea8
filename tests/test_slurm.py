"""The Slurm profile on a real (single-node) Slurm: a tiny target built under `profiles/slurm-cpu` with
the site settings a cluster without accounting needs gives the same summary as a local run.

The cluster (tests/slurm_cluster.py) is Debian's slurm-wlm 22.05 with munge, partitions `cpu` and `gpu`,
no GPU gres and no accounting database, so the run uses the README's CPU-only setup: `profiles/slurm-cpu`
and `--slurm-status-command squeue`. `-m "not slurm"` skips it; where the daemons cannot start (not
installed, not root) it skips with the reason, except under CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from slurm_cluster import ClusterUnavailable, SlurmCluster
from test_workflow import _copy_workflow, run_snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

TARGET = "results/tiny-bert/pretrained/summary.parquet"
#: WinoBias type 1 only, two conditions, no bootstrap: 10 jobs (4 data copies, a tiny model, parse, score,
#: metrics, summary, and the local library fingerprint).
CHEAP = {"only_benchmarks": ["winobias"],
         "benchmarks": {"winobias": {"types": [1], "scoring": {"conditions": ["professions_masked", "referent_masked"]},
                                     "metric": {"bootstrap": 0, "alice_bob": False}}}}
#: The site settings of a cluster without slurmdbd (README "Running on Slurm"); the second only makes the
#: first status check come after 1 s instead of 40 s.
SITE = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        cluster.stop()
        message = f"a single-node Slurm could not start: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI installs slurm-wlm and munge in .ci/run and runs as root)")
        pytest.skip(message)
    yield cluster
    cluster.stop()


def _workdir(repo_root: Path, dest: Path) -> Path:
    workdir = _copy_workflow(repo_root, dest)
    (workdir / "cheap.yaml").write_text(yaml.safe_dump(CHEAP))
    return workdir


def _jobs(slurm: SlurmCluster) -> list[dict]:
    """Every job the cluster still knows (MinJobAge 300 s): rule (from the executor's comment) and allocation."""
    proc = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%k|%P|%l|%C|%m|%b|%T"], env=slurm.env,
                          capture_output=True, text=True, check=True)
    keys = ("comment", "partition", "time_limit", "cpus", "memory", "gres", "state")
    return [dict(zip(keys, line.split("|"))) for line in proc.stdout.splitlines()]


def test_summary_under_slurm_equals_the_local_run(slurm, repo_root, shared_data, tmp_path):
    local = _workdir(repo_root, tmp_path / "local")
    cluster = _workdir(repo_root, tmp_path / "slurm")
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm-cpu", *SITE, TARGET,
               "--configfile", "cheap.yaml", "--config", f"data_dir={shared_data}"]
    env = {**slurm.env, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    # The local run goes alongside: the Slurm run mostly waits between its status checks.
    log = tmp_path / "slurm-run.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, cwd=cluster, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            run_snakemake(local, TARGET, "--configfile", "cheap.yaml", "--config", f"data_dir={shared_data}")
            proc.wait(timeout=480)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # Snakemake cancels its Slurm jobs on Ctrl-C
                proc.wait(timeout=60)
    out = log.read_text()
    assert proc.returncode == 0, f"snakemake under Slurm failed:\n{out[-6000:]}\n{slurm.logs()}"
    assert "workflow specific profile" not in out

    jobs = [j for j in _jobs(slurm) if j["comment"].startswith("rule_")]
    assert {j["state"] for j in jobs} == {"COMPLETED"}, jobs
    rules = {j["comment"][len("rule_"):].split("_wildcards")[0] for j in jobs}
    # the data rules download on the submit host (localrules): never a Slurm job
    assert rules == {"build_tiny_model", "parse_benchmark", "score_benchmark", "compute_seed_metrics", "summarise"}, jobs
    for job in jobs:  # what sbatch was asked for: the profile's resources, not a local profile's
        rule, asked = job["comment"], (job["partition"], job["time_limit"], job["cpus"], job["memory"])
        if rule.startswith("rule_score_benchmark"):
            assert asked == ("cpu", "4:00:00", "8", "32000M"), job
        elif rule.startswith("rule_build_tiny_model"):
            assert asked == ("cpu", "10:00", "2", "4000M"), job
        else:
            assert asked == ("cpu", "1:00:00", "2", "8000M"), job
        assert job["gres"] == "N/A", job  # no --gpus: the CPU-only profile's gpu: 0

    a, b = pq.read_table(local / TARGET), pq.read_table(cluster / TARGET)
    assert a.num_rows > 0 and a.equals(b, check_metadata=True)  # value for value, provenance included
    weights = "resources/models/tiny-bert/model.safetensors"
    assert (local / weights).read_bytes() == (cluster / weights).read_bytes()

    again = subprocess.run([*command[:3], "-n", *command[3:]], cwd=cluster, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
