"""Shared fixtures: where the real data lives, and the repository root."""

from __future__ import annotations

import os
import warnings
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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadgroup` (optional, e.g. `-n 4 --dist loadgroup`): a module's tests in one worker, the
    longest groups first (tests/helpers/xdist_groups.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from helpers.xdist_groups import ModulesTogetherLongestFirst

    return ModulesTogetherLongestFirst(config, log)


@pytest.fixture(autouse=True, scope="session")
def _job_fork_server(tmp_path_factory):
    """The fork server of the tests' Snakemake jobs (tests/helpers/forkserver.py: a job process starts without
    importing torch and transformers again), for the whole session; LMBIAS_TEST_FORKSERVER=off runs every job
    as a plain process. Its socket and client go into this process's environment, which every process the
    tests start inherits (Slurm's jobs excepted: helpers.slurm_cluster)."""
    if os.environ.get("LMBIAS_TEST_FORKSERVER", "").lower() == "off":
        yield None
        return
    from helpers.forkserver import ForkServer

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}  # as helpers.workflow_runs' runs
    server = ForkServer(tmp_path_factory.mktemp("forkserver"), env)
    if not server.wait_ready():  # its jobs would all run as plain processes: say why, and go on without it
        server.stop()
        warnings.warn(f"the tests' fork server did not start: {server.log_path.read_text()[-2000:]}", stacklevel=1)
        yield None
        return
    with pytest.MonkeyPatch.context() as patch:  # every process the tests start inherits it; the client decides
        for name, value in server.client_env(os.environ.get("PYTHONPATH")).items():
            patch.setenv(name, value)
        yield server
    server.stop()


@pytest.fixture(autouse=True, scope="session")
def _start_long_workflow_runs_early(request, _job_fork_server):
    """In one pytest process (`-n 0`): start the methods workflow run (tests/workflow/test_workflow_methods.py,
    the longest) in the background when the session starts, if any selected test uses it. The unit tests leave
    a core idle; the run, at a lower priority, uses it. Its fixture waits for it when its tests come. Without
    the data folder nothing starts: the fixture then skips (or fails under CI) as usual.

    Not in an xdist worker (the default `-n 2`): there the other worker keeps the second core busy, and the
    scheduler hands the methods module out first, so its fixture starts the run at once in the one worker that
    runs its tests."""
    runs = {}
    request.config._lmbias_background_runs = runs
    wanted = any("methods_run" in getattr(item, "fixturenames", ()) for item in request.session.items)
    if wanted and _data_dir().is_dir() and "PYTEST_XDIST_WORKER" not in os.environ:
        from helpers.methods_run import start_methods_run

        runs["methods"] = start_methods_run(request.getfixturevalue("tmp_path_factory"), REPO_ROOT, _data_dir())
    yield
    for run in runs.values():
        run.stop()
