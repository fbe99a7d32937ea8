"""Long Snakemake runs that module fixtures read, started in the background one after another.

tests/conftest.py queues the runs of the selected tests when the session starts (the methods run first, then
QUEUED in order); a thread starts each at niceness 10 when the one before it has ended, so the runs use the
core that the single-process unit tests leave idle, and never compete with each other. A fixture that asks for
a run (`result`) waits for it; one still queued is started at once, at niceness 0, as the session waits for it.
A run is the same command on the same inputs whenever it runs, so its outputs do not depend on when it ran.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from helpers.workflow_runs import BackgroundSnakemake, run_snakemake


@dataclass(frozen=True)
class QueuedRun:
    name: str
    #: the fixture that reads it (tests/conftest.py queues the run where a selected test uses it)
    fixture: str
    #: prepare the run's workflow copy: (workdir, Snakemake arguments)
    prepare: Callable[[], tuple[Path, list[str]]]


class BackgroundQueue:
    def __init__(self, first: BackgroundSnakemake | None, queued: list[QueuedRun]):
        self._lock = threading.Lock()
        self._pending = list(queued)
        self._started: dict[str, BackgroundSnakemake] = {}
        self._current = first
        self._stopping = False
        self._thread = threading.Thread(target=self._start_in_turn, name="background-runs", daemon=True)
        self._thread.start()

    def _start_in_turn(self) -> None:
        while True:
            current = self._current
            if current is not None:
                current.proc.wait()
            with self._lock:
                if self._stopping or not self._pending:
                    return
                self._current = self._start(self._pending.pop(0), niceness=10)

    def _start(self, run: QueuedRun, niceness: int) -> BackgroundSnakemake:
        workdir, args = run.prepare()
        started = BackgroundSnakemake(workdir, *args, niceness=niceness)
        self._started[run.name] = started
        return started

    def result(self, name: str) -> tuple[Path, subprocess.CompletedProcess] | None:
        """The run's workdir and finished process (a failed run raises, naming its output); None when this
        session did not queue it."""
        with self._lock:
            started = self._started.get(name)
            if started is None:
                run = next((r for r in self._pending if r.name == name), None)
                if run is None:
                    return None
                self._pending.remove(run)
                started = self._start(run, niceness=0)
        return started.workdir, started.result()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._pending.clear()
        for started in list(self._started.values()):
            started.stop()


def queued_or_run(request, name: str, prepare: Callable[[], tuple[Path, list[str]]]) -> Path:
    """For a fixture: the workdir of the session's run `name` once it has ended (queued by tests/conftest.py in
    one pytest process), or, where the session did not queue it (an xdist worker), of the same run done here."""
    queue = getattr(request.config, "_lmbias_background_queue", None)
    queued = queue.result(name) if queue is not None else None
    if queued is not None:
        return queued[0]
    workdir, args = prepare()
    run_snakemake(workdir, *args)
    return workdir
