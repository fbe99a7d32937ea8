"""One scoring process at a time per (model, method, seed): a lock beside its score files.

Two jobs may want the same score file in one run: `score_benchmark` for a target that names one benchmark,
`score_model` for a summary of every benchmark. Each takes this lock before it decides what to score and
holds it until its files are written; the second one then finds the first one's files holding their score
keys and keeps them (lmbias.metrics.score_keys), so no score file is ever written by two jobs. It is an
flock(2) on `results/{model}/{method}/seed{k}/scores.lock`, which the kernel releases when the holder exits
however it ends; a lock file left by a dead process blocks nothing. A waiting job logs who holds the lock.
On a cluster the results folder must be on a filesystem with working flock across nodes (NFSv4 and most
cluster filesystems; Lustre needs its `flock` mount option).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from pathlib import Path

from lmbias.io import lock_holder, write_lock_holder

log = logging.getLogger(__name__)

LOCK_NAME = "scores.lock"


def seed_folder_of_score_file(score_file: str | os.PathLike) -> Path:
    """The (model, method, seed) folder a score file lies in (…/seed{k}/scores/{b}.parquet)."""
    return Path(score_file).parent.parent


@contextlib.contextmanager
def scoring_lock(seed_folder: str | os.PathLike, poll_s: float = 0.5):
    """Hold the scoring lock of a (model, method, seed) folder for the block, waiting while another job holds it."""
    path = Path(seed_folder) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
                if not waited:
                    log.info("%s: waiting for %s, which is scoring this model and method", path, lock_holder(path))
                    waited = True
                time.sleep(poll_s)
        write_lock_holder(fd)
        yield path
    finally:
        os.close(fd)  # releases the flock
