"""Per-example noise and loss targets of each objective, and the ER term.

Noise for example `i` of epoch `e` comes from its own generator seeded by (seed, e, i)
(`example_generator`), so a batch's masks do not depend on which process, batch or resume point
draws them: a resumed or data-parallel run sees exactly the noise of an uninterrupted one.

- mlm (Devlin et al.): each non-special token (or, with whole-word masking, each word) is chosen with
  probability p = 0.15; a chosen token becomes [MASK] 80 %, a random token 10 %, itself 10 %; loss on chosen tokens.
- clm: labels are the inputs (the model shifts them); loss on every real token.
- infilling (Lewis et al. 2020, BART text infilling): spans with Poisson(3) lengths are drawn until 30 %
  of the tokens are covered; each span becomes ONE <mask> (a 0-length span inserts a <mask>); the
  decoder reconstructs the original sentence.
- gpr (Manela et al.): [PRONOUN] -> the mask token; loss only at that position, target the pronoun's token.

Options reproducing the DA-Gender authors' scripts (settings.TrainingSettings documents each):
- infilling_mode static_words (bart_CDS.py / bart_ER.py `noise_sentence`): ceil(ratio * n) of the n
  space-separated words, drawn without replacement from all but the last word, become <mask> (a word that is
  exactly "." is drawn but kept); each run of adjacent masks is one <mask>. Drawn once per example from a
  generator seeded by (seed, example), so every epoch sees the same noised input (theirs: once, unseeded).
- infilling_layout bos_decoder: their sequences: encoder x </s> (no <s>), decoder input <s> x, labels x </s>.
- padding_in_loss (clm, infilling): rows padded to pad_to_length with the pad token, and the pad positions
  are targets too (their labels are the padded input ids; HF's loss ignores only -100).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

IGNORE = -100


def example_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    state = np.random.SeedSequence([seed, epoch, index]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


@dataclass
class Encoded:
    """One tokenised example (with special tokens). `special` marks tokens never masked; `words` the word
    index of every token (None for specials); `target` (gpr) the pronoun's token id at `target_pos`."""

    ids: list[int]
    special: list[int]
    words: list | None = None
    target: int | None = None
    target_pos: int | None = None
    noised: list[int] | None = None  # infilling static_words: the encoder ids, fixed for all epochs


def mask_mlm(
    ex: Encoded,
    gen: torch.Generator,
    mask_id: int,
    vocab_size: int,
    probability: float = 0.15,
    whole_word: bool = False,
) -> tuple[list[int], list[int]]:
    """(input ids, labels) of the 80/10/10 masked-LM noise for one example."""
    ids = torch.tensor(ex.ids)
    special = torch.tensor(ex.special, dtype=torch.bool)
    n = len(ex.ids)
    if whole_word and ex.words is not None:
        word_of = [w if (w is not None and not s) else -1 for w, s in zip(ex.words, ex.special)]
        n_words = max(word_of) + 1 if word_of else 0
        chosen_words = torch.rand(n_words, generator=gen) < probability
        chosen = torch.tensor([bool(chosen_words[w]) if w >= 0 else False for w in word_of], dtype=torch.bool)
    else:
        chosen = (torch.rand(n, generator=gen) < probability) & ~special
    draw = torch.rand(n, generator=gen)
    random_tokens = torch.randint(vocab_size, (n,), generator=gen)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    out = ids.clone()
    out[chosen & (draw < 0.8)] = mask_id
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    out[swap] = random_tokens[swap]
    return out.tolist(), labels.tolist()


