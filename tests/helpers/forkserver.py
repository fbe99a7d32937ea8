"""A fork server for the job processes of the tests' Snakemake runs: their start-up without the imports.

Why: a job of a tiny model does a second of work, but its process first spends about 5 s of CPU importing torch,
transformers and the rest; the suite starts several hundred such jobs on a 2-core CI machine, so imports were
most of its CPU time. This server (started once per test session by tests/conftest.py) imports the heavy
third-party libraries (PRELOAD; never lmbias, whose copy in each workflow folder a test may edit) and then, for
each job process of a test's Snakemake run, forks a child that runs the job's script in that process's place
(tests/helpers/forkserver_client/sitecustomize.py is the other half), and likewise for the processes of
`python -m snakemake` (the tests' Snakemake runs themselves), `python -m lmbias.cli` and Accelerate's launcher.
The child gets the job's argv, working folder, environment, niceness, umask and standard streams, `sys.path` as
a fresh interpreter would build it, and fresh Python and NumPy random states; the script runs as `__main__` with
its atexit handlers, and the job process exits with the child's status. Snakemake, its jobs' commands and the
scripts are unchanged.

Only where it cannot change a result: a job whose environment differs from the server's in a variable the
preloaded libraries read when imported (IMPORT_TIME_ENV) runs as a plain process, and so does every process
that is neither a Snakemake job script nor one of those modules (Slurm's jobs, `python -c`, bench scripts).
Thread pools: the server imports with one thread each (ONE_THREAD_ENV, what Snakemake gives a 1-thread job); a
process with those variables unset (a Snakemake main process, a CLI the tests start) gets the pools a fresh
process gets, which the server measures once in a probe process (FreshThreads); any other setting runs plain.
LMBIAS_TEST_FORKSERVER=off turns the server off for a test session (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: What the job scripts import that is slow to import (torch and transformers are most of it).
PRELOAD = [
    "torch",
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.compute",
    "pandas",
    "scipy.stats",
    "yaml",
    "jsonschema",
    "safetensors.torch",
    "tokenizers",
    "transformers",
    "transformers.modeling_utils",
    "transformers.models.auto.modeling_auto",
    "transformers.models.bert.modeling_bert",
    "transformers.models.roberta.modeling_roberta",
    "transformers.models.gpt2.modeling_gpt2",
    "transformers.models.bart.modeling_bart",
    "transformers.models.llama.modeling_llama",
    "transformers.models.bert.tokenization_bert",
    "transformers.models.gpt2.tokenization_gpt2",
    "accelerate",
    "peft",
    "sklearn.linear_model",
    "spacy",
    "threadpoolctl",
    "matplotlib",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "snakemake",
    "snakemake.cli",
    "snakemake.api",
    "snakemake.script",
]
#: The preloaded modules that bring native thread pools (OpenMP, OpenBLAS): the probe imports these to read a
#: fresh process's pool sizes.
THREAD_POOL_MODULES = ["torch", "numpy", "scipy.linalg", "sklearn.linear_model"]
#: Environment variables that the preloaded libraries read when they are imported: a job whose values differ
#: from the server's would not see its own in a forked child, so it runs as a plain process.
IMPORT_TIME_ENV = [
    "PYTHONHASHSEED",
    "PYTHONWARNINGS",
    "CUDA_VISIBLE_DEVICES",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TRANSFORMERS_VERBOSITY",
    "TOKENIZERS_PARALLELISM",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "TORCH_HOME",
    "PYTORCH_CUDA_ALLOC_CONF",
    "HOME",  # huggingface_hub's and matplotlib's default folders
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "MPLBACKEND",
    "MPLCONFIGDIR",
]
#: Snakemake sets these to a job's threads, and torchrun sets OMP_NUM_THREADS=1 for its workers; the server
#: imports with them all at 1. A process with OMP_NUM_THREADS=1 and each of the others 1 or unset (MKL, OpenBLAS
#: and numexpr then follow OMP_NUM_THREADS) gets the same thread pools; one with all of them unset gets a fresh
#: process's pools (FreshThreads); any other runs as a plain process.
ONE_THREAD_ENV = {
    k: "1"
    for k in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "GOTO_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    )
}
CLIENT_DIR = Path(__file__).resolve().parent / "forkserver_client"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class ForkServer:
    """The server process, started by the test session; `client_env()` is what the processes it serves carry."""

    def __init__(self, folder: Path, env: dict):
        self.socket_path = str(folder / "forkserver.sock")
        self.log_path = folder / "forkserver.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, self.socket_path],
            env={
                **{k: v for k, v in env.items() if k not in ("PYTHONPATH", "LMBIAS_TEST_FORKSERVER")},
                **ONE_THREAD_ENV,
            },
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 120.0) -> bool:
        """Whether the server listens (its imports done) within timeout seconds; False if it ended or is slow."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.socket_path):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def client_env(self, python_path: str | None) -> dict:
        """The variables that send a process to this server: the client first on PYTHONPATH, and the socket."""
        paths = [str(CLIENT_DIR), *(p for p in (python_path or "").split(os.pathsep) if p)]
        return {"PYTHONPATH": os.pathsep.join(paths), "LMBIAS_TEST_FORKSERVER": self.socket_path}

    def stop(self) -> None:
        from helpers.processes import stop_process  # here: the server runs this file as a script, without helpers

        stop_process(self.proc, timeout=30)
        self._log.close()


