"""How the engine runs its forward passes: token budget, batches, padding, autocast precision, input device.

Every scorer of lmbias.engine.scoring, the sentence embeddings (lmbias.engine.embeddings) and perplexity
(lmbias.benchmarks.perplexity) run their inputs through here:

* unique inputs, sorted by length, are cut into batches within a token budget (``max_tokens`` padded tokens
  per forward pass, a model's ``max_tokens`` in config.yaml; ``batch_size`` caps the rows), so padding stays
  small and a long input shares its pass with fewer others; out of CUDA memory, a batch is halved and the job
  goes on (``run_batches``);
* a batch is right-padded (``pad``) onto the device the model takes its inputs on (``model_device``: a model
  dispatched over devices takes them on its first module's);
* the forward passes run under bfloat16 autocast on GPU by default (``scoring_precision``, ``autocast``: a
  model's ``precision`` in config.yaml);
* ``EngineStats`` counts what a call cost.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lmbias import progress
from lmbias.errors import ConfigError, ScoringOutOfMemoryError, TokenBudgetError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use: DAG builds and metric jobs never need it

log = logging.getLogger(__name__)


@dataclass
class EngineStats:
    """What a scoring call cost: requests asked, distinct inputs, forward passes (batches) issued, halvings."""

    requests: int = 0
    unique_inputs: int = 0
    forward_passes: int = 0
    sequences_run: int = 0
    oom_halvings: int = 0  # batches halved after running out of CUDA memory (run_batches)


#: auto: bfloat16 autocast on CUDA, float32 elsewhere; fp32: never autocast; bf16 / fp16: autocast on any device.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_AUTOCAST_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}  # torch dtype names (torch loads on first use)
_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("lmbias_scoring_precision", default="auto")


@contextlib.contextmanager
def scoring_precision(precision: str, key: str = "precision"):
    """Run the engine's forward passes at `precision` inside this block (the scoring jobs set a model's
    `precision`). float32 reproduces published numbers most closely; bfloat16 is about twice as fast on a
    GPU and can flip decisions that hinge on tiny probability differences (ties, cut-offs)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"{key}: {precision!r} is not one of {', '.join(PRECISIONS)}")
    token = _PRECISION.set(precision)
    try:
        yield
    finally:
        _PRECISION.reset(token)


def autocast(device: torch.device):
    precision = _PRECISION.get()
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=getattr(torch, _AUTOCAST_DTYPE[precision]))


#: Padded tokens (rows x padded length) one forward pass may hold when nothing sets a budget: 64 rows of 128
#: tokens, the engine's former row default at the benchmarks' usual max_length (a causal LM's logits for 8192
#: tokens of a 32,000-word vocabulary: 1 GB in float32). A job sets a model's `max_tokens` (scoring_budget).
DEFAULT_MAX_TOKENS = 8192


class TokenBudget:
    """The padded tokens a forward pass may hold, shared by every engine call of a job: halved for the rest of
    the job when a batch runs out of CUDA memory (run_batches). `key` is the config key that set it, named in
    its errors."""

    def __init__(self, max_tokens: int, key: str = "max_tokens"):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"{key}: {max_tokens!r} must be a positive integer (padded tokens per forward pass)")
        self.configured = max_tokens
        self.max_tokens = max_tokens
        self.key = key
        self.halvings = 0

    def __repr__(self) -> str:
        return f"TokenBudget({self.max_tokens}, key={self.key!r}, halvings={self.halvings})"


_BUDGET: contextvars.ContextVar[TokenBudget | None] = contextvars.ContextVar("lmbias_token_budget", default=None)


@contextlib.contextmanager
def scoring_budget(max_tokens: int | None, key: str = "max_tokens"):
    """Every engine call inside this block batches within `max_tokens` padded tokens per forward pass (None:
    DEFAULT_MAX_TOKENS), one budget for the block: a halving after an out-of-memory error holds for the calls
    that follow. Yields the TokenBudget (its `halvings` and final `max_tokens` go to the job's timing file)."""
    budget = TokenBudget(DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens, key)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _budget(max_tokens: int | None) -> TokenBudget:
    """An explicit `max_tokens` argument, else the enclosing scoring_budget's, else the default."""
    if max_tokens is not None:
        return TokenBudget(max_tokens)
    return _BUDGET.get() or TokenBudget(DEFAULT_MAX_TOKENS)


#: A pass of a causal scoring path (whole sentences, shared prefixes, continuations) is padded by at most this
#: share of its own tokens: inputs sorted by length are cut where a longer one would pad the batch more (a
#: sample's long tail otherwise pads a whole batch; CrowS-Pairs' 524 sentences in passes of 64: 11 % padding
#: uncut, 6 % cut).
PADDING_SLACK = 0.125


