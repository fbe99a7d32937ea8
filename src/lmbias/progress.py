"""Progress a person can follow in a job's log: a tqdm bar while a job runs, one summary line when it ends.

Snakemake jobs send stderr to their log file (lmbias.job_runtime.setup_job_logging), and so do the processes
of an `accelerate launch`. tqdm's usual carriage-return redraws would pile up there as one endless line,
so on a stream that is not a terminal the bar is written as ordinary lines, at most one every
LOG_INTERVAL seconds (plus the first and the final state). On a terminal it is the usual live bar.
Only the main process of a multi-process run shows one (`enabled=False` elsewhere).

The scoring engine reports progress without knowing about jobs: `job_progress` installs the bar for the
block it wraps, and the engine's batch loop (`lmbias.engine.batching.run_batches`) calls `expect` with the
inputs it is about to run and `advance` after each batch. Outside a `job_progress` block both do nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys

from tqdm import tqdm

#: Seconds between progress lines in a log file (a terminal redraws every TTY_INTERVAL).
LOG_INTERVAL = 30.0
TTY_INTERVAL = 0.5

_BAR: contextvars.ContextVar[tqdm | None] = contextvars.ContextVar("lmbias_progress_bar", default=None)


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


@contextlib.contextmanager
def job_progress(desc: str, unit: str = "inputs", enabled: bool = True, stream=None):
    """Show the engine's progress (inputs run through the model) in a bar for the duration of the block."""
    bar = progress_bar(desc, unit, total=0, enabled=enabled, stream=stream)
    token = _BAR.set(bar)
    try:
        yield bar
    finally:
        _BAR.reset(token)
        bar.close()


def expect(n: int) -> None:
    """`n` more inputs are about to be run (the bar's total grows: a benchmark may call the engine
    several times, each call learning its own count)."""
    bar = _BAR.get()
    if bar is not None and n:
        bar.total = (bar.total or 0) + int(n)


def advance(n: int) -> None:
    """`n` inputs have been run."""
    bar = _BAR.get()
    if bar is not None and n:
        bar.update(int(n))


def rate_line(verb: str, count: int, unit: str, seconds: float) -> str:
    """'scored 1,508 items in 12.3 s (122.6 items/s)'. The rate is of `unit`, so a training job says
    rate_line('trained 2 steps,', 4096, 'tokens', 3.1): 'trained 2 steps, 4,096 tokens in 3.1 s (1,321.3 tokens/s)'.
    Under a second the time keeps three decimals, so a fast job's line still gives its rate ('in 0.042 s')."""
    rate = count / seconds if seconds > 0 else float("inf")
    shown = f"{seconds:.1f}" if seconds >= 1 else f"{seconds:.3f}"
    return f"{verb} {count:,} {unit} in {shown} s ({rate:,.1f} {unit}/s)"
