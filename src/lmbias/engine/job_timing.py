"""A scoring job's own timing file: its seconds, items/s, token budget and peak memory.

Snakemake's benchmark file of a job (``benchmarks/.../scores/{benchmark}.tsv``, the rule's ``benchmark:``)
samples the job's process tree from outside (every 30 s after its first ones: a short job's peak may be
missed) and knows nothing of GPU memory; Snakemake rewrites it once the job ends, so a job cannot add to
it. The scoring job writes its own record beside it (the rule's ``log: timing``, kept when the job fails, so an
out-of-memory failure still says how much it held):

* ``peak_rss_mib``: the process's peak resident memory (Linux's VmHWM, else ``getrusage`` ru_maxrss), model
  loading included; with several processes (resources.gpu > 1) the largest of them;
* ``peak_cuda_allocated_mib``: on a GPU, ``torch.cuda.max_memory_allocated`` (tensors only, not the caching
  allocator's reserve), weights included; NA on CPU;
* ``max_tokens`` as configured and ``max_tokens_final`` after ``oom_halvings`` halvings
  (lmbias.engine.batching.run_batches);
* ``load_s`` (model loading) apart from ``score_s`` and ``items_per_s`` (the forward passes and their
  bookkeeping), and ``status`` (``ok`` or the error's class name).

Both scoring rules run one function (lmbias.jobs.model_scoring.score_benchmarks) and write one layout:
``scores.job.tsv`` (rule score_model, every benchmark of a (model, method, seed)) and ``scores/{benchmark}.job.tsv``
(rule score_benchmark, one) have a first column ``benchmark`` and several rows (write_timing_rows): one
``(load)`` row (loading the model, once) and one per benchmark: its ``score_s``, items, forward passes, token
budget and peak memory while it was scored (``status`` ``kept`` for a score file kept by its key, with no
forward pass). ``peak_rss_mib`` is the process's peak so far (the OS keeps no other); on CUDA
``peak_cuda_allocated_mib`` is the benchmark's own (the counter is reset before each benchmark; the weights
are in it).
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

from lmbias.lazy import lazy_module

torch = lazy_module("torch")

COLUMNS = (
    "status",
    "device",
    "processes",
    "load_s",
    "score_s",
    "items",
    "items_per_s",
    "forward_passes",
    "max_tokens",
    "max_tokens_final",
    "oom_halvings",
    "peak_rss_mib",
    "peak_cuda_allocated_mib",
)


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB: Linux's VmHWM (/proc/self/status, the high-water mark of this
    program since it started), else ru_maxrss (KiB on Linux, bytes on macOS). Not ru_maxrss on Linux: a process
    forked from a large one (a job started by Snakemake, a bench that built a model) inherits its parent's
    high-water mark there, across exec, and would report the parent's memory."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def peak_cuda_allocated_mib(device) -> float | None:
    """The most memory tensors held at once on `device` since the process started, in MiB; None off CUDA."""
    if device is None or torch.device(device).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(torch.device(device)) / 2**20


def peak_memory(device) -> dict[str, float | None]:
    return {"peak_rss_mib": peak_rss_mib(), "peak_cuda_allocated_mib": peak_cuda_allocated_mib(device)}


def largest(peaks: list[dict]) -> dict[str, float | None]:
    """Per column, the largest of several processes' peak_memory (None where none has one)."""
    out = {}
    for key in ("peak_rss_mib", "peak_cuda_allocated_mib"):
        values = [p[key] for p in peaks if p and p.get(key) is not None]
        out[key] = max(values) if values else None
    return out


def _cell(value) -> str:
    if value is None:
        return "NA"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("\t", " ").replace("\n", " ")


#: the columns of a several-benchmark timing file: one row per benchmark and one "(load)" row
ROWS_COLUMNS = ("benchmark", *COLUMNS)

#: the `benchmark` of the row that records loading the model
LOAD_ROW = "(load)"


def write_timing_rows(path: str | os.PathLike, records: list[dict]) -> None:
    """Several records (ROWS_COLUMNS) as a TSV with one row each, replacing the file atomically."""
    unknown = sorted({key for record in records for key in record} - set(ROWS_COLUMNS))
    if unknown:
        raise ValueError(f"timing record: unknown column(s) {', '.join(unknown)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    lines = ["\t".join(ROWS_COLUMNS)] + ["\t".join(_cell(r.get(c)) for c in ROWS_COLUMNS) for r in records]
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_timing_rows(path: str | os.PathLike) -> list[dict[str, str]]:
    """Every row of a timing file as {column: text}."""
    header, *rows = Path(path).read_text(encoding="utf-8").splitlines()
    return [dict(zip(header.split("\t"), row.split("\t"))) for row in rows]


def reset_peak_cuda(device) -> None:
    """Start a new peak for peak_cuda_allocated_mib (on CUDA; nothing elsewhere)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def record_scoring(record: dict, stats, budget, seconds: float) -> None:
    """The scoring part of a job's record: seconds, items/s, forward passes, the token budget (lmbias.engine.
    batching.TokenBudget) as configured and after its halvings."""
    items = record.get("items")
    record.update(
        score_s=seconds,
        items_per_s=(items / seconds if items is not None and seconds > 0 else None),
        forward_passes=stats.forward_passes,
        max_tokens=budget.configured,
        max_tokens_final=budget.max_tokens,
        oom_halvings=budget.halvings,
    )