def low_padding_runs(order: list[int], lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """`order` (sorted by `lengths`) cut into runs that ``run_batches`` batches (at most `batch_size` rows) with
    at most PADDING_SLACK padding: a run ends where the next input would pad its batch (rows x longest) beyond
    (1 + PADDING_SLACK) x the batch's own tokens."""
    runs: list[list[int]] = [[]]
    rows = longest = tokens = 0
    for i in order:
        n = lengths[i]
        if rows == batch_size:  # run_batches starts a new batch here anyway
            rows = longest = tokens = 0
        elif rows and max(longest, n) * (rows + 1) > (1 + PADDING_SLACK) * (tokens + n):
            runs.append([])
            rows = longest = tokens = 0
        runs[-1].append(i)
        rows, longest, tokens = rows + 1, max(longest, n), tokens + n
    return [run for run in runs if run]


def _width(batch: list[int], lengths: list) -> int:
    """Padded length of a batch: the longest input; for (encoder, decoder) pairs, the longest of each, summed."""
    first = lengths[batch[0]]
    if isinstance(first, tuple):
        return sum(max(lengths[i][k] for i in batch) for k in range(len(first)))
    return max(lengths[i] for i in batch)


def _take(order: list[int], start: int, lengths: list, batch_size: int, max_tokens: int) -> list[int]:
    """The next batch of `order` from `start`: at least one input, at most batch_size, at most max_tokens padded."""
    batch = [order[start]]
    widest = lengths[order[start]]
    paired = isinstance(widest, tuple)
    for idx in order[start + 1 :]:
        if len(batch) >= batch_size:
            break
        wider = tuple(map(max, widest, lengths[idx])) if paired else max(widest, lengths[idx])
        if (sum(wider) if paired else wider) * (len(batch) + 1) > max_tokens:
            break
        batch.append(idx)
        widest = wider
    return batch


def _oom_errors() -> tuple[type, ...]:
    """CUDA's out-of-memory error (torch.OutOfMemoryError since torch 2.5; torch.cuda's name before)."""
    return tuple({getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError})


def run_batches(
    order: list[int],
    lengths: list,
    batch_size: int,
    run: Callable[[list[int]], None],
    max_tokens: int | None = None,
    stats: EngineStats | None = None,
    what: str = "scoring",
) -> None:
    """Call `run(batch)` for consecutive slices of `order` (sorted by length): each at most batch_size inputs
    and at most the token budget's padded tokens (rows x longest input; `lengths` may hold (encoder, decoder)
    pairs), one input alone when it fills the budget by itself.

    Out of CUDA memory, the failed batch's half becomes the budget for the rest of the job, logged as a
    warning, and the batch runs again in smaller pieces: `run` must store its results only once the batch has
    gone through. An input longer than the configured budget is a TokenBudgetError naming its key; a single
    input that runs out of memory alone a ScoringOutOfMemoryError. Every forward pass of the engine comes from
    here, so this is where a job's progress bar (lmbias.progress.job_progress) learns of inputs run."""
    budget = _budget(max_tokens)
    if order:
        longest = max(order, key=lambda i: _width([i], lengths))
        width = _width([longest], lengths)
        if width > budget.configured:
            raise TokenBudgetError(
                f"{budget.key}: {what}: an input of {width} tokens is longer than the budget of "
                f"{budget.configured} padded tokens per forward pass; raise {budget.key} to at "
                f"least {width} (or shorten the inputs: the benchmark's scoring.max_length)"
            )
    progress.expect(len(order))
    start = 0
    while start < len(order):
        batch = _take(order, start, lengths, batch_size, budget.max_tokens)
        failed = None
        try:
            run(batch)
        except _oom_errors() as err:
            failed = (len(batch), _width(batch, lengths), str(err).splitlines()[0] if str(err) else "")
        if failed is None:
            start += len(batch)
            progress.advance(len(batch))
            continue
        rows, width, message = failed
        if rows == 1:
            raise ScoringOutOfMemoryError(
                f"{what}: out of CUDA memory on a single input of {width} tokens ({budget.key} now "
                f"{budget.max_tokens}, "
                f"after {budget.halvings} halving(s)); it needs a larger GPU, lower-precision weights (dtype) or "
                f"shorter inputs. CUDA said: {message}"
            )
        budget.max_tokens = ((rows + 1) // 2) * width
        budget.halvings += 1
        if stats is not None:
            stats.oom_halvings += 1
        log.warning(
            "%s: out of CUDA memory on a batch of %d x %d tokens; halved: %s now %d padded tokens per "
            "forward pass (halving %d)",
            what,
            rows,
            width,
            budget.key,
            budget.max_tokens,
            budget.halvings,
        )
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def pad(seqs: list[list[int]], pad_id: int, device, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask, `width` columns (default: the longest sequence)."""
    width = max(len(s) for s in seqs) if width is None else width
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids.to(device), mask.to(device)


def model_device(model) -> torch.device:
    """Where the engine puts a model's inputs: its parameters' device, or for a model dispatched over devices
    (models.<name>.device_map) the device its first module runs on (input_device)."""
    inner = getattr(model, "inner", model)  # behind Self-Debias' wrapper
    device_map = getattr(inner, "hf_device_map", None)
    if device_map:
        return torch.device(input_device(device_map))
    return next(model.parameters()).device


def forward_takes(model, name: str) -> bool:
    """Whether the model's forward takes the keyword `name` (``logits_to_keep``, ``position_ids``). A PEFT model (an
    unmerged adapter) hands its keyword arguments on to the model it wraps, so that model is asked."""
    get_base = getattr(model, "get_base_model", None)
    forward = (get_base() if callable(get_base) else model).forward
    try:
        return name in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return False


def input_device(device_map: dict) -> str:
    """The device a model dispatched by Accelerate (`hf_device_map`) takes its inputs on: its first module's,
    or, when that module is offloaded (cpu, disk), Accelerate's main device (the first accelerator in the map;
    cpu when there is none), where offloaded modules run."""

    def name(device):
        return f"cuda:{device}" if isinstance(device, int) else str(device)

    devices = [name(d) for d in device_map.values()]
    if devices[0] not in ("cpu", "disk"):
        return devices[0]
    return next((d for d in devices if d not in ("cpu", "disk")), "cpu")
