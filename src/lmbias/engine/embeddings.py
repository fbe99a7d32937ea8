"""Sentence embeddings through the batched engine (SEAT-v1/v2, and later ER / SentenceDebias representations).

One forward pass per batch of distinct, length-sorted texts gives the last layer's hidden states; every
requested pooling of them is computed from that same pass. Poolings, per family (names are the variant
names that reach the metric rows):

mlm (BERT, RoBERTa, ...) and encoder (headless encoders such as all-MiniLM-L6-v2, loaded with AutoModel):
  ``mean``         mean over the real tokens, special tokens included, padding excluded (default: the
                   DA-Gender paper's "average contextual embeddings", without its padding artefact)
  ``mean_padded``  mean over all positions of the input padded to ``pad_to`` tokens (128), pad positions
                   included: what the DA-Gender code computes (keras ``pad_sequences(maxlen=128)`` then
                   ``torch.mean(hidden, dim=1)``). ``pad_to=None`` pads to the batch's longest instead,
                   which makes an embedding depend on its batch-mates (kept only to show that effect).
  ``first_piece``  the first word-piece of the text encoded *without* special tokens: what sent-bias
                   computes for BERT (``tokenizer.tokenize`` then ``enc[:, 0, :]``, no [CLS] added)
  ``cls``          position 0 with special tokens ([CLS] / <s>)
clm (GPT-2):
  ``last``         the last real token's hidden state (default: the DA-Gender paper and code, "last hidden
                   state for GPT2"; its footnote 5 found the mean inferior; a left-to-right model's last
                   position is the only one that has read the whole sentence)
  ``mean``, ``mean_padded``  as above (GPT-2 pads with <|endoftext|>)
seq2seq (BART): the model reads the text in its encoder and, as ``BartModel`` does with no decoder input,
  the right-shifted text in its decoder.
  ``decoder_mean`` mean of the decoder's last layer over the real positions (default: the paper's "average
                   contextual embeddings for ... BART (decoder's)")
  ``decoder_mean_padded``, ``decoder_last``, ``encoder_mean``, ``encoder_mean_padded``

The last layer is the model's final hidden state (after GPT-2's final layer norm). A SentenceDebias model
applied with ``normalise_project_normalise`` is embedded as the DA-Gender SEAT code does: pooled from its
unprojected final states, then the pooled vector normalised, projected and normalised
(lmbias.engine.debias_projection). On GPU the forward pass
runs under bfloat16 autocast; poolings are computed in float32 and returned as float32.

``naive_sentence_embeddings`` computes the same thing one text at a time through the model's full forward
pass (``output_hidden_states=True``); tests assert the engine equals it to 1e-5.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lmbias import progress
from lmbias.engine.batching import EngineStats, autocast, model_device, pad, run_batches
from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use: DAG builds and metric jobs never need it

log = logging.getLogger(__name__)

POOLINGS: dict[str, tuple[str, ...]] = {
    "mlm": ("mean", "mean_padded", "first_piece", "cls"),
    "clm": ("last", "mean", "mean_padded"),
    "seq2seq": ("decoder_mean", "decoder_mean_padded", "decoder_last", "encoder_mean", "encoder_mean_padded"),
    "encoder": ("mean", "mean_padded", "first_piece", "cls"),
}
DEFAULT_POOLING = {"mlm": "mean", "clm": "last", "seq2seq": "decoder_mean", "encoder": "mean"}
#: The DA-Gender code pads every input to 128 tokens before averaging.
DA_GENDER_PAD_TO = 128


@dataclass(frozen=True)
class _Pool:
    stack: str  # model | encoder | decoder
    how: str  # mean | mean_padded | first | last
    special_tokens: bool


def _parse_pooling(name: str) -> _Pool:
    stack = "model"
    base = name
    for prefix in ("encoder_", "decoder_"):
        if name.startswith(prefix):
            stack, base = prefix[:-1], name[len(prefix) :]
    how = {"mean": "mean", "mean_padded": "mean_padded", "first_piece": "first", "cls": "first", "last": "last"}.get(
        base
    )
    if how is None:
        raise ConfigError(f"unknown pooling {name!r}; known: {sorted({p for ps in POOLINGS.values() for p in ps})}")
    return _Pool(stack=stack, how=how, special_tokens=(base != "first_piece"))


def check_poolings(family: str, poolings: Sequence[str], key: str = "poolings") -> list[str]:
    """The poolings, checked against the family; a ConfigError naming `key` otherwise."""
    if family not in POOLINGS:
        raise ConfigError(f"{key}: unknown model family {family!r}")
    poolings = list(poolings)
    if not poolings:
        raise ConfigError(f"{key}: at least one pooling is needed")
    bad = [p for p in poolings if p not in POOLINGS[family]]
    if bad:
        raise ConfigError(
            f"{key}: pooling(s) {bad} do not apply to family {family}; choose from {list(POOLINGS[family])}"
        )
    if len(set(poolings)) != len(poolings):
        raise ConfigError(f"{key}: repeated pooling in {poolings}")
    return poolings


def pooling_label(pooling: str, pad_to: int | None = DA_GENDER_PAD_TO) -> str:
    """Variant label of a pooling: the padded means carry their padding length ('mean_padded128')."""
    if pooling.endswith("mean_padded"):
        return f"{pooling}{pad_to}" if pad_to is not None else f"{pooling}_batch"
    return pooling


def _encode(tokenizer, texts: Sequence[str], special_tokens: bool, max_length: int) -> list[list[int]]:
    encoded = tokenizer(list(texts), add_special_tokens=special_tokens, truncation=False)["input_ids"]
    for text, ids in zip(texts, encoded):
        if not ids:
            raise DataError(f"sentence embedding: {text!r} encodes to no tokens")
        if len(ids) > max_length:
            raise DataError(
                f"sentence embedding: input of {len(ids)} tokens exceeds max_length={max_length}: {text[:80]!r}"
            )
    return encoded


def _hidden_states(model, ids, attn, stacks: set[str]) -> dict[str, torch.Tensor]:
    """Last-layer hidden states of the stacks asked for (model | encoder | decoder)."""
    if getattr(model.config, "is_encoder_decoder", False):
        if stacks == {"encoder"}:
            out = model.get_encoder()(input_ids=ids, attention_mask=attn)
            return {"encoder": out.last_hidden_state}
        # BartModel derives the decoder input (the text shifted right) itself; with right padding the causal
        # decoder's real positions never see a pad.
        out = model.base_model(input_ids=ids, attention_mask=attn)
        return {"decoder": out.last_hidden_state, "encoder": out.encoder_last_hidden_state}
    return {"model": model.base_model(input_ids=ids, attention_mask=attn).last_hidden_state}


def _pool(hidden: torch.Tensor, attn: torch.Tensor, how: str) -> torch.Tensor:
    hidden = hidden.float()
    if how == "mean":
        m = attn.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1)
    if how == "mean_padded":
        return hidden.mean(1)
    if how == "first":
        return hidden[:, 0]
    if how == "last":
        last = attn.sum(1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise AssertionError(how)


def sentence_embeddings(
    model,
    tokenizer,
    texts: Sequence[str],
    poolings: Sequence[str],
    family: str,
    *,
    batch_size: int = 64,
    max_length: int = 512,
    pad_to: int | None = DA_GENDER_PAD_TO,
    max_tokens: int | None = None,
    stats: EngineStats | None = None,
) -> dict[str, np.ndarray]:
    """{pooling: float32 array (len(texts), hidden)} for every pooling, from as few forward passes as possible.

    Identical texts are embedded once; distinct texts are sorted by length and batched. Poolings that read
    the same inputs share a forward pass (``first_piece`` encodes without special tokens and the padded
    means pad to ``pad_to``, so those run their own passes).
    """
    stats = stats if stats is not None else EngineStats()
    poolings = check_poolings(family, poolings)
    device = model_device(model)
    unique: dict[str, int] = {}
    for text in texts:
        unique.setdefault(text, len(unique))
    distinct = list(unique)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    groups: dict[tuple[bool, bool], list[str]] = {}
    for name in poolings:
        p = _parse_pooling(name)
        groups.setdefault((p.special_tokens, p.how == "mean_padded"), []).append(name)

    results: dict[str, np.ndarray] = {}
    # A SentenceDebias model whose application works on pooled vectors (normalise_project_normalise) runs
    # unprojected here and each pooled vector is finished by it (lmbias.engine.debias_projection). Each group of
    # poolings runs every distinct text: all those rows are announced at once (lmbias.progress.planned).
    with _pooled_states(model) as finish, progress.planned(len(groups) * len(distinct)):
        for (special, padded), names in groups.items():
            encoded = _encode(tokenizer, distinct, special, max_length)
            lengths = [len(ids) for ids in encoded]
            fixed_width = pad_to if padded else None
            if fixed_width is not None and max(lengths) > fixed_width:
                raise DataError(
                    f"sentence embedding: an input of {max(lengths)} tokens is longer than pad_to={fixed_width}"
                )
            pools = {n: _parse_pooling(n) for n in names}
            stacks = {p.stack for p in pools.values()}
            out = {n: None for n in names}
            order = sorted(range(len(distinct)), key=lambda i: (lengths[i], i))

            def run(batch):
                seqs = [encoded[i] for i in batch]
                width = fixed_width or max(len(s) for s in seqs)
                ids, attn = pad(seqs, pad_id, device, width)
                hidden = _hidden_states(model, ids, attn, stacks)
                pooled_batch = {}
                for name, p in pools.items():
                    pooled = _pool(hidden[p.stack], attn, p.how)
                    if finish is not None:
                        pooled = finish.pooled(pooled)
                    pooled_batch[name] = pooled.cpu().numpy().astype(np.float32)
                for name, vecs in pooled_batch.items():  # stored once the whole batch went through
                    if out[name] is None:
                        out[name] = np.zeros((len(distinct), vecs.shape[1]), dtype=np.float32)
                    out[name][batch] = vecs
                stats.forward_passes += 1
                stats.sequences_run += len(batch)

            # the padded means pad every input to pad_to: that is the width the budget counts
            widths = lengths if fixed_width is None else [fixed_width] * len(lengths)
            with torch.inference_mode(), autocast(device):
                run_batches(order, widths, batch_size, run, max_tokens, stats, "sentence embedding")
            index = np.array([unique[t] for t in texts], dtype=np.int64)
            for name in names:
                results[name] = out[name][index]
    stats.requests += len(texts)
    stats.unique_inputs += len(distinct)
    return {name: results[name] for name in poolings}


def _pooled_states(model):
    from lmbias.engine.debias_projection import pooled_states  # imports torch

    return pooled_states(model)


def naive_sentence_embeddings(
    model, tokenizer, texts: Sequence[str], pooling: str, family: str, pad_to: int | None = DA_GENDER_PAD_TO
) -> np.ndarray:
    """Reference: one text at a time through the model's full forward pass (output_hidden_states=True),
    no batching, no dedup. ``mean_padded`` pads the single text to ``pad_to`` (unpadded when None)."""
    check_poolings(family, [pooling])
    p = _parse_pooling(pooling)
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows = []
    with torch.inference_mode(), _pooled_states(model) as finish:
        for text in texts:
            ids = tokenizer(text, add_special_tokens=p.special_tokens)["input_ids"]
            width = pad_to if (p.how == "mean_padded" and pad_to is not None) else len(ids)
            input_ids = torch.tensor([ids + [pad_id] * (width - len(ids))], device=device)
            attn = torch.tensor([[1] * len(ids) + [0] * (width - len(ids))], device=device)
            out = model(input_ids=input_ids, attention_mask=attn, output_hidden_states=True)
            if p.stack == "decoder":
                hidden = out.decoder_hidden_states[-1]
            elif p.stack == "encoder":
                hidden = out.encoder_hidden_states[-1]
            else:
                hidden = out.hidden_states[-1]
            hidden = hidden[0].float()
            if p.how == "mean":
                vec = hidden[: len(ids)].mean(0)
            elif p.how == "mean_padded":
                vec = hidden.mean(0)
            elif p.how == "first":
                vec = hidden[0]
            else:
                vec = hidden[len(ids) - 1]
            if finish is not None:
                vec = finish.pooled(vec[None])[0]
            rows.append(vec.cpu().numpy().astype(np.float32))
    return np.stack(rows)
