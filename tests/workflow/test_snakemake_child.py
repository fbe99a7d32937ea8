"""The tests' forked dry runs (helpers.snakemake_child) say what a plain `python -m snakemake -n` says."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from helpers.snakemake_child import forkable, run_forked
from helpers.workflow_runs import SNAKEMAKE, copy_workflow, scheduled_outputs, snakemake_command

pytestmark = pytest.mark.workflow

#: Lines that differ between any two runs (the clock, the run's id) or name the interpreter's entry path
VARYING = re.compile(r"^\s*(Date|Workflow ID|Command):|^\[\w{3} \w{3} ")


def _lines(proc: subprocess.CompletedProcess) -> list[str]:
    return sorted(line for line in (proc.stdout + proc.stderr).splitlines() if not VARYING.match(line))


def test_a_forked_dry_run_prints_what_a_plain_one_prints(tmp_path, repo_root, shared_data):
    workdir = copy_workflow(repo_root, tmp_path / "wf")
    target = "results/tiny-gpt2/pretrained/seed0/metrics/crows_pairs.parquet"
    command, env = snakemake_command("-n", target, "--config", f"data_dir={shared_data}")
    if not forkable(env):
        pytest.skip("this test process cannot fork a run like a fresh one (its hash seed or Hugging Face settings)")
    plain = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    forked = run_forked(command[len(SNAKEMAKE) :], workdir, env)
    assert plain.returncode == forked.returncode == 0, forked.stderr[-3000:]
    assert scheduled_outputs(forked) and sorted(scheduled_outputs(forked)) == sorted(scheduled_outputs(plain))
    assert _lines(forked) == _lines(plain)  # sorted: the order of the jobs varies between plain runs too
    assert f"Run directory: {workdir}" in forked.stdout + forked.stderr
    assert os.getcwd() != str(workdir)  # the test process stays where it was


def test_a_bad_config_fails_the_same_way(tmp_path, repo_root, shared_data):
    workdir = copy_workflow(repo_root, tmp_path / "wf")
    command, env = snakemake_command("-n", "--config", f"data_dir={shared_data}", "targets={models: [nope]}")
    if not forkable(env):
        pytest.skip("this test process cannot fork a run like a fresh one")
    forked = run_forked(command[len(SNAKEMAKE) :], workdir, env)
    assert forked.returncode != 0 and "nope" in forked.stdout + forked.stderr


def test_only_dry_runs_are_forked(tmp_path):
    with pytest.raises(ValueError, match="only a dry run"):
        run_forked(["--cores", "1", "all"], tmp_path, dict(os.environ))
