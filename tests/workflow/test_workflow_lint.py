"""`snakemake --lint` must stay clean: any lint (mixed rules and functions, missing log, ...) fails CI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.workflow


def test_snakemake_lint_is_clean(repo_root):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint"], cwd=repo_root, env=env, capture_output=True, text=True
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Lints for" not in out, out[-4000:]
    assert "Congratulations, your workflow is in a good condition!" in out, out[-4000:]
