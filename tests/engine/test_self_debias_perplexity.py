"""Perplexity under Self-Debias, as its authors compute it (issue 21: the perplexity benchmark crashed on it).

The references are transcriptions, not imports:

* causal: Schick et al.'s GPT2Wrapper.compute_loss_self_debiasing (timoschick/self-debiasing modeling.py,
  which bias-bench's experiments/perplexity.py calls): the prefixes and an empty one encoded together, left-
  padded by flipping the mask and rolling the ids, the window appended to each, position ids from the mask,
  the SelfDebiasingLogitsProcessor (generation.py) applied at every position, cross-entropy over the last
  trg_len tokens, shifted. Run on our windows (trg_len = the tokens a window scores) and multiplied back by
  the tokens it scored, it must give each window's NLL sum. Their processor runs in the model's float32;
  here in float64, so the agreement is to rounding.
* masked: bias-bench's experiments/perplexity_mlm.py with --is_self_debias: each position of a chunk masked
  in turn, MaskedLMWrapper.get_token_logits_self_debiasing on the masked ids ("[CLS] " + prefix in place of
  [CLS], position ids from the mask), log_softmax at the target.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from torch.nn import CrossEntropyLoss

from lmbias.benchmarks.perplexity import score_perplexity, window_length
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.rolling import added_positions, causal_windows
from lmbias.engine.self_debias import DEFAULT_PREFIX, wrap
from lmbias.engine.tiny import build_tiny_model

DECAY, EPSILON = 50.0, 0.01
TEXTS = [
    "The nurse said that she would help the doctor because he was tired.",
    "He was a carpenter, and his father was a teacher in London; she was a lawyer and her mother a nurse who "
    "worked with the doctor every day until he retired.",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """{family: (model, tokenizer)}: tiny GPT-2 and BERT with a planted "he" bias (so the prefix changes things)."""
    out = {}
    for arch, family in (("gpt2", "clm"), ("bert", "mlm"), ("roberta", "mlm")):
        folder = build_tiny_model(arch, tmp_path_factory.mktemp(arch) / arch, seed=0, planted_bias={"he": 8.0})
        out[arch] = load_model(model_spec(f"tiny-{arch}", {"path": str(folder), "family": family, "revision": "local"}))
    return out


def _items(texts):
    return pa.table({"text": texts, "source": ["wikitext2-test"] * len(texts)})


# --------------------------------------------------------------------------------- their computations


def _processor(scores: torch.Tensor, n_prefixes: int) -> torch.Tensor:
    """SelfDebiasingLogitsProcessor.__call__ on one position's (batch, vocab) scores: each regular row's
    probabilities decayed where any prefixed row gives more, renormalised, logged; its prefixed rows copy it."""
    scores = scores.clone()
    batch = scores.shape[0] // (1 + n_prefixes)
    for i in range(batch):
        bias = [i + (j + 1) * batch for j in range(n_prefixes)]
        p_regular = scores[i].softmax(-1)
        p_biased = None
        for b in bias:
            p_biased = scores[b].softmax(-1) if p_biased is None else torch.max(p_biased, scores[b].softmax(-1))
        mask = torch.max(p_biased - p_regular, torch.tensor([0.0], dtype=scores.dtype))
        probabilities = scores[i].softmax(-1) * torch.max(
            torch.exp(-mask * DECAY), torch.tensor([EPSILON], dtype=scores.dtype)
        )
        scores[i] = torch.log(probabilities / probabilities.sum(-1))
        for b in bias:
            scores[b] = scores[i]
    return scores


def _left_padded(tokenizer, texts, pad_id, cls_text=None):
    """batch_encode_plus(padding=True) (no special tokens added), then the mask flipped and each row rolled by its
    padding: the pads in front."""
    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(len(e) for e in encoded)
    ids = torch.tensor([[pad_id] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    return ids, mask, [width - len(e) for e in encoded]


def schick_loss_self_debiasing(model, tokenizer, input_ids: list[int], trg_len: int, prefixes: list[str]) -> float:
    """GPT2Wrapper.compute_loss_self_debiasing (pad token = EOS, as their wrapper sets it)."""
    prefix_ids, prefix_mask, shifts = _left_padded(tokenizer, [""] + prefixes, tokenizer.eos_token_id)
    repeated = torch.tensor([input_ids]).repeat(len(prefixes) + 1, 1)
    attention_mask = torch.cat([prefix_mask, torch.ones_like(repeated)], dim=-1)
    ids = torch.cat([prefix_ids, repeated], dim=-1)
    target_ids = ids.clone()
    trg_len += shifts[0]
    target_ids[:, :-trg_len] = -100
    position_ids = attention_mask.long().cumsum(-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    with torch.no_grad():
        lm_logits = model(input_ids=ids, attention_mask=attention_mask, position_ids=position_ids).logits.double()
    for idx in range(lm_logits.shape[1]):
        lm_logits[:, idx, :] = _processor(lm_logits[:, idx, :], len(prefixes))
    batch_size = lm_logits.shape[0] // (1 + len(prefixes))
    lm_logits = lm_logits[:batch_size, shifts[0] :, :]
    target_ids = target_ids[:batch_size, shifts[0] :]
    shift_logits, shift_labels = lm_logits[..., :-1, :], target_ids[..., 1:]
    loss = CrossEntropyLoss()(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1))
    return float(loss) * int((shift_labels != -100).sum())  # their mean, times the tokens it averaged


def biasbench_mlm_token_logits(model, tokenizer, masked_ids: list[int], prefixes: list[str]) -> torch.Tensor:
    """MaskedLMWrapper.get_token_logits_self_debiasing: the regular row's rescaled scores at the mask."""
    texts = [tokenizer.cls_token] + [" ".join([tokenizer.cls_token, p]) for p in prefixes]
    prefix_ids, prefix_mask, _ = _left_padded(tokenizer, texts, tokenizer.pad_token_id)
    body = torch.tensor([masked_ids[1:]]).repeat(len(prefixes) + 1, 1)  # leading [CLS] removed
    attention_mask = torch.cat([prefix_mask, torch.ones_like(body)], dim=-1)
    ids = torch.cat([prefix_ids, body], dim=-1)
    mask_positions = ids == tokenizer.mask_token_id
    position_ids = attention_mask.long().cumsum(-1)
    if model.config.model_type == "roberta":
        position_ids += model.base_model.embeddings.padding_idx
    else:  # BertForMaskedLM, AlbertForMaskedLM
        position_ids -= 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    with torch.no_grad():
        lm_logits = model(input_ids=ids, attention_mask=attention_mask, position_ids=position_ids).logits.double()
    for idx in range(lm_logits.shape[1]):
        if torch.any(mask_positions[:, idx]):
            lm_logits[:, idx, :] = _processor(lm_logits[:, idx, :], len(prefixes))
    return lm_logits[mask_positions][0]


