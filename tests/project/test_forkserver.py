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


THREADS_SCRIPT = """
import json, scipy.linalg, sklearn.linear_model, threadpoolctl, torch  # every pool the server has
pools = sorted((p["filepath"], p["num_threads"]) for p in threadpoolctl.threadpool_info())
print(json.dumps({"torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(), "pools": pools}))
"""


def _unthreaded(env: dict) -> dict:
    """The environment without any *_NUM_THREADS (as the tests' Snakemake runs and CLI processes have it)."""
    from helpers.forkserver import ONE_THREAD_ENV

    return {k: v for k, v in env.items() if k not in ONE_THREAD_ENV}


def test_without_thread_settings_the_child_gets_a_fresh_process_pools(server, job_script, tmp_path):
    """The server imported with one thread per pool; a process with no *_NUM_THREADS gets the sizes a plain
    process gets (torch's and every OpenMP and OpenBLAS pool), and one with OMP_NUM_THREADS=1 keeps one."""
    job_script.write_text(THREADS_SCRIPT)
    env = _unthreaded(_env())
    served = _run([str(job_script)], env, cwd=tmp_path)
    plain = _run([str(job_script)], _without_server(env), cwd=tmp_path)
    assert served.returncode == plain.returncode == 0, served.stderr + plain.stderr
    assert json.loads(served.stdout) == json.loads(plain.stdout)
    fresh = json.loads(plain.stdout)
    one = json.loads(_run([str(job_script)], _env(), cwd=tmp_path).stdout)
    assert one["torch"] == 1 and {n for _, n in one["pools"]} == {1}
    if os.cpu_count() > 1:  # otherwise a fresh process has one thread too, and the comparison above says nothing
        assert fresh["torch"] > 1 and one != fresh


SNAKEFILE = """
rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    run:
        import os, sys
        with open(output[0], "w") as out:
            out.write(f"{os.environ.get('MARKER')} {'torch' in sys.modules}\\n")

rule b:
    input: "a.txt"
    output: "b.txt"
    script: "b.py"
"""


def test_a_snakemake_run_runs_in_the_server_as_its_plain_process_would(server, tmp_path):
    """`python -m snakemake` (the tests' runs): the main process is a child of the server, its `run:` job runs
    in it and its script job is served in turn; files, output and exit status as without the server."""
    results = {}
    served_env = _unthreaded(_env(MARKER="m2"))
    for name, env in (("served", served_env), ("plain", _without_server(served_env))):
        workdir = tmp_path / name
        workdir.mkdir()
        (workdir / "Snakefile").write_text(SNAKEFILE)
        (workdir / "b.py").write_text(
            "import os\nopen(snakemake.output[0], 'w').write(open(snakemake.input[0]).read() + str(os.getppid()))\n"
        )
        run = _run(["-m", "snakemake", "--cores", "1", "--quiet"], env, cwd=workdir)
        assert run.returncode == 0, run.stderr
        again = _run(["-m", "snakemake", "--cores", "1", "-n", "bad-target"], env, cwd=workdir)
        results[name] = (workdir, run, again)
    (served, _, served_bad), (plain, _, plain_bad) = results["served"], results["plain"]
    # the run: job ran in the served main process, where the server had imported torch; the plain one had not
    assert (served / "a.txt").read_text() == "m2 True\n" and (plain / "a.txt").read_text() == "m2 False\n"
    served_parent = int((served / "b.txt").read_text().splitlines()[-1])
    assert served_parent == server.proc.pid  # the script job: served too
    assert served_bad.returncode == plain_bad.returncode == 1
    error = [out.stdout.split("Building DAG of jobs...")[-1] for out in (served_bad, plain_bad)]
    assert error[0] == error[1] and "MissingRuleException" in error[0]
    log = server.log_path.read_text()
    assert "'module': 'snakemake', 'args': ['--cores', '1', '--quiet']" in log
