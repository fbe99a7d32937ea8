"""The timing files' peak memory is the job's own (lmbias.engine.job_timing.peak_rss_mib)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.paths import REPO_ROOT
from lmbias.engine.job_timing import peak_rss_mib


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and the inherited ru_maxrss are Linux's")
def test_a_process_started_by_a_large_one_reports_its_own_peak():
    """On Linux ru_maxrss survives fork and exec: a job started by a 400 MiB parent would report 400 MiB."""
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # touch every page: resident
    assert peak_rss_mib() >= 400
    code = "from lmbias.engine.job_timing import peak_rss_mib; print(peak_rss_mib())"
    child = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(REPO_ROOT / "src")}, capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr
    assert 0 < float(child.stdout) < 200, child.stdout  # the child's own peak, not the parent's
    del ballast
