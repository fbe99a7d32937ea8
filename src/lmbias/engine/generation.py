"""Open-ended generation, batched: BOLD, HONEST, BBQ's generated answers, the counterfactual pairs.

How a call runs (``generate_continuations``):

* every (prompt, sample) pair is one request; requests are sorted by prompt length and cut into batches within
  the job's token budget (``max_tokens``, lmbias.engine.batching: a causal batch holds rows x (longest prompt +
  max_new_tokens) tokens, the KV cache's size at the last step; an encoder-decoder batch rows x (longest prompt +
  max_new_tokens + 1)), at most ``batch_size`` rows; out of CUDA memory a batch is halved as for scoring;
* causal prompts are left-padded (the new tokens then line up at the right edge) and decoded by lmbias's own
  loop (``decode_causal``): one forward pass per new token with the KV cache, the logits of the last position
  only, the next token chosen from them directly; encoder-decoder prompts are right-padded into the encoder and
  decoded by transformers' `generate` (BART's forced BOS/EOS and decoder start are its own); both under the
  job's autocast;
* results are scattered back to request order. A continuation is the text of the new tokens up to the first
  EOS (the model's generation config's EOS ids, e.g. an instruct model's end-of-turn token), special tokens
  skipped; `finished` says whether an EOS ended it before max_new_tokens.

Decoding is the benchmark config's, never the checkpoint's generation_config sampling defaults: `greedy`
(argmax), or `sampling` with `temperature` and nucleus `top_p`. Only what belongs to the model is carried over
from its generation config: EOS ids, BOS, the decoder start token and BART's forced BOS/EOS.

Why a loop of our own for causal models: at a batch of 64 rows on a small model, transformers' `generate` spends a
fifth of each step on work the engine does not need (a float32 copy of every row's vocabulary-sized logits, and
with sampling the one-hot score and its argmax), bench/honest_generation.py. ``decode_causal`` feeds the model
what `generate` feeds it (the position ids of left-padded rows counted from each row's first real token, the
attention mask grown by one column per step, ``logits_to_keep=1``), so its texts are `generate`'s: the benches
check every text against a `generate` loop.

Reproducible sampling: each request draws from its own torch.Generator, seeded from (seed, prompt key, sample
index) (``request_seed``), through ``SeededSampler``, which draws the token itself (``SeededSampler.draw``; as a
transformers logits processor it hands `generate` a one-hot score, so a greedy `generate` emits the drawn token:
the encoder-decoder path and a user's own `generate` loop). A request's draws therefore do not depend on
which other requests share its batch, on their order or on the batch size: sampling is batch-invariant, as far
as the logits are (padding a row changes its logits by float rounding only, which can flip a draw that lands
within rounding of a boundary, as it can flip a greedy near-tie). A rerun with the same seed generates the same
texts.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass

from lmbias import progress
from lmbias.engine.batching import EngineStats, autocast, forward_takes, model_device, run_batches
from lmbias.errors import ConfigError
from lmbias.lazy import lazy_module
from lmbias.options import check_block

torch = lazy_module("torch")  # imported on first use: DAG builds never need it

#: Families that generate text: causal LMs continue the prompt, encoder-decoders write from it.
GENERATIVE_FAMILIES = ("clm", "seq2seq")
#: The schema's generation keys (schemas/config.schema.yaml), closed: a block of these keys alone.
SCHEMA_KEY = "$defs.generation_block"


@dataclass(frozen=True)
class GenerationSettings:
    """How texts are generated (a benchmark's `scoring` block); `key` in errors is that block's config key."""

    decoding: str = "greedy"
    max_new_tokens: int = 50
    temperature: float = 1.0
    top_p: float = 1.0
    samples_per_prompt: int = 1
    seed: int = 0
    batch_size: int = 64

    @classmethod
    def from_config(cls, block: dict | None, key: str) -> GenerationSettings:
        """The settings of a block of generation keys alone (types, ranges and unknown keys: the schema's
        $defs.generation_block); ConfigError naming `key`'s offending key."""
        check_block(block, SCHEMA_KEY, key)
        settings = cls(**(block or {}))
        if settings.decoding == "greedy" and settings.samples_per_prompt > 1:  # what the schema cannot say
            raise ConfigError(
                f"{key}.samples_per_prompt: {settings.samples_per_prompt} samples of greedy decoding are all the "
                "same text; set decoding: sampling (or samples_per_prompt: 1)"
            )
        return settings

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Continuation:
    text: str  # the new tokens decoded, up to the first EOS, special tokens skipped
    new_tokens: int  # tokens generated before the EOS (or max_new_tokens)
    finished: bool  # an EOS ended it


def request_seed(seed: int, prompt_key: int, sample: int) -> int:
    """The torch seed of one (prompt, sample) request: 63 bits of sha256 over the three numbers, so requests
    draw independent streams and a request's stream never depends on the others."""
    digest = hashlib.sha256(f"{seed}:{prompt_key}:{sample}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class SeededSampler:
    """A transformers logits processor that samples each row's next token from its own generator (temperature,
    then nucleus top_p: the smallest set of most likely tokens whose probability reaches top_p) and returns a
    one-hot score (0 at the drawn token, -inf elsewhere), so greedy `generate` emits the drawn token. Each row
    draws one uniform number per step and takes the token where it falls in the cumulative distribution: in
    probability order under a nucleus, in vocabulary order without one (top_p 1: the same distribution, no sort)."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float):
        self.generators = [torch.Generator(device="cpu").manual_seed(s) for s in seeds]
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids, scores):
        """The logits processor: a one-hot score of each row's drawn token (0 there, -inf elsewhere)."""
        chosen = self.draw(scores).unsqueeze(1)
        return torch.full_like(scores, -math.inf).scatter_(1, chosen, 0.0)

    def draw(self, scores):
        """Each row's next token (a LongTensor of the batch size), drawn from softmax(scores / temperature) under
        the nucleus; one uniform number per row and step from the row's own generator."""
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        draws = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in self.generators])
        if self.top_p >= 1.0:
            # no nucleus to cut: the inverse of the cumulative distribution in vocabulary order draws from the same
            # distribution as in probability order, without sorting the vocabulary at every step (most of a
            # sampled batch's time on a small model: bench/honest_generation.py)
            cumulative = probs.double().cumsum(dim=-1)
            target = (draws.to(cumulative.device) * cumulative[:, -1]).unsqueeze(1)
            chosen = torch.searchsorted(cumulative.contiguous(), target, right=True).clamp(max=probs.shape[-1] - 1)
            return chosen.squeeze(1)
        ordered, index = torch.sort(probs, dim=-1, descending=True, stable=True)
        before = ordered.cumsum(dim=-1) - ordered  # mass of the tokens ranked above each one
        ordered = ordered.masked_fill(before >= self.top_p, 0.0)  # the top token always stays (before = 0)
        cumulative = ordered.cumsum(dim=-1)
        target = (draws.to(cumulative.device) * cumulative[:, -1].double()).unsqueeze(1)
        rank = torch.searchsorted(cumulative.double().contiguous(), target, right=True)
        rank = rank.clamp(max=ordered.shape[-1] - 1)
        return index.gather(1, rank).squeeze(1)


