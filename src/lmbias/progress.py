"""Progress a person can follow in a job's log: a tqdm bar while a job runs, one summary line when it ends.

Snakemake jobs send stderr to their log file (lmbias.job_runtime.setup_job_logging), and so do the processes
of an `accelerate launch`. tqdm's usual carriage-return redraws would pile up there as one endless line,
so on a stream that is not a terminal the bar is written as ordinary lines, at most one every
LOG_INTERVAL seconds (plus the first and the final state). On a terminal it is the usual live bar.
Only the main process of a multi-process run shows one (`enabled=False` elsewhere).

The scoring engine reports progress without knowing about jobs: `job_progress` installs a bar for the block it
wraps, and the engine's batch loop (`lmbias.engine.batching.run_batches`) calls `expect` with the inputs it is
about to run and `advance` after each batch; an engine call that runs its inputs in several loops announces
them all first (`planned`). Outside a `job_progress` block these do nothing.

A benchmark's scoring has one bar counted in its items (`job_progress(..., total=items)`): the total is the
benchmark's item count from the first line on. The engine runs inputs, not items (the distinct inputs of all
items, sorted by length, so an item is done only when its longest input is), and the bar shows the share of the
inputs announced so far that has run, in items: it never goes back (work announced later holds it where it is
until the runs catch up), never passes the total, and reaches the total when the block ends. Generation
(`lmbias.engine.generation`) also reports the tokens it generates (`generated`): the bar's postfix gives them
per second of the block, and the job's summary line their count. Without a `total` (SentenceDebias' embeddings)
the bar counts the inputs run, with no total to go back from.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time

from tqdm import tqdm

#: Seconds between progress lines in a log file (a terminal redraws every TTY_INTERVAL).
LOG_INTERVAL = 30.0
TTY_INTERVAL = 0.5

_PROGRESS: contextvars.ContextVar[JobProgress | None] = contextvars.ContextVar("lmbias_progress", default=None)
#: Inside `planned`: the engine call has announced all its inputs, so run_batches' own `expect` adds none.
_PLANNED: contextvars.ContextVar[bool] = contextvars.ContextVar("lmbias_progress_planned", default=False)


class _LineStream:
    """A file for tqdm that turns each redraw ('\\r' + bar + padding) into one line of its own."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        line = text.replace("\r", "").replace("\x1b[A", "").rstrip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(
    desc: str, unit: str, total: int | None = None, initial: int = 0, enabled: bool = True, stream=None
) -> tqdm:
    """A tqdm bar on `stream` (default: the current sys.stderr, i.e. the job's log), line by line when
    that is not a terminal. `enabled=False` (non-main processes) gives a bar that writes nothing."""
    stream = sys.stderr if stream is None else stream
    tty = _is_terminal(stream)
    interval = TTY_INTERVAL if tty else LOG_INTERVAL
    # In a log, miniters=1 (no dynamic miniters): tqdm's monitor thread then never forces a redraw between
    # updates (it did: two lines in the same second), and each update prints only LOG_INTERVAL after the last.
    extra = {} if tty else {"miniters": 1}
    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=f" {unit}",
        file=stream if tty else _LineStream(stream),
        mininterval=interval,
        maxinterval=max(interval, 10.0),
        disable=not enabled,
        dynamic_ncols=tty,
        ascii=not tty,
        leave=True,
        **extra,
    )


class JobProgress:
    """The progress of one `job_progress` block: the engine's inputs announced (`expected`) and run (`done`),
    the tokens generated, and the bar that shows them (in `items` when the block has a total, else in inputs)."""

    def __init__(self, bar: tqdm, items: int | None):
        self.bar = bar
        self.items = items
        self.expected = 0
        self.done = 0
        self.tokens = 0
        self.started = time.perf_counter()

    def expect(self, n: int) -> None:
        self.expected += n

    def advance(self, n: int) -> None:
        self.done += n
        if self.items is None:
            self.bar.update(n)
            return
        # the share of the announced inputs run, in items; the last item is done when the block ends
        target = min(self.items * self.done // max(self.expected, 1), max(self.items - 1, 0))
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)

    def generated(self, n: int) -> None:
        self.tokens += n
        bar = self.bar
        if bar.disable:
            return
        now = time.time()
        if now - bar.last_print_t >= bar.mininterval:  # tokens/s as often as the bar may print a line
            bar.set_postfix_str(self.token_rate(), refresh=False)
            bar.refresh()
            bar.last_print_t = now

    def token_rate(self) -> str:
        seconds = time.perf_counter() - self.started
        return f"{self.tokens / seconds if seconds > 0 else 0.0:,.1f} tokens/s"

    def finish(self) -> None:
        """The block ended without an error: every item is done."""
        if self.tokens and not self.bar.disable:
            self.bar.set_postfix_str(self.token_rate(), refresh=False)
        if self.items is not None and self.bar.n < self.items:
            self.bar.n = self.items  # shown once, by close(): an update could print the same line just before


@contextlib.contextmanager
def job_progress(desc: str, unit: str = "inputs", enabled: bool = True, stream=None, total: int | None = None):
    """Show the engine's progress for the duration of the block; yields its JobProgress. With `total` (a
    benchmark's items, `unit` "items") the bar counts items of that total (module docstring), else the
    inputs run through the model."""
    bar = progress_bar(desc, unit, total=total, enabled=enabled, stream=stream)
    state = JobProgress(bar, None if total is None else int(total))
    token = _PROGRESS.set(state)
    try:
        yield state
        state.finish()
    finally:
        _PROGRESS.reset(token)
        bar.close()


def current() -> JobProgress | None:
    """The progress of the enclosing `job_progress` block, if any."""
    return _PROGRESS.get()


def expect(n: int) -> None:
    """`n` more inputs are about to be run (a benchmark may call the engine several times, each call learning
    its own count); inside `planned` they were announced already."""
    state = _PROGRESS.get()
    if state is not None and n and not _PLANNED.get():
        state.expect(int(n))


@contextlib.contextmanager
def planned(n: int):
    """An engine call that runs its inputs in several loops of run_batches announces all `n` of them (the
    batch loops' rows, summed) before the first runs, so the share run never drops when the next loop starts."""
    expect(n)
    token = _PLANNED.set(True)
    try:
        yield
    finally:
        _PLANNED.reset(token)


def advance(n: int) -> None:
    """`n` inputs have been run."""
    state = _PROGRESS.get()
    if state is not None and n:
        state.advance(int(n))


def generated(n: int) -> None:
    """`n` more tokens have been generated (a decoding step's rows still writing)."""
    state = _PROGRESS.get()
    if state is not None and n:
        state.generated(int(n))


def rate_line(verb: str, count: int, unit: str, seconds: float) -> str:
    """'scored 1,508 items in 12.3 s (122.6 items/s)'. The rate is of `unit`, so a training job says
    rate_line('trained 2 steps,', 4096, 'tokens', 3.1): 'trained 2 steps, 4,096 tokens in 3.1 s (1,321.3 tokens/s)'.
    Under a second the time keeps three decimals, so a fast job's line still gives its rate ('in 0.042 s')."""
    rate = count / seconds if seconds > 0 else float("inf")
    shown = f"{seconds:.1f}" if seconds >= 1 else f"{seconds:.3f}"
    return f"{verb} {count:,} {unit} in {shown} s ({rate:,.1f} {unit}/s)"
