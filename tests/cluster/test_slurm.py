"""The Slurm profile on a real (single-node) Slurm: a tiny target built under `profiles/slurm-cpu` with
the site settings a cluster without accounting needs gives the same summary as a local run.

The cluster (tests/helpers/slurm_cluster.py) is Debian's slurm-wlm 22.05 with munge, partitions `cpu` and `gpu`,
no GPU gres and no accounting database, so the run uses the CPU-only setup of docs/clusters.md: `profiles/slurm-cpu`
and `--slurm-status-command squeue`. `-m "not slurm"` skips it; where the daemons cannot start (not
installed, not root) it skips with the reason, except under CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.slurm_cluster import ClusterUnavailable, SlurmCluster
from helpers.workflow_runs import copy_workflow, run_snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

TARGET = "results/tiny-bert/pretrained/summary.parquet"
#: WinoBias type 1 only, two conditions, no bootstrap: 10 jobs (4 data copies, a tiny model, parse, score,
#: metrics, summary, and the local library fingerprint).
CHEAP = {
    "only_benchmarks": ["winobias"],
    "benchmarks": {
        "winobias": {
            "types": [1],
            "scoring": {"conditions": ["professions_masked", "referent_masked"]},
            "metric": {"bootstrap": 0, "alice_bob": False},
        }
    },
}
#: The site settings of a cluster without slurmdbd (docs/clusters.md, "Running on Slurm"); the second only makes the
#: first status check come after 1 s instead of 40 s.
SITE = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    # room for both tests' runs side by side: scoring asks for 8 CPUs and 32 GB, the fine-tune for 2 x 2 CPUs
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), cpus=16, memory_mb=128000)
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
    workdir = copy_workflow(repo_root, dest)
    (workdir / "cheap.yaml").write_text(yaml.safe_dump(CHEAP))
    return workdir


def _interrupt(proc: subprocess.Popen) -> None:
    """Stop an unfinished Snakemake run under Slurm as a user would: Ctrl-C, on which it cancels its Slurm jobs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def _jobs(slurm: SlurmCluster, workdir: Path) -> list[dict]:
    """Every job of the run in workdir that the cluster still knows (MinJobAge 300 s): rule (from the executor's
    comment) and allocation."""
    proc = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%k|%P|%l|%C|%m|%b|%T|%Z"],
        env=slurm.env,
        capture_output=True,
        text=True,
        check=True,
    )
    keys = ("comment", "partition", "time_limit", "cpus", "memory", "gres", "state", "workdir")
    jobs = [dict(zip(keys, line.split("|"))) for line in proc.stdout.splitlines()]
    return [job for job in jobs if Path(job["workdir"]).resolve() == workdir.resolve()]