def _eos_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


def _generation_config(model, tokenizer, settings: GenerationSettings, pad_id: int, eos: list[int]):
    """Greedy decoding over the sampler's scores, with the model's own start/stop tokens and nothing else of
    its generation config (no repetition penalty, beams or sampling defaults a checkpoint may ship)."""
    from transformers import GenerationConfig

    own = getattr(model, "generation_config", None)
    carried = {
        name: getattr(own, name, None)
        for name in ("bos_token_id", "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id")
    }
    return GenerationConfig(
        max_new_tokens=settings.max_new_tokens,
        do_sample=False,
        num_beams=1,
        use_cache=True,
        pad_token_id=pad_id,
        eos_token_id=eos or None,
        **{k: v for k, v in carried.items() if v is not None},
    )


def _padded(seqs: list[list[int]], pad_id: int, left: bool, device):
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        cols = slice(width - len(seq), width) if left else slice(0, len(seq))
        ids[row, cols] = torch.tensor(seq, dtype=torch.long)
        mask[row, cols] = 1
    return ids.to(device), mask.to(device)


def decode_causal(model, ids, attention, max_new_tokens: int, eos: list[int], pad_id: int, sampler=None, rows=None):
    """The new tokens (batch x steps, steps <= max_new_tokens) of a left-padded causal batch: greedy (argmax of
    the last position's logits) or `sampler.draw`, one forward pass per token with the KV cache. A row that has
    emitted an EOS gets `pad_id` from then on, and the loop stops when every row has (as `generate` does). The
    model sees what `generate` gives it: position ids counted from each row's first real token (padding at 0),
    the attention mask grown by a column of ones per step, and only the last position's logits.

    `rows` (a LongTensor): the batch's rows are continuations of the prompts `ids` holds, row j of prompt
    `rows[j]` (the samples of one prompt): each prompt is read once, and its keys and values, its last logits,
    its mask and positions are copied to its rows before the first token is drawn (the cache's own
    `reorder_cache`, as beam search copies a beam)."""
    positions = (attention.long().cumsum(-1) - 1).masked_fill(attention == 0, 0)
    use_positions = forward_takes(model, "position_ids")
    keep = {"logits_to_keep": 1} if forward_takes(model, "logits_to_keep") else {}
    eos_ids = torch.tensor(eos, dtype=torch.long, device=ids.device) if eos else None
    batch = ids.shape[0] if rows is None else len(rows)
    done = torch.zeros(batch, dtype=torch.bool, device=ids.device)
    writing = batch  # rows that have not emitted an EOS: each writes a token per step
    step_ids, mask, past, new = ids, attention, None, []
    for step in range(max_new_tokens):
        inputs = {"position_ids": positions} if use_positions else {}
        out = model(input_ids=step_ids, attention_mask=mask, past_key_values=past, use_cache=True, **inputs, **keep)
        logits, past = out.logits[:, -1, :], out.past_key_values
        if step == 0 and rows is not None:  # each prompt read once: its state copied to its rows
            rows = rows.to(ids.device)
            past.reorder_cache(rows)
            logits, mask, positions = logits[rows], mask[rows], positions[rows]
        chosen = sampler.draw(logits) if sampler is not None else torch.argmax(logits, dim=-1)
        chosen = chosen.masked_fill(done, pad_id)
        new.append(chosen)
        progress.generated(writing)  # the job's tokens/s (lmbias.progress; nothing outside a job)
        if eos_ids is not None:
            done = done | torch.isin(chosen, eos_ids)
            writing = int((~done).sum())  # the one read from the device per step, as `done.all()` was
            if writing == 0:
                break
        step_ids = chosen.unsqueeze(1)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        positions = positions[:, -1:] + 1
    return torch.stack(new, dim=1) if new else ids.new_zeros((ids.shape[0], 0))


