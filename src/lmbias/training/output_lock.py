"""One training process per output: a lock file in the checkpoint folder, held for the whole job.

A lost Slurm session (SIGKILL, closed ssh) leaves its fine-tune running; after `snakemake --unlock` a rerun
submits a second job for the same output, which would resume from the orphan's checkpoints and write beside
it. The lock makes that second job stop at once with an error naming the holder. It is an flock(2) on
`<checkpoint_dir>/LOCK` (which holds the holder's pid, host and start time): the kernel releases it when the
holder exits, however it ends, so a lock file left by a dead process blocks nothing. The checkpoint folder
must be on a filesystem with working flock across nodes where jobs run on several (NFSv4 and most
cluster filesystems; Lustre needs its `flock` mount option).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from lmbias.errors import LmbiasError
from lmbias.io import lock_holder, write_lock_holder

LOCK_NAME = "LOCK"


class OutputLocked(LmbiasError):
    """Another live process is training into the same output (its checkpoint folder is locked)."""


@contextlib.contextmanager
def training_lock(checkpoint_dir):
    """Hold `<checkpoint_dir>/LOCK` for the block; OutputLocked at once when another process holds it."""
    root = Path(checkpoint_dir)
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            raise OutputLocked(
                f"{root}: another training process holds this checkpoint folder: {lock_holder(path)}. A second job "
                "for the same output would resume from its checkpoints and write beside it. Wait for it or stop "
                "it (on Slurm: scancel --name <run id>, see docs/clusters.md); a lock left by a process that has ended "
                "does not block"
            ) from None
        # The holder before us may have finished and deleted the folder between our open and our flock:
        # then we locked a file that no longer has this name; take the lock again on the current one.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
        root.mkdir(parents=True, exist_ok=True)
    try:
        write_lock_holder(fd)
        yield path
    finally:
        os.close(fd)  # releases the flock; the file stays (or goes with the checkpoint folder)


def is_main_process() -> bool:
    """Rank 0 of an `accelerate launch` / torchrun job, or a plain single process: the one that locks."""
    return int(os.environ.get("RANK", "0")) == 0
