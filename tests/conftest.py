"""Shared fixtures: where the real data lives, and the repository root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]


def _data_dir() -> Path:
    return Path(os.environ.get("LMBIAS_TEST_DATA", REPO_ROOT.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data folder (../shared/data or $LMBIAS_TEST_DATA).

    Absent: skip with a reason on a contributor's clone, fail under CI (CI=true always has it).
    """
    return _required_folder(_data_dir(), "real test data", "LMBIAS_TEST_DATA", "it")


def _required_folder(path: Path, what: str, variable: str, pronoun: str) -> Path:
    """The folder, or a skip with a reason where it is absent (a failure under CI=true, which always has it)."""
    if not path.is_dir():
        message = f"{what} not found at {path} (set {variable})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + f"; CI must have {pronoun}")
        pytest.skip(message)
    return path


def _papers_dir() -> Path:
    return Path(os.environ.get("LMBIAS_TEST_PAPERS", REPO_ROOT.parent / "shared" / "papers")).resolve()


@pytest.fixture(scope="session")
def shared_papers() -> Path:
    """The source papers as text (../shared/papers or $LMBIAS_TEST_PAPERS): skip when absent, fail under CI."""
    return _required_folder(_papers_dir(), "paper texts", "LMBIAS_TEST_PAPERS", "them")


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny models gain nothing from intra-op threads; on a shared 2-core machine they only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_configure(config):
    """The xdist workers (started after this) get the environment of the tests' Snakemake runs where it matters
    when a library is imported: hash seed 0 and Hugging Face offline (as CI exports it; no test reaches the
    network), so that a run can be a child forked from its worker (helpers.snakemake_child). With `-n 0` the
    test process keeps its own hash seed, and the runs start as plain processes."""
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadgroup` (optional, e.g. `-n 4 --dist loadgroup`): a module's tests in one worker, the
    longest groups first (tests/helpers/xdist_groups.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from helpers.xdist_groups import ModulesTogetherLongestFirst

    return ModulesTogetherLongestFirst(config, log)
