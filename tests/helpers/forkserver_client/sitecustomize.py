"""The client half of the tests' fork server (tests/helpers/forkserver.py): on the PYTHONPATH of the tests' Snakemake
runs only, so Python imports it at start-up in Snakemake and in every job process.

A job script of a Snakemake run (`python .snakemake/scripts/tmpXXXX.<name>.py`), or a `python -m snakemake`,
`python -m lmbias.cli` or Accelerate launcher process (MODULES), asks the server, started by the
test session with torch, transformers and the other heavy libraries already imported, to fork a process that runs
the script in this process's place: same argv, working folder, environment, niceness, umask and standard streams
(passed as file descriptors). This process waits, forwards the signals it gets (Snakemake stops a job with
SIGTERM), and exits as the script's process did. Any other process, or no server, or an environment the server
was not started with (tests/helpers/forkserver.py: IMPORT_TIME_ENV): nothing happens and Python starts as usual.
Standard library only: it runs before anything else.
"""

import os
import sys

#: The modules whose `python [-u] -m <module> ...` processes the server runs: Snakemake (the tests' runs), the CLI
#: that the tests and Accelerate's workers start, and Accelerate's launcher.
MODULES = ("snakemake", "lmbias.cli", "accelerate.commands.launch")


def _what_to_run(argv: list) -> dict | None:
    """{"script": path} for a Snakemake job script, {"module": name, "args": [...], "unbuffered": bool} for
    `python [-u] -m <one of MODULES> ...`; None for any other process."""
    if len(argv) == 2 and argv[1].endswith(".py"):
        script = os.path.abspath(argv[1])
        return {"script": script} if "/.snakemake/scripts/tmp" in script else None
    options = argv[1:]
    unbuffered = options[:1] == ["-u"]
    if unbuffered:
        options = options[1:]
    if len(options) >= 2 and options[0] == "-m" and options[1] in MODULES:
        return {"module": options[1], "args": options[2:], "unbuffered": unbuffered}
    return None


def _run_in_forkserver() -> None:
    path = os.environ.get("LMBIAS_TEST_FORKSERVER")
    what = _what_to_run(getattr(sys, "orig_argv", None) or []) if path else None
    if what is None:
        return
    import json
    import signal
    import socket

    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
    except OSError:
        return
    umask = os.umask(0)
    os.umask(umask)
    request = json.dumps(
        {
            "executable": os.path.realpath(sys.executable),
            "run": what,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "nice": os.nice(0),
            "umask": umask,
        }
    ).encode()
    socket.send_fds(sock, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
    replies = sock.makefile("rb")
    first = replies.readline().split()
    if first[:1] != [b"pid"]:  # "plain": this environment is not the server's; start as usual
        replies.close()
        sock.close()
        return
    child = int(first[1])

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, forward)
    last = replies.readline().split()
    if last[:1] == [b"exit"]:
        os._exit(int(last[1]))
    if last[:1] == [b"signal"]:
        signum = int(last[1])
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os.write(2, b"lmbias test fork server: the connection ended without the job's exit status\n")
    os._exit(1)


_run_in_forkserver()
