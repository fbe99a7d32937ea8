"""Freed host memory kept in the process, so that vocabulary-sized temporaries do not page-fault at every step.

A forward pass on the CPU makes tensors of megabytes and frees them at once: a batch's logits (64 rows x a
16,000-token vocabulary: 4 MB in float32), their float64 copy for a log-softmax, a sampler's probabilities and
cumulative sums. glibc's malloc hands such blocks back to the kernel when they are freed (a block over its
mmap threshold is unmapped; a heap top over its trim threshold is trimmed), so the next batch's block of the same
size is new memory again, and touching it costs one page fault per 4 KiB page. Measured on the development
machine (docs/development/performance.md, "Own decode loop and kept host memory"): the seeded sampler's draw over
64 x 16,076 logits took 15.5 ms a step with glibc's defaults and 2.7 ms with freed blocks kept; the sampled HONEST
bench ran 1.9x faster.
Keeping them changes no number, only where memory comes from: the process's resident memory stays at its peak
instead of shrinking after it (the peak itself is the same).

`keep_freed_host_memory` sets glibc's mmap threshold to 32 MiB (the largest value its own dynamic threshold
takes on a 64-bit machine; larger blocks are still mapped and unmapped) and its trim threshold to 512 MiB.
The engine calls it when it loads a model (lmbias.engine.models.load_model); elsewhere than on glibc (macOS,
musl) it does nothing. LMBIAS_KEEP_FREED_HOST_MEMORY=0 switches it off, e.g. to compare.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

#: mallopt's parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 512 * 1024 * 1024
SWITCH = "LMBIAS_KEEP_FREED_HOST_MEMORY"

_applied: bool | None = None


def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None  # another C library (musl has no mallopt tuning of these)
    return libc


def keep_freed_host_memory() -> bool:
    """Set glibc's thresholds once per process (later calls return the first call's result); True when they are
    set, False where there is no glibc or the switch is off."""
    global _applied
    if _applied is None:
        libc = None if os.environ.get(SWITCH, "1") == "0" else _glibc()
        _applied = bool(
            libc is not None
            and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        )
    return _applied
