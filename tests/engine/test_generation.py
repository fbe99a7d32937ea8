"""Batched generation (lmbias.engine.generation) on the tiny models: the same texts as a one-prompt-at-a-time
`generate` loop, seeded sampling that reruns to the same texts and does not depend on the batch, the token
budget, and families that do not generate refused by name."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from lmbias.engine import generation
from lmbias.engine.batching import EngineStats, scoring_budget
from lmbias.engine.generation import (
    GenerationSettings,
    SeededSampler,
    generate_continuations,
    request_seed,
)
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError

#: Prompts of different lengths (BOLD's style), so batches are padded.
PROMPTS = [
    "Jacob Zachar is an American actor whose ",
    "She was an actress ",
    "Frank Zagarino is an American actor, star of many films in the ",
    "He ",
    "The actress Mary Smith was born in ",
    "His brother was a director and ",
    "Anna is ",
    "In 1990 the actor moved to Los Angeles, where he ",
]


def _load(path, family):
    return load_model(model_spec("tiny", {"path": str(path), "family": family, "revision": "local"}))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("generation")
    family = {"llama": "clm", "gpt2": "clm", "bart": "seq2seq", "bert": "mlm"}
    return {arch: (*_load(build_tiny_model(arch, root / arch, seed=0), fam), fam) for arch, fam in family.items()}


def _plain_loop(model, tokenizer, prompts, max_new_tokens):
    """The baseline: one `generate` call per prompt, no padding, greedy."""
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt")
        with torch.inference_mode():
            tokens = model.generate(
                **ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
        new = tokens[0, ids["input_ids"].shape[1] :].tolist()
        eos = tokenizer.eos_token_id
        out.append(tokenizer.decode(new[: new.index(eos)] if eos in new else new, skip_special_tokens=True))
    return out


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_batched_greedy_equals_the_plain_loop(tiny, arch):
    model, tokenizer, family = tiny[arch]
    stats = EngineStats()
    got = generate_continuations(model, tokenizer, family, PROMPTS, GenerationSettings(max_new_tokens=12), stats=stats)
    assert [c[0].text for c in got] == _plain_loop(model, tokenizer, PROMPTS, 12)
    assert stats.sequences_run == len(PROMPTS) and stats.forward_passes <= 12  # one batch: the prompts fit the budget
    assert all(c[0].new_tokens == 12 or c[0].finished for c in got)


@pytest.mark.parametrize("arch", ["llama", "bart"])
def test_batched_equals_one_at_a_time_within_a_tiny_budget(tiny, arch, monkeypatch):
    """A budget that holds two or three rows: several batches, sorted by length, scattered back in prompt order
    (a causal batch through lmbias's decode loop, an encoder-decoder one through `generate`)."""
    model, tokenizer, family = tiny[arch]
    settings = GenerationSettings(max_new_tokens=8)
    single = [generate_continuations(model, tokenizer, family, [p], settings)[0] for p in PROMPTS]
    calls = []
    if family == "clm":
        decode = generation.decode_causal
        monkeypatch.setattr(
            generation, "decode_causal", lambda m, ids, *a: calls.append(ids.shape) or decode(m, ids, *a)
        )
    else:
        generate = model.generate
        monkeypatch.setattr(model, "generate", lambda **kw: calls.append(kw["input_ids"].shape) or generate(**kw))
    with scoring_budget(60):
        batched = generate_continuations(model, tokenizer, family, PROMPTS, settings)
    assert batched == single
    assert 3 <= len(calls) < len(PROMPTS) and sum(rows for rows, _ in calls) == len(PROMPTS)
    widths = [width for _, width in calls]
    assert widths == sorted(widths)  # sorted by prompt length


def test_seeded_sampling_reruns_and_does_not_depend_on_the_batch(tiny):
    model, tokenizer, family = tiny["llama"]
    settings = GenerationSettings(
        decoding="sampling", temperature=0.8, top_p=0.9, samples_per_prompt=3, seed=7, max_new_tokens=10
    )
    first = generate_continuations(model, tokenizer, family, PROMPTS, settings)
    assert generate_continuations(model, tokenizer, family, PROMPTS, settings) == first  # a rerun: the same texts
    assert all(len({s.text for s in samples}) > 1 for samples in first)  # the samples of a prompt differ
    other_seed = generate_continuations(
        model, tokenizer, family, PROMPTS, GenerationSettings(**{**vars(settings), "seed": 8})
    )
    assert other_seed != first
    # The prompts in reverse order, each keyed as before, in batches of two: each prompt keeps its texts, exactly
    # in float64; in float32 only up to the rounding of its padded logits, which on the tiny model's near-flat
    # distributions flips a draw now and then (measured: 2 of 24 samples), so the check runs in float64
    exact = copy.deepcopy(model).double()
    first = generate_continuations(exact, tokenizer, family, PROMPTS, settings)
    keys = list(range(len(PROMPTS)))[::-1]
    small = GenerationSettings(**{**vars(settings), "batch_size": 2})
    assert generate_continuations(exact, tokenizer, family, PROMPTS[::-1], small, prompt_keys=keys)[::-1] == first


def _generate_loop_tokens(model, tokenizer, prompts, max_new_tokens, eos, seeds=None):
    """transformers' `generate` on each prompt alone (no padding), greedy or with the seeded sampler as its logits
    processor: the new token ids, cut after the first EOS."""
    out = []
    for i, prompt in enumerate(prompts):
        ids = tokenizer(prompt, return_tensors="pt")
        processors = [] if seeds is None else [SeededSampler([seeds[i]], 1.0, 1.0)]
        with torch.inference_mode():
            tokens = model.generate(
                **ids,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=eos,
                logits_processor=processors,
            )
        new = tokens[0, ids["input_ids"].shape[1] :].tolist()
        out.append(new[: new.index(eos) + 1] if eos in new else new)
    return out


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("sampled", [False, True])
def test_decode_loop_gives_generates_tokens_and_stops_at_an_eos(tiny, arch, sampled):
    """lmbias's causal decode loop on a left-padded batch against `generate` on each prompt alone: the same new
    tokens, greedy and sampled (float64, where padding changes no draw). The EOS is planted: a token one prompt's
    continuation writes from its third token on and not before, so that row must stop right there and get the pad
    id after it, and the others stop wherever they write it too."""
    model, tokenizer, _ = tiny[arch]
    model = copy.deepcopy(model).double()
    seeds = [request_seed(3, k, 0) for k in range(len(PROMPTS))] if sampled else None
    free = _generate_loop_tokens(model, tokenizer, PROMPTS, 10, eos=None, seeds=seeds)
    # a row and a token it writes from its third on and not before: that row must stop right there
    row, stop = next((r, k) for r, toks in enumerate(free) for k in range(2, len(toks)) if toks[k] not in toks[:k])
    eos = free[row][stop]
    expected = _generate_loop_tokens(model, tokenizer, PROMPTS, 10, eos=eos, seeds=seeds)
    ids, attention = generation._padded([tokenizer(p)["input_ids"] for p in PROMPTS], -1, True, "cpu")
    ids = ids.masked_fill(attention == 0, tokenizer.pad_token_id)
    sampler = SeededSampler(seeds, 1.0, 1.0) if sampled else None
    with torch.inference_mode():
        got = generation.decode_causal(model, ids, attention, 10, [eos], tokenizer.pad_token_id, sampler).tolist()
    assert len(expected[row]) == stop + 1 and got[row][: stop + 1] == expected[row]
    assert all(t == tokenizer.pad_token_id for t in got[row][stop + 1 :])  # after its EOS a row gets the pad id
    for tokens, want in zip(got, expected):
        assert tokens[: len(want)] == want
    assert len(got[0]) == max(len(w) for w in expected)  # the loop ends when every row is done (or at 10)


def test_sampler_draws_per_row_whatever_the_batch():
    """The logits processor alone: a row's draw depends on its seed and its logits only, and top_p keeps the
    smallest set of most likely tokens reaching top_p (here the top two of 0.5, 0.3, 0.2)."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]]))
    seeds = [request_seed(0, k, 0) for k in range(2)]
    batch = SeededSampler(seeds, 1.0, 0.8)(None, logits)
    alone = [SeededSampler([s], 1.0, 0.8)(None, logits[i : i + 1]) for i, s in enumerate(seeds)]
    assert torch.equal(batch, torch.cat(alone))
    assert (batch == 0).sum(dim=1).tolist() == [1, 1] and torch.isinf(batch).sum().item() == 4
    draws = [int(SeededSampler([request_seed(0, k, 0)], 1.0, 0.8)(None, logits[:1]).argmax()) for k in range(300)]
    assert set(draws) == {0, 1}  # 0.2 is outside the nucleus
    assert 0.55 < draws.count(0) / 300 < 0.70  # 0.5 / 0.8 = 0.625
    greedy_like = SeededSampler(seeds, 1e-4, 1.0)(None, logits)  # a tiny temperature: the argmax
    assert greedy_like.argmax(dim=1).tolist() == [0, 2]


def test_sampler_without_a_nucleus_draws_the_distribution_per_row():
    """top_p 1 (no sort: the cumulative distribution in vocabulary order): each row's draws follow its own
    probabilities, whatever the batch, and a token of probability 0 is never drawn."""
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    logits = torch.log(probs)
    seeds = [request_seed(1, k, 0) for k in range(2)]
    batch = SeededSampler(seeds, 1.0, 1.0)(None, logits)
    alone = [SeededSampler([s], 1.0, 1.0)(None, logits[i : i + 1]) for i, s in enumerate(seeds)]
    assert torch.equal(batch, torch.cat(alone)) and (batch == 0).sum(dim=1).tolist() == [1, 1]
    n = 2000
    sampler = SeededSampler([request_seed(2, k, 0) for k in range(n)], 1.0, 1.0)
    draws = sampler(None, logits[:1].expand(n, -1)).argmax(dim=1)
    counts = torch.bincount(draws, minlength=4).double() / n
    assert counts[1] == 0
    assert torch.allclose(counts, probs[0].double(), atol=0.035), counts  # 3.5 points: > 3 standard errors


def test_request_seed_is_fixed():
    assert request_seed(0, 0, 0) == request_seed(0, 0, 0) != request_seed(0, 0, 1) != request_seed(1, 0, 0)
    assert 0 <= request_seed(3, 2, 1) < 2**63


def test_masked_and_encoder_models_are_refused_by_name(tiny):
    model, tokenizer, family = tiny["bert"]
    with pytest.raises(ConfigError, match="family 'mlm' does not generate"):
        generate_continuations(model, tokenizer, family, PROMPTS, GenerationSettings())
    with pytest.raises(ConfigError, match="family 'encoder'"):
        generate_continuations(model, tokenizer, "encoder", PROMPTS, GenerationSettings())


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"decoding": "beam"}, "decoding: 'beam'"),
        ({"max_new_tokens": 0}, "max_new_tokens: 0"),
        ({"temperature": 0}, "temperature: 0"),
        ({"top_p": 1.5}, "top_p: 1.5"),
        ({"top_p": math.nan}, "top_p: nan"),
        ({"samples_per_prompt": 2}, "samples of greedy decoding"),
        ({"beams": 4}, "beams: unknown key"),
    ],
)
def test_bad_settings_name_their_key(block, message):
    with pytest.raises(ConfigError, match=message) as error:
        GenerationSettings.from_config(block, "benchmarks.bold.scoring")
    assert str(error.value).startswith("benchmarks.bold.scoring")


def test_the_samples_of_a_prompt_read_it_once(tiny, monkeypatch):
    """A batch of several samples of each prompt reads each prompt once (its first pass has a row per prompt,
    then one per sample), and gives the texts of one request per batch, where nothing is shared (float64)."""
    model, tokenizer, family = tiny["llama"]
    exact = copy.deepcopy(model).double()
    settings = GenerationSettings(decoding="sampling", samples_per_prompt=4, seed=5, max_new_tokens=6)
    alone = generate_continuations(
        exact, tokenizer, family, PROMPTS, GenerationSettings(**{**vars(settings), "batch_size": 1})
    )
    rows_read = []
    forward = exact.forward

    def counting(*args, **kwargs):
        rows_read.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    monkeypatch.setattr(exact, "forward", counting)
    shared = generate_continuations(exact, tokenizer, family, PROMPTS, settings)
    assert rows_read[0] == len(PROMPTS) and rows_read[1] == 4 * len(PROMPTS)
    assert shared == alone
    assert all(len({s.text for s in samples}) > 1 for samples in shared)
