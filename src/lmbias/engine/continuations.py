"""Log-likelihood of continuations given a context under a causal LM: lm-evaluation-harness's `loglikelihood`
request, for multiple-choice benchmarks (WinoGender's choices, Winogenerated's prompted pronouns).

As lm-eval builds a request (api/model.py `_encode_pair`, huggingface.py `_loglikelihood_tokens`): trailing
whitespace of the context moves to the continuation; the context is tokenised as the tokenizer does by default
(a Llama tokenizer puts its BOS first, GPT-2's nothing, and then the context's first token is not scored: it
cancels); a continuation's tokens are those of the whole text after the context's. Here a context and its
continuations are one group of lmbias.engine.prefix_cache.grouped_sentence_logprobs, so the context is read once for
all of them, and a continuation's log-likelihood is ll(context + continuation) - ll(context): equal to lm-eval's to
float rounding when the context's tokens are a prefix of the whole text's (`prefix_stable` says where they are not).
A context that already starts with the BOS text (a rendered chat template that writes it) gets no second one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lmbias.engine import prefix_cache
from lmbias.engine.batching import EngineStats
from lmbias.engine.scoring import adds_bos


@dataclass(frozen=True)
class ContinuationScore:
    """log p(continuation | context), the continuation's tokens, whether the context's tokens begin the whole
    text's, and whether the text starts with the tokenizer's BOS."""

    logprob: float
    tokens: int
    prefix_stable: bool
    start_token: bool


def split_request(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's _encode_pair: the context's trailing whitespace moves to the continuation."""
    stripped = context.rstrip()
    return stripped, context[len(stripped) :] + continuation


def continuation_logprobs(
    model,
    tokenizer,
    contexts: Sequence[str],
    continuations: Sequence[Sequence[str]],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
) -> list[list[ContinuationScore]]:
    """For each context, the score of each of its continuations (module docstring), in one engine call per
    start-token kind."""
    if len(contexts) != len(continuations):
        raise ValueError(f"continuations: {len(contexts)} contexts but {len(continuations)} lists of continuations")
    if any(not conts for conts in continuations):
        raise ValueError("continuations: every context needs at least one continuation")
    requests = [[split_request(context, c) for c in conts] for context, conts in zip(contexts, continuations)]
    bos_text = tokenizer.bos_token or None
    default_bos = adds_bos(tokenizer)
    kinds: dict[str, list[int]] = {"bos": [], "bias_bench": []}
    for i, pairs in enumerate(requests):
        context = pairs[0][0]
        # the tokenizer's BOS first (its default) unless the context already starts with it; otherwise no start
        # token: the first token's log p (bias_bench's separate start-token term) cancels in the difference
        starts = default_bos and not (bos_text and context.startswith(bos_text))
        kinds["bos" if starts else "bias_bench"].append(i)
    differences: list[list[float]] = [[] for _ in contexts]
    starts_with: list[bool] = [False] * len(contexts)
    for kind, members in kinds.items():
        if not members:
            continue
        texts, groups = [], []
        for i in members:
            context = requests[i][0][0]
            texts.append(context)
            texts += [context + cont for _, cont in requests[i]]
            groups += [i] * (1 + len(requests[i]))
        lls = prefix_cache.grouped_sentence_logprobs(
            model,
            tokenizer,
            texts,
            groups,
            batch_size=batch_size,
            max_length=max_length,
            stats=stats,
            context=kind,
            score_prefix=False,  # the context's own terms cancel in ll(context + continuation) - ll(context)
        )
        at = 0
        for i in members:
            n = len(requests[i])
            differences[i] = [float(lls[at + 1 + k] - lls[at]) for k in range(n)]
            starts_with[i] = kind == "bos"
            at += 1 + n
    out = []
    for i, pairs in enumerate(requests):
        context = pairs[0][0]
        ctx_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        start = starts_with[i] or bool(bos_text and context.startswith(bos_text))
        scores = []
        for (_, cont), logprob in zip(pairs, differences[i]):
            whole = tokenizer(context + cont, add_special_tokens=False)["input_ids"]
            stable = whole[: len(ctx_ids)] == ctx_ids
            scores.append(ContinuationScore(logprob, len(whole) - len(ctx_ids), stable, start))
        out.append(scores)
    return out