def infill(
    ex: Encoded, gen: torch.Generator, mask_id: int, ratio: float = 0.3, poisson_lambda: float = 3.0
) -> tuple[list[int], list[int], list[int]]:
    """(noised encoder ids, decoder labels = the original ids, the span lengths drawn) for BART infilling."""
    ids = ex.ids
    real = [i for i, s in enumerate(ex.special) if not s]
    target = int(round(ratio * len(real)))
    masked = [False] * len(ids)
    inserts: set[int] = set()
    lengths: list[int] = []
    covered = 0
    rate = torch.tensor([poisson_lambda])
    while covered < target and real:
        length = int(torch.poisson(rate, generator=gen).item())
        start = real[int(torch.randint(len(real), (1,), generator=gen))]
        lengths.append(length)
        if length == 0:
            inserts.add(start)
            continue
        for pos in range(start, len(ids)):
            if covered >= target or length == 0:
                break
            if ex.special[pos]:
                break
            if not masked[pos]:
                masked[pos] = True
                covered += 1
            length -= 1
    noised: list[int] = []
    for pos, tok in enumerate(ids):
        if pos in inserts and not masked[pos] and not (pos > 0 and masked[pos - 1]):
            noised.append(mask_id)
        if masked[pos]:
            if not (pos > 0 and masked[pos - 1]):
                noised.append(mask_id)
        else:
            noised.append(tok)
    return noised, list(ids), lengths


def draw_masked_words(n: int, gen: torch.Generator, ratio: float = 0.3) -> set[int]:
    """ceil(ratio * n) distinct word positions drawn from all but the last of n words (DA-Gender's
    `random.sample(range(max(1, n - 1)), ceil(n * ratio))`, here from a seeded generator)."""
    candidates = max(1, n - 1)
    k = min(math.ceil(n * ratio), candidates)
    return set(torch.randperm(candidates, generator=gen)[:k].tolist())


def mask_words(text: str, gen: torch.Generator, ratio: float = 0.3, mask_token: str = "<mask>") -> str:
    """DA-Gender's word infilling noise for one sentence (see the module docstring). Words are split on
    whitespace and joined by one space; every run of masked words is ONE <mask> (their two regex passes
    leave ceil(k / 4) masks for a run of k >= 5 words, short of what their comment intends)."""
    words = text.split()
    chosen = draw_masked_words(len(words), gen, ratio)
    out: list[str] = []
    previous_masked = False
    for pos, word in enumerate(words):
        masked = pos in chosen and word != "."
        if not masked:
            out.append(word)
        elif not previous_masked:
            out.append(mask_token)
        previous_masked = masked
    return " ".join(out)


def pad(rows: list[list[int]], value: int, width: int | None = None) -> torch.Tensor:
    """Right-pad to the longest row (dynamic padding), or to `width` if that is longer."""
    width = max([len(r) for r in rows] + [width or 0])
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def collate(
    objective: str,
    examples: list[Encoded],
    indices: list[int],
    seed: int,
    epoch: int,
    tokenizer,
    settings,
    decoder_start_token_id: int | None = None,
) -> dict[str, torch.Tensor]:
    """A padded batch for `objective`: input_ids, attention_mask, labels (+ decoder_input_ids for infilling;
    + decoder_attention_mask when pad positions are targets, as DA-Gender's bart scripts pass it)."""
    pad_id = tokenizer.pad_token_id
    width = settings.pad_to_length
    pads_in_loss = settings.padding_in_loss and objective in ("clm", "infilling")
    bos_decoder = objective == "infilling" and settings.infilling_layout == "bos_decoder"
    inputs, labels, decoder = [], [], []
    for ex, i in zip(examples, indices):
        if objective == "mlm":
            x, y = mask_mlm(
                ex,
                example_generator(seed, epoch, i),
                tokenizer.mask_token_id,
                len(tokenizer),
                settings.mlm_probability,
                settings.whole_word_masking,
            )
        elif objective == "clm":
            x, y = list(ex.ids), list(ex.ids)
        elif objective == "infilling":
            if settings.infilling_mode == "static_words":
                x, y = list(ex.noised), list(ex.ids)
            else:
                x, y, _ = infill(
                    ex,
                    example_generator(seed, epoch, i),
                    tokenizer.mask_token_id,
                    settings.infilling_mask_ratio,
                    settings.infilling_poisson_lambda,
                )
            if bos_decoder:  # no <s> in the encoder; the decoder reads <s> x and predicts x </s>
                bos = tokenizer.bos_token_id
                x = x[1:] if x and x[0] == bos else x
                decoder.append(y[:-1])
                y = y[1:]
        elif objective == "gpr":
            x = list(ex.ids)
            y = [IGNORE] * len(x)
            y[ex.target_pos] = ex.target
        else:
            raise ValueError(objective)
        inputs.append(x)
        labels.append(y)
    batch = {
        "input_ids": pad(inputs, pad_id, width),
        "attention_mask": pad([[1] * len(x) for x in inputs], 0, width),
        "labels": pad(labels, pad_id if pads_in_loss else IGNORE, width),
    }
    if objective == "infilling":
        if bos_decoder:
            batch["decoder_input_ids"] = pad(decoder, pad_id, width)
            real = [len(d) for d in decoder]
        else:
            from transformers.models.bart.modeling_bart import shift_tokens_right

            batch["decoder_input_ids"] = shift_tokens_right(batch["labels"], pad_id, decoder_start_token_id)
            real = [len(y) for y in labels]
        if pads_in_loss:
            batch["decoder_attention_mask"] = pad([[1] * n for n in real], 0, batch["decoder_input_ids"].size(1))
    return batch