def test_summary_under_slurm_equals_the_local_run(slurm, tasks_run, repo_root, shared_data, tmp_path):
    """The summary under `profiles/slurm-cpu` equals a local run's. Asking for `tasks_run` starts the other test's
    Slurm run now, beside this test's two runs."""
    local = _workdir(repo_root, tmp_path / "local")
    cluster = _workdir(repo_root, tmp_path / "slurm")
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        "profiles/slurm-cpu",
        *SITE,
        TARGET,
        "--configfile",
        "cheap.yaml",
        "--config",
        f"data_dir={shared_data}",
    ]
    env = {**slurm.env, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    # The local run goes alongside: the Slurm run mostly waits between its status checks.
    log = tmp_path / "slurm-run.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, cwd=cluster, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            run_snakemake(local, TARGET, "--configfile", "cheap.yaml", "--config", f"data_dir={shared_data}")
            proc.wait(timeout=480)
        finally:
            _interrupt(proc)
    out = log.read_text()
    assert proc.returncode == 0, f"snakemake under Slurm failed:\n{out[-6000:]}\n{slurm.logs()}"
    assert "workflow specific profile" not in out

    jobs = [j for j in _jobs(slurm, cluster) if j["comment"].startswith("rule_")]
    assert {j["state"] for j in jobs} == {"COMPLETED"}, jobs
    rules = {j["comment"][len("rule_") :].split("_wildcards")[0] for j in jobs}
    # the data rules download on the submit host and the cheap jobs (parsing, metrics, summaries) run in
    # Snakemake's process there (localrules): never a Slurm job
    assert rules == {"build_tiny_model", "score_model"}, jobs
    for job in jobs:  # what sbatch was asked for: the profile's resources, not a local profile's
        rule, asked = job["comment"], (job["partition"], job["time_limit"], job["cpus"], job["memory"])
        if rule.startswith("rule_score_model"):
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


#: A 2-task FSDP fine-tune of the tiny Llama (3 steps of 2 x 2 GAP sentences, naive CDA): Slurm starts one
#: process per task with the job's own srun (lmbias.engine.distributed.slurm_launch_command)
TASKS_TARGET = "results/tiny-llama/cda-tasks/seed0/model"
TASKS_CONFIG = {
    "benchmarks": {"gap": {"splits": ["validation"]}},
    "methods": {
        "cda-tasks": {
            "kind": "cda",
            "corpus": "results/corpora/gap/cda-naive.parquet",
            "training": {
                "max_steps": 3,
                "batch_size": 2,
                "dropout": 0.0,
                "distributed": "fsdp",
                "precision": "fp32",
                "max_length": 32,
                "limit_examples": 16,
            },
        }
    },
}


@dataclass
class TasksRun:
    """The two-task fine-tune's Snakemake run under Slurm, started by its fixture."""

    workdir: Path
    proc: subprocess.Popen
    log: Path

    def wait(self) -> str:
        """Its output, once it has ended (a test that waits longer than 600 s in all stops it)."""
        self.proc.wait(timeout=600)
        return self.log.read_text()


@pytest.fixture(scope="module")
def tasks_run(slurm, repo_root, shared_data, tmp_path_factory):
    """The two-task fine-tune under Slurm, started as soon as the cluster is up: the first test asks for it, so
    that it runs beside that test's runs (a Slurm run mostly waits between its status checks)."""
    workdir = copy_workflow(repo_root, tmp_path_factory.mktemp("tasks") / "slurm")
    (workdir / "tasks.yaml").write_text(yaml.safe_dump(TASKS_CONFIG))
    # the way docs/clusters.md describes: a copy of the profile whose finetune asks for tasks (here 2 on the one node)
    profile = yaml.safe_load((workdir / "profiles" / "slurm-cpu" / "config.yaml").read_text())
    profile["set-resources"]["finetune"].update(tasks=2, nodes=1, mpi="srun", cpus_per_task=2, mem_mb=8000)
    (workdir / "profiles" / "tasks").mkdir()
    (workdir / "profiles" / "tasks" / "config.yaml").write_text(yaml.safe_dump(profile))
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        "profiles/tasks",
        *SITE,
        TASKS_TARGET,
        "--configfile",
        "tasks.yaml",
        "--config",
        f"data_dir={shared_data}",
    ]
    env = {**slurm.env, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    log = workdir.parent / "snakemake.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=sink, stderr=subprocess.STDOUT)
    yield TasksRun(workdir, proc, log)
    _interrupt(proc)


def test_two_task_fine_tune_under_slurm_equals_the_local_two_process_run(slurm, tasks_run, tmp_path):
    import json

    import numpy as np
    from safetensors.torch import load_file

    from lmbias.engine.distributed import launch_command, launch_env, main_process_port

    output = tasks_run.wait()
    workdir = tasks_run.workdir
    out = workdir / TASKS_TARGET
    train_log = workdir / "logs" / "tiny-llama" / "cda-tasks" / "seed0" / "train.log"
    logs = train_log.read_text() if train_log.exists() else ""
    assert tasks_run.proc.returncode == 0, f"{output[-8000:]}\n{logs[-3000:]}\n{slurm.logs()}"
    assert "srun --ntasks=2 --kill-on-bad-exit=1" in logs
    info = json.loads((out / "training.json").read_text())
    assert (info["world_size"], info["distributed"]) == (2, "fsdp")
    finetune = [j for j in _jobs(slurm, workdir) if j["comment"].startswith("rule_finetune")]
    assert [(j["state"], j["cpus"]) for j in finetune] == [("COMPLETED", "4")], finetune  # 2 tasks x 2 CPUs

    # the same job as a local 2-process launch (accelerate launch, gloo), from the cluster run's own inputs
    local = tmp_path / "local"
    entry = {"path": str(workdir / "resources" / "models" / "tiny-llama"), "family": "clm"}
    args = [
        "--model-name",
        "tiny-llama",
        "--model-entry",
        json.dumps(entry),
        "--corpus",
        str(workdir / "results" / "corpora" / "gap" / "cda-naive.parquet"),
        "--out",
        str(local),
        "--seed",
        "0",
        "--settings",
        json.dumps(info["settings"]),
    ]
    run = subprocess.run(
        launch_command(2, main_process_port(str(local)), args, cpu=True, subcommand="train"),
        env=launch_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = load_file(str(out / "model.safetensors")), load_file(str(local / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:  # the same sums on the same 2 processes (observed: bit-identical); threads may differ elsewhere
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), atol=1e-5, rtol=0, err_msg=k)