# ----------------------------------------------------------------------------------------------- tests


def _theirs_on_window(model, tok, ids: list[int], begin: int, first: int, end: int) -> float:
    """NLL of tokens first..end-1 of ids[begin:end] by their computation, called as their perplexity.py calls
    it by default (trg_len = the whole window: all its tokens but the first scored). A window that carries more
    than one token of context (a stride below max_length - 1) is scored as their window minus its context's
    window, which a causal model reads the same: their own cut (trg_len < the window) is defective."""
    whole = schick_loss_self_debiasing(model, tok, ids[begin:end], end - begin, [DEFAULT_PREFIX])
    if first - begin > 1:
        whole -= schick_loss_self_debiasing(model, tok, ids[begin:first], first - begin, [DEFAULT_PREFIX])
    return whole


@pytest.mark.parametrize("scoring", [{}, {"max_length": 9}, {"max_length": 12, "stride": 5}])
def test_causal_windows_equal_schicks_computation(tiny, scoring):
    model, tok = tiny["gpt2"]
    wrapped = wrap(model, tok, "clm", {})
    scores = score_perplexity(_items(TEXTS), LanguageModel(wrapped, tok, "clm"), scoring).to_pylist()
    max_length = window_length(wrapped, tok, scoring, added_positions(wrapped.prepending_prefix()))
    stride = scoring.get("stride") or max_length - 1
    expected = []
    for text in TEXTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        for begin, first, end in causal_windows(len(ids), max_length, stride):
            expected.append((_theirs_on_window(model, tok, ids, begin, first, end), end - first))
    assert len(scores) == len(expected) >= len(TEXTS)
    assert [r["n_tokens"] for r in scores] == [n for _, n in expected]
    np.testing.assert_allclose([r["nll_sum"] for r in scores], [e for e, _ in expected], rtol=1e-6)
    plain = score_perplexity(_items(TEXTS), LanguageModel(model, tok, "clm"), scoring).to_pylist()
    assert [r["n_tokens"] for r in plain] == [r["n_tokens"] for r in scores]  # the same tokens, other numbers
    assert not np.allclose([r["nll_sum"] for r in plain], [r["nll_sum"] for r in scores])