def clean_batch(examples: list[Encoded], pad_id: int, width: int | None = None) -> dict[str, torch.Tensor]:
    """The un-noised sentences, padded (for ER embeddings): to the longest row, or to `width`."""
    rows = [list(e.ids) for e in examples]
    return {"input_ids": pad(rows, pad_id, width), "attention_mask": pad([[1] * len(r) for r in rows], 0, width)}


def lm_loss_sum(logits: torch.Tensor, labels: torch.Tensor, objective: str) -> tuple[torch.Tensor, int]:
    """(sum of token cross-entropies, number of target tokens); clm predicts token t+1 from position t."""
    if objective == "clm":
        logits, labels = logits[:, :-1], labels[:, 1:]
    labels = labels.to(logits.device)
    flat = labels.reshape(-1)
    keep = flat != IGNORE
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1))[keep].float(), flat[keep], reduction="sum")
    return loss, int(keep.sum())


def embeddings_from(
    out, attention_mask: torch.Tensor, family: str, pooling: str = "family", length: int | None = None
) -> torch.Tensor:
    """e(s) of the over-debiasing paper's ER from a forward's final hidden states (BERT: encoder; BART:
    decoder, the sentence being the teacher-forced decoder input). pooling (settings.ER_POOLINGS): family =
    the mean over real tokens, GPT-2 the last real token's state; mean = the mean over real tokens;
    mean_padded = the mean over the first `length` positions, pads included; pad_position = the state at
    position `length` - 1 (the rows must be padded to at least `length`); family_padded = pad_position for
    clm, mean_padded otherwise (DA-Gender's *_ER.py)."""
    hidden = out.decoder_hidden_states[-1] if family == "seq2seq" else out.hidden_states[-1]
    if pooling == "family_padded":
        pooling = "pad_position" if family == "clm" else "mean_padded"
    if pooling == "mean_padded":
        return hidden[:, :length].mean(1)
    if pooling == "pad_position":
        return hidden[:, length - 1]
    mask = attention_mask.to(hidden.device)
    if family == "clm" and pooling == "family":
        last = mask.sum(1) - 1
        return hidden[torch.arange(hidden.size(0), device=hidden.device), last]
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1)


def sentence_embeddings(model, batch: dict, family: str) -> torch.Tensor:
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
    return embeddings_from(out, batch["attention_mask"], family)


def er_terms(model, s_batch: dict, swap_batch: dict, family: str) -> torch.Tensor:
    """1 - cos(e_s, e_swap) per pair, with gradients through both sentences."""
    e_s = sentence_embeddings(model, s_batch, family).float()
    e_c = sentence_embeddings(model, swap_batch, family).float()
    return 1.0 - F.cosine_similarity(e_s, e_c, dim=-1)
