"""Ending the long-lived processes the tests start (background Snakemake runs, the fork server)."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM a process that is still running, and SIGKILL it if it has not ended within timeout seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
