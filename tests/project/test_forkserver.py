"""The tests' fork server (tests/helpers/forkserver.py): a Snakemake job script or `python -m lmbias.cli` process
started while it runs becomes a forked child of the server that behaves as the plain process would (argv,
working folder, environment, standard streams, exit status, signals), and any process the server must not
run (another environment, another command) starts as usual."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

SCRIPT = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "marker": os.environ.get("MARKER"),
                  "path0": sys.path[0], "nice": os.nice(0), "torch_loaded": "torch" in sys.modules,
                  "parent": os.getppid(), "pid": os.getpid()}))
sys.stderr.write("to stderr\\n")
if os.environ.get("SLEEP"):
    import time
    print("sleeping", flush=True)
    time.sleep(60)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


@pytest.fixture
def job_script(tmp_path):
    """A script where Snakemake writes its job scripts (the client runs only those through the server)."""
    folder = tmp_path / "wf" / ".snakemake" / "scripts"
    folder.mkdir(parents=True)
    script = folder / "tmpabcd1234.probe.py"
    script.write_text(SCRIPT)
    return script


@pytest.fixture
def server(_job_fork_server):
    if _job_fork_server is None:
        pytest.skip("the fork server is off (LMBIAS_TEST_FORKSERVER=off) or did not start")
    return _job_fork_server


def _env(**extra) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", **extra}


def _without_server(env: dict) -> dict:
    return {k: v for k, v in env.items() if k != "LMBIAS_TEST_FORKSERVER"}


def _run(argv: list, env: dict, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_a_job_script_runs_in_a_child_of_the_server_as_its_plain_process_would(server, job_script, tmp_path):
    env = _env(MARKER="m1", EXIT="3")
    served = _run([str(job_script)], env, cwd=tmp_path)
    plain = _run([str(job_script)], _without_server(env), cwd=tmp_path)
    assert served.returncode == plain.returncode == 3
    assert served.stderr == plain.stderr == "to stderr\n"
    a, b = json.loads(served.stdout), json.loads(plain.stdout)
    assert f"forked {a.pop('pid')} for " in server.log_path.read_text() and b.pop("pid")
    assert a.pop("torch_loaded") and not b.pop("torch_loaded")  # served: forked after the server's imports
    assert a.pop("parent") == server.proc.pid and b.pop("parent") != server.proc.pid
    assert (
        a
        == b
        == {
            "argv": [str(job_script)],
            "cwd": str(tmp_path),
            "marker": "m1",
            "path0": str(job_script.parent),
            "nice": os.nice(0),
        }
    )


def test_niceness_and_sigterm_reach_the_child(server, job_script, tmp_path):
    proc = subprocess.Popen(
        [sys.executable, str(job_script)],
        cwd=tmp_path,
        env=_env(SLEEP="1"),
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.nice(5),
    )
    first = json.loads(proc.stdout.readline())
    assert first["nice"] == os.nice(0) + 5 and first["parent"] == server.proc.pid
    assert proc.stdout.readline() == "sleeping\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # died of the signal, as the plain process would
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the child got it too, and the server reaped it
        try:
            os.kill(first["pid"], 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the server's child {first['pid']} outlived its SIGTERM")


def test_another_environment_or_command_starts_as_usual(server, job_script, tmp_path):
    # a hash seed other than the server's is read at start-up: the job must start as a plain process
    other = _run([str(job_script)], _env(PYTHONHASHSEED="7"), cwd=tmp_path)
    assert other.returncode == 0 and json.loads(other.stdout)["parent"] != server.proc.pid
    # more than one thread per process: the server imported with one
    threads = _run([str(job_script)], _env(OMP_NUM_THREADS="2"), cwd=tmp_path)
    assert threads.returncode == 0 and json.loads(threads.stdout)["parent"] != server.proc.pid
    assert "threads (*_NUM_THREADS)" in server.log_path.read_text()
    # a script outside .snakemake/scripts: never sent
    outside = tmp_path / "probe.py"
    outside.write_text(SCRIPT)
    plain = _run([str(outside)], _env())
    assert json.loads(plain.stdout)["parent"] != server.proc.pid


def test_the_cli_module_runs_in_the_server_with_its_exit_status(server, tmp_path):
    """`python -u -m lmbias.cli` (how Accelerate starts its workers): a bad command line exits 2 with argparse's
    message, through the server as without it."""
    env = _env()
    command = ["-u", "-m", "lmbias.cli", "no-such-command"]
    served = _run(command, env, cwd=tmp_path)
    plain = _run(command, _without_server(env), cwd=tmp_path)
    assert served.returncode == plain.returncode == 2
    assert served.stderr == plain.stderr and "invalid choice: 'no-such-command'" in served.stderr
    assert "'module': 'lmbias.cli', 'args': ['no-such-command']" in server.log_path.read_text()
