"""One training process per output: a second process for the same checkpoint folder refuses to start,
naming the holder; the lock goes when its holder ends, however it ends (SIGKILL included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO_ROOT
from lmbias.training.output_lock import LOCK_NAME, OutputLocked, training_lock

HOLDER = """
import sys
from lmbias.training.output_lock import training_lock
with training_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills us)
print("released", flush=True)
"""


def _start_holder(ckpt: Path) -> subprocess.Popen:
    src = str(REPO_ROOT / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ckpt)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_process_refuses_while_the_first_holds_the_output(tmp_path):
    ckpt = tmp_path / "model.checkpoints"
    holder = _start_holder(ckpt)
    try:
        with pytest.raises(OutputLocked, match=rf"pid {holder.pid} on host .*scancel"):
            with training_lock(ckpt):
                pytest.fail("entered a lock another process holds")
        assert json.loads((ckpt / LOCK_NAME).read_text())["pid"] == holder.pid  # the refusal leaves it as it was
    finally:
        holder.stdin.close()
        assert holder.stdout.readline().strip() == "released"
        holder.wait(timeout=10)
    with training_lock(ckpt):  # released on a normal exit
        assert json.loads((ckpt / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_lock_of_a_killed_process_does_not_block(tmp_path):
    ckpt = tmp_path / "model.checkpoints"
    holder = _start_holder(ckpt)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    assert (ckpt / LOCK_NAME).exists()  # the file stays, naming the dead process; its flock went with it
    with training_lock(ckpt):
        assert json.loads((ckpt / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_lock_survives_the_folder_being_removed_by_its_holder(tmp_path):
    """train_job deletes the checkpoint folder (lock file included) after success, still holding the lock."""
    import shutil

    ckpt = tmp_path / "model.checkpoints"
    with training_lock(ckpt):
        shutil.rmtree(ckpt)
    with training_lock(ckpt):
        assert (ckpt / LOCK_NAME).is_file()


def test_train_job_refuses_an_output_another_process_is_training(tmp_path):
    """The duplicate job stops before it reads a corpus, loads a model or touches the checkpoints."""
    from lmbias.training.jobs import train_job

    out = tmp_path / "results" / "model"
    args = (
        {"path": str(tmp_path / "no-model"), "family": "mlm"},
        "tiny-bert",
        str(tmp_path / "no-corpus.parquet"),
        str(out),
        0,
        {"objective": "mlm", "max_steps": 1},
    )
    holder = _start_holder(Path(str(out) + ".checkpoints"))
    try:
        with pytest.raises(OutputLocked, match=f"model.checkpoints: another training process .* pid {holder.pid}"):
            train_job(*args)
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    with pytest.raises(Exception) as after:  # unlocked: it goes on, and fails on the missing corpus
        train_job(*args)
    assert not isinstance(after.value, OutputLocked) and "no-corpus" in str(after.value), after.value