def check_generative(family: str, what: str = "generation") -> None:
    if family not in GENERATIVE_FAMILIES:
        raise ConfigError(
            f"{what}: a model of family {family!r} does not generate text (a masked LM or a headless encoder has "
            f"no left-to-right decoder); generation applies to {', '.join(GENERATIVE_FAMILIES)}"
        )


def generate_continuations(
    model,
    tokenizer,
    family: str,
    prompts: list[str],
    settings: GenerationSettings,
    prompt_keys: list[int] | None = None,
    stats: EngineStats | None = None,
    max_tokens: int | None = None,
    add_special_tokens: bool = True,
) -> list[list[Continuation]]:
    """settings.samples_per_prompt continuations of every prompt, in prompt order. `prompt_keys` (default: the
    prompts' positions) seed each prompt's samples, so a prompt keeps its texts when others are added or left out.
    `add_special_tokens`: False for prompts that already hold them (a rendered chat template)."""
    check_generative(family)
    keys = list(range(len(prompts))) if prompt_keys is None else list(prompt_keys)
    if len(keys) != len(prompts):
        raise ValueError("generate_continuations: one prompt key per prompt")
    stats = stats if stats is not None else EngineStats()
    device = model_device(model)
    causal = family == "clm"
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (_eos_ids(model, tokenizer) or [0])[0]
    eos = _eos_ids(model, tokenizer)
    config = None if causal else _generation_config(model, tokenizer, settings, pad_id, eos)
    encoded = [tokenizer(p, add_special_tokens=add_special_tokens)["input_ids"] for p in prompts]
    requests = [(i, k) for i in range(len(prompts)) for k in range(settings.samples_per_prompt)]
    stats.requests += len(requests)
    stats.unique_inputs += len(set(map(tuple, encoded)))
    new = settings.max_new_tokens
    lengths = [len(encoded[i]) + new if causal else (len(encoded[i]), new + 1) for i, _ in requests]
    order = sorted(range(len(requests)), key=lambda r: (len(encoded[requests[r][0]]), r))
    results: list[Continuation | None] = [None] * len(requests)

    def run(batch: list[int]) -> None:
        prompts_of = [requests[r][0] for r in batch]
        read = list(dict.fromkeys(prompts_of)) if causal else prompts_of  # a causal prompt read once per batch
        rows = None
        if len(read) < len(batch):
            where = {i: j for j, i in enumerate(read)}
            rows = torch.tensor([where[i] for i in prompts_of], dtype=torch.long)
        ids, attention = _padded([encoded[i] for i in read], pad_id, causal, device)
        sampler = None
        if settings.decoding == "sampling":
            seeds = [request_seed(settings.seed, keys[requests[r][0]], requests[r][1]) for r in batch]
            sampler = SeededSampler(seeds, settings.temperature, settings.top_p)
        with torch.inference_mode(), autocast(device):
            if causal:
                generated = decode_causal(model, ids, attention, new, eos, pad_id, sampler, rows)
            else:
                from transformers import LogitsProcessorList

                out = model.generate(
                    input_ids=ids,
                    attention_mask=attention,
                    generation_config=config,
                    logits_processor=LogitsProcessorList([sampler] if sampler is not None else []),
                )
                generated = out[:, 1:]  # after the decoder start token
        stats.forward_passes += int(generated.shape[1])
        stats.sequences_run += len(batch)
        written = 0  # each row's tokens up to its EOS, the EOS included (decode_causal counts them per step)
        for row, r in enumerate(batch):
            tokens = generated[row].tolist()
            stop = next((n for n, t in enumerate(tokens) if t in eos), None)
            kept = tokens if stop is None else tokens[:stop]
            text = tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            results[r] = Continuation(text, len(kept), stop is not None)
            written += len(kept) + (stop is not None)
        if not causal:
            progress.generated(written)

    run_batches(order, lengths, settings.batch_size, run, max_tokens, stats, what="generation")
    grouped: list[list[Continuation]] = [[] for _ in prompts]
    for (i, _), result in zip(requests, results):
        grouped[i].append(result)
    return grouped