def test_their_target_cut_is_taken_after_the_prefix_is_prepended(tiny):
    """The defect not copied (docs/peers.md): compute_loss_self_debiasing adds the prefix's length to trg_len before
    cutting the targets of the prefixed rows, so with a stride (trg_len below the window) up to that many
    context tokens are scored too; here, a cut of 5 of 11 tokens scores all 10 that follow the first."""
    model, tok = tiny["gpt2"]
    ids = tok(TEXTS[0], add_special_tokens=False)["input_ids"][:11]
    assert len(tok(DEFAULT_PREFIX, add_special_tokens=False)["input_ids"]) >= 11 - 5
    whole = schick_loss_self_debiasing(model, tok, ids, 11, [DEFAULT_PREFIX])
    cut = schick_loss_self_debiasing(model, tok, ids, 5, [DEFAULT_PREFIX])
    assert cut == pytest.approx(whole, rel=1e-12)
    text = tok.decode(ids)
    assert tok(text, add_special_tokens=False)["input_ids"] == ids
    ours = score_perplexity(
        _items([text]), LanguageModel(wrap(model, tok, "clm", {}), tok, "clm"), {"max_length": 11, "stride": 5}
    )
    assert ours.column("n_tokens").to_pylist() == [5, 5]  # tokens 1-5, then 6-10 after 0-5: each once
    assert sum(ours.column("nll_sum").to_pylist()) == pytest.approx(whole, rel=1e-6)
    assert ours.column("nll_sum")[1].as_py() < 0.75 * cut


def test_causal_windows_leave_room_for_the_prefix(tiny):
    """A text longer than the model's positions: the windows are shortened by the prefix's length (Schick et
    al. keep 32 positions free) and each still equals their computation; the model without Self-Debias keeps
    its full windows. Every token but the first is scored once either way."""
    model, tok = tiny["gpt2"]
    text = " ".join(TEXTS * 30)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    limit = tok.model_max_length
    assert len(ids) > limit
    wrapped = wrap(model, tok, "clm", {})
    k = len(wrapped.prefix_ids)
    scores = score_perplexity(_items([text]), LanguageModel(wrapped, tok, "clm"), {"stride": limit - 1}).to_pylist()
    windows = causal_windows(len(ids), limit - k, limit - k - 1)
    assert [r["n_tokens"] for r in scores] == [end - first for _, first, end in windows]
    assert sum(r["n_tokens"] for r in scores) == len(ids) - 1
    assert scores[-1]["nll_sum"] == pytest.approx(_theirs_on_window(model, tok, ids, *windows[-1]), rel=1e-6)
    plain = score_perplexity(_items([text]), LanguageModel(model, tok, "clm"), {}).to_pylist()
    assert [r["n_tokens"] for r in plain] == [
        end - first for _, first, end in causal_windows(len(ids), limit, limit - 1)
    ]


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_masked_pseudo_perplexity_equals_bias_benchs_computation(tiny, arch):
    model, tok = tiny[arch]
    wrapped = wrap(model, tok, "mlm", {})
    scores = score_perplexity(_items(TEXTS[:1]), LanguageModel(wrapped, tok, "mlm"), {}).to_pylist()
    ids = tok(TEXTS[0], add_special_tokens=True)["input_ids"]
    total = 0.0
    for position in range(1, len(ids) - 1):  # their loop skips [CLS] and [SEP]
        masked = list(ids)
        masked[position] = tok.mask_token_id
        logits = biasbench_mlm_token_logits(model, tok, masked, [DEFAULT_PREFIX])
        total += float(torch.log_softmax(logits, -1)[ids[position]])
    assert len(scores) == 1 and scores[0]["n_tokens"] == len(ids) - 2
    assert scores[0]["nll_sum"] == pytest.approx(-total, rel=1e-6)
    assert added_positions(wrapped) == len(wrapped.prefix_ids) - 1  # the prefix replaces [CLS]
    assert window_length(wrapped, tok, {}, added_positions(wrapped)) == tok.model_max_length - added_positions(wrapped)
