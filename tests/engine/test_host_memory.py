"""lmbias.engine.host_memory: with freed blocks kept, a vocabulary-sized temporary made and freed again and again
stops page-faulting (counted, not timed: the process's minor page faults), and the switch turns it off. Each case
runs in a fresh Python, since the thresholds are the process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux only")

#: 50 rounds of a float64 copy and a cumulative sum of 64 x 16,076 logits (8 MB each, as the seeded sampler makes),
#: after a warm-up; prints whether the thresholds were set and the minor page faults of the 50 rounds
ROUNDS = """
import json, resource, sys, torch
from lmbias.engine.host_memory import keep_freed_host_memory
if sys.argv[1] == "keep":
    applied = keep_freed_host_memory()
else:  # glibc's thresholds as it starts (128 KiB each), pinned so the dynamic ones cannot move by chance
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    applied = not (libc.mallopt(-3, 128 * 1024) == 1 and libc.mallopt(-1, 128 * 1024) == 1)
torch.set_num_threads(1)
logits = torch.randn(64, 16076)
def step():
    probs = torch.softmax(logits, dim=-1)
    return int(torch.searchsorted(probs.double().cumsum(dim=-1), torch.full((64, 1), 0.5, dtype=torch.float64)).sum())
for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print(json.dumps({"applied": applied, "again": keep_freed_host_memory() if applied else None,
                  "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def _rounds(mode: str, **env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kept_blocks_stop_the_page_faults_of_repeated_temporaries():
    default, kept = _rounds("default"), _rounds("keep")
    assert kept["applied"] is True and kept["again"] is True  # set once, the same answer after
    # glibc's starting thresholds: the 8 MB blocks go back to the kernel and come back as new pages (2,048 a block)
    assert default["applied"] is False and default["faults"] > 50 * 2048, default
    assert kept["faults"] < 50 * 64, kept  # kept: the same blocks again, (almost) no new page


def test_the_switch_turns_it_off():
    code = "from lmbias.engine.host_memory import keep_freed_host_memory as k; print(k(), k())"
    env = {**os.environ, "LMBIAS_KEEP_FREED_HOST_MEMORY": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]