#: Run as `python -c PROBE <module>...`: imports the modules, then prints torch's intra- and inter-op threads and
#: each native pool's size by library file (threadpoolctl), as a fresh process with that environment has them.
PROBE = """
import json, sys
for name in sys.argv[1:]:
    __import__(name)
import threadpoolctl, torch
pools = {p["filepath"]: p["num_threads"] for p in threadpoolctl.threadpool_info()}
print(json.dumps({"torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(), "pools": pools}))
"""


class FreshThreads:
    """The thread pools of a fresh process with ONE_THREAD_ENV unset: what the server's children with those
    variables unset get in place of the server's one-thread pools. Measured by a probe process that starts beside
    the server's imports; `sizes` is None (and `problem` says why) where the probe failed or a pool of the server's
    is not among the probe's, and such processes then run plain."""

    def __init__(self, env: dict):
        self.sizes: dict | None = None
        self.problem: str | None = "not measured yet"
        self._probe = subprocess.Popen(
            [sys.executable, "-c", PROBE, *THREAD_POOL_MODULES],
            env={k: v for k, v in env.items() if k not in ONE_THREAD_ENV},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def measure(self) -> None:
        """Read the probe (after the server's own imports: its pools must all be among the probe's)."""
        import threadpoolctl
        import torch

        out, err = self._probe.communicate(timeout=300)
        if self._probe.returncode != 0:
            self.problem = f"the probe failed: {err[-1000:]}"
            return
        sizes = json.loads(out.splitlines()[-1])
        unknown = sorted({p["filepath"] for p in threadpoolctl.threadpool_info()} - set(sizes["pools"]))
        if unknown:
            self.problem = f"pools the probe did not load: {unknown}"
        elif sizes["interop"] != torch.get_num_interop_threads():  # settable once only, before any use
            here = torch.get_num_interop_threads()
            self.problem = f"inter-op threads {sizes['interop']} in a fresh process, {here} here"
        else:
            self.sizes, self.problem = sizes, None

    def apply(self) -> None:
        """In a forked child: resize torch's and every native pool to a fresh process's sizes."""
        import threadpoolctl
        import torch

        torch.set_num_threads(self.sizes["torch"])
        for pool in threadpoolctl.ThreadpoolController().lib_controllers:
            pool.set_num_threads(self.sizes["pools"][pool.filepath])


# ------------------------------------------------------------------------------------------- the server side


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < 8:
        raise ConnectionError("short request")
    size = int.from_bytes(data[:8], "big")
    body = data[8:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("request cut short")
        body += chunk
    return json.loads(body), fds


def _incompatibility(request: dict, fresh: FreshThreads) -> str | None:
    """Why the job may not run in a child of this server (None: it may)."""
    if request["executable"] != os.path.realpath(sys.executable):
        return f"another Python ({request['executable']})"
    env = request["env"]
    differ = [k for k in IMPORT_TIME_ENV if env.get(k) != os.environ.get(k)]
    if "PYTHONHASHSEED" in differ and "PYTHONHASHSEED" not in env:  # unset: a random seed, of which the server's is one
        differ.remove("PYTHONHASHSEED")
    launcher = request["run"].get("module") == "accelerate.commands.launch"  # computes nothing: no threads
    threads = [env.get(k) for k in ONE_THREAD_ENV]
    if launcher or (env.get("OMP_NUM_THREADS") == "1" and all(v in (None, "1") for v in threads)):
        pass  # the server's pools
    elif all(v is None for v in threads):
        if fresh.sizes is None:
            differ.append(f"threads unset, and a fresh process's pools are unknown ({fresh.problem})")
    else:
        differ.append("threads (*_NUM_THREADS)")
    return f"import-time environment differs: {', '.join(differ)}" if differ else None


def _wants_fresh_threads(request: dict) -> bool:
    """Whether the process has no *_NUM_THREADS set (it gets a fresh process's pools), the launcher excepted."""
    env = request["env"]
    return request["run"].get("module") != "accelerate.commands.launch" and all(k not in env for k in ONE_THREAD_ENV)


def _run_job(request: dict, fds: list[int], base_path: list[str], fresh: FreshThreads) -> None:
    """In the forked child: become the job's process and run its script; never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if _wants_fresh_threads(request):
            fresh.apply()
        os.umask(request["umask"])
        delta = request["nice"] - os.nice(0)
        if delta:
            os.nice(delta)
        what = request["run"]
        python_path = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        if "script" in what:  # python <script>: its folder first on the path
            sys.argv = [what["script"]]
            sys.orig_argv = [sys.executable, what["script"]]
            first = os.path.dirname(what["script"])
        else:  # python [-u] -m <module> <args>: the working folder first; runpy sets argv[0]
            sys.argv = ["-m", *what["args"]]
            sys.orig_argv = [
                sys.executable,
                *(["-u"] if what["unbuffered"] else []),
                "-m",
                what["module"],
                *what["args"],
            ]
            first = request["cwd"]
            if what["unbuffered"]:  # as -u: unbuffered binary layer, text written through
                import io

                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
                sys.stderr = io.TextIOWrapper(
                    io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace"
                )
        sys.path[:] = [first, *python_path, *base_path]
        import random

        import numpy

        random.seed()
        numpy.random.seed()
        import tempfile

        tempfile.tempdir = None  # found again from this job's TMPDIR
        import runpy

        code = 0
        try:
            if "script" in what:
                runpy.run_path(what["script"], run_name="__main__")
            else:
                runpy.run_module(what["module"], run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 (printed as Python prints an uncaught exception)
            sys.excepthook(*sys.exc_info())
            code = 1
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 (the set-up failed: say so on the job's stderr)
        with contextlib.suppress(BaseException):
            sys.excepthook(*sys.exc_info())
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def serve(socket_path: str) -> None:
    base_path = [p for p in sys.path[1:] if p]  # a fresh interpreter's, less the script's folder
    fresh = FreshThreads(dict(os.environ))  # the probe imports beside the server
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 (an optional library: the jobs import what they need)
            print(f"not preloaded: {name}: {type(error).__name__}: {error}", flush=True)
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    fresh.measure()
    print(f"preloaded {len(PRELOAD)} modules, {threads} thread(s)", flush=True)
    print(f"fresh-process thread pools: {fresh.sizes or fresh.problem}", flush=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    children: dict[int, socket.socket] = {}
    by_conn: dict[socket.socket, int] = {}
    served = 0
    while running:
        try:
            ready, _, _ = select.select([listener, wake_read, *by_conn], [], [])
        except InterruptedError:
            continue
        if wake_read in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                by_conn.pop(conn, None)
                reply = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
                with contextlib.suppress(OSError):
                    conn.sendall(reply.encode() + b"\n")
                conn.close()
        for conn in [c for c in ready if c in by_conn]:  # a job process gone without its status: it was killed
            with contextlib.suppress(OSError):
                if conn.recv(1):
                    continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(by_conn[conn], signal.SIGKILL)
        if listener in ready:
            conn, _ = listener.accept()
            try:
                request, fds = _read_request(conn)
            except (OSError, ValueError) as error:
                print(f"bad request: {error}", flush=True)
                conn.close()
                continue
            reason = _incompatibility(request, fresh)
            if reason:
                print(f"plain process for {request['run']}: {reason}", flush=True)
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    conn.sendall(b"plain\n")
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                for signum in (signal.SIGCHLD, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                listener.close()
                conn.close()
                for other in by_conn:
                    other.close()
                os.close(wake_read)
                os.close(wake_write)
                _run_job(request, fds, base_path, fresh)
            for fd in fds:
                os.close(fd)
            served += 1
            children[pid] = conn
            by_conn[conn] = pid
            print(f"forked {pid} for {request['run']}", flush=True)
            with contextlib.suppress(OSError):
                conn.sendall(f"pid {pid}\n".encode())
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"served {served} job(s), {usage.ru_utime + usage.ru_stime:.1f} s of their CPU; stopping at "
        f"{time.strftime('%H:%M:%S')}",
        flush=True,
    )
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)


if __name__ == "__main__":
    serve(sys.argv[1])
