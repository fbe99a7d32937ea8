"""Self-Debias (Schick et al. 2021, as bias-bench computes it) through the scoring engine.

The reference here is written from bias-bench's SelfDebiasingLogitsProcessor and its MLM / GPT-2 wrappers
(bias_bench/debias/self_debias/): run the model on the plain input and on the input behind the prefix
(mlm: tokens of "[CLS] " + prefix in place of [CLS]; clm: tokens of the prefix in place of BOS), then at each
position p' = p * max(exp(-50 * max(q - p, 0)), 0.01), renormalised. Tiny models with a planted "he" bias.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from lmbias.benchmarks.crows_pairs import align, score_crows_pairs
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.oracles import naive_masked_logprobs, naive_sentence_logprobs
from lmbias.engine.pll import encode
from lmbias.engine.scoring import MaskedIdsRequest, MaskedRequest, masked_logprobs_ids, sentence_logprobs
from lmbias.engine.self_debias import SelfDebiasSettings, rescaled_logprobs, wrap
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.jobs.scoring import load_for_method
from lmbias.methods import resolution

PREFIX = "The following text discriminates against people because of their gender: "
SENTENCES = [
    "The nurse said that {} was tired.",
    "The developer argued with the designer because {} did not like it.",
    "{} is a mechanic.",
]
PAIRS = [("He is a nurse.", "She is a nurse."), ("The man was strong and brave.", "The woman was strong and brave.")]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """{family: (model, tokenizer, folder)} of planted-bias tiny BERT and GPT-2 ("he" raised by 8 nats)."""
    out = {}
    for arch, family in (("bert", "mlm"), ("gpt2", "clm")):
        folder = build_tiny_model(arch, tmp_path_factory.mktemp(arch) / arch, seed=0, planted_bias={"he": 8.0})
        model, tok = load_model(
            model_spec(f"tiny-{arch}-he", {"path": str(folder), "family": family, "revision": "local"})
        )
        out[family] = (model, tok, folder)
    return out


def _direct(model, regular_ids, prefixed_ids, decay=50.0, epsilon=0.01):
    """log of bias-bench's rescaled distribution at every position of `regular_ids`, computed independently:
    prefixed position t + (len(prefixed) - len(regular)) holds the same token as regular position t."""
    shift = len(prefixed_ids) - len(regular_ids)
    with torch.no_grad():
        regular = model(input_ids=torch.tensor([regular_ids])).logits[0].double()
        prefixed = model(input_ids=torch.tensor([prefixed_ids])).logits[0, shift:].double()
    p, q = regular.softmax(-1), prefixed.softmax(-1)
    alpha = torch.where(q > p, torch.exp(-decay * (q - p)), torch.ones_like(p))
    alpha = torch.maximum(alpha, torch.full_like(alpha, epsilon))
    debiased = p * alpha
    return (debiased / debiased.sum(-1, keepdim=True)).log()


def _mlm_prefixed(tok, ids, prefix=PREFIX):
    return tok(tok.cls_token + " " + prefix, add_special_tokens=False)["input_ids"] + list(ids[1:])


def _clm_pair(tok, text, prefix=PREFIX):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return [tok.eos_token_id] + ids, tok(prefix, add_special_tokens=False)["input_ids"] + ids


def test_rescaling_formula_on_hand_values():
    # p = (0.4, 0.3, 0.2, 0.1); the prefix raises token 0 by 0.02 and token 3 by 0.2, lowers the others
    p = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.42, 0.18, 0.1, 0.3], dtype=torch.float64)
    out = rescaled_logprobs(p.log(), q.log(), 50.0, 0.01).exp()
    scaled = p * torch.tensor([math.exp(-50 * 0.02), 1.0, 1.0, 0.01])  # exp(-50 * 0.2) = 4.5e-5 < epsilon
    assert torch.allclose(out, scaled / scaled.sum(), atol=1e-12)


def test_masked_lm_distribution_equals_direct_computation(planted):
    model, tok, _ = planted["mlm"]
    wrapped = wrap(model, tok, "mlm", SelfDebiasSettings())
    probe = sorted(
        {tok.convert_tokens_to_ids(w) for w in ("he", "she", "his", "her", "the", "nurse")} | set(range(5, 4000, 97))
    )
    requests, expected = [], []
    for sentence in SENTENCES:
        ids = encode(tok, sentence.format(tok.mask_token))
        position = ids.index(tok.mask_token_id)
        requests.append(MaskedIdsRequest(tuple(ids), position, tuple(probe)))
        expected.append(_direct(model, ids, _mlm_prefixed(tok, ids))[position, probe].numpy())
    got = masked_logprobs_ids(wrapped, tok, requests, batch_size=2)  # padded batches of unequal lengths
    # Padding moves float32 probabilities by ~1e-7, and the rescaling exp(-decay_constant * delta) multiplies an
    # error in delta by decay_constant (50): a planted token's log-probability near -2.6 then moves by ~1e-5
    # (4e-6 relative, seen on this machine), so the tolerance is relative as well as absolute.
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, atol=1e-6, rtol=2e-5)
    # the wrapper's full forward (token_type_ids included), one text at a time, gives the same
    naive = naive_masked_logprobs(
        wrapped, tok, [MaskedRequest(s.format(tok.mask_token), tuple(probe)) for s in SENTENCES]
    )
    for n, e in zip(naive, expected):
        np.testing.assert_allclose(n, e, atol=1e-6)
    plain = masked_logprobs_ids(model, tok, requests)
    assert max(abs(g - p).max() for g, p in zip(got, plain)) > 0.1  # the method moved the distribution


def test_causal_lm_sentence_loglik_equals_direct_computation(planted):
    model, tok, _ = planted["clm"]
    wrapped = wrap(model, tok, "clm", SelfDebiasSettings())
    texts = [s.format("he") for s in SENTENCES[:2]] + ["He is a mechanic."]
    expected = []
    for text in texts:
        regular, prefixed = _clm_pair(tok, text)
        logp = _direct(model, regular, prefixed)
        expected.append(float(sum(logp[t, regular[t + 1]] for t in range(len(regular) - 1))))
    got = sentence_logprobs(wrapped, tok, texts, batch_size=2)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(naive_sentence_logprobs(wrapped, tok, texts), expected, atol=1e-6)
    assert np.abs(got - sentence_logprobs(model, tok, texts)).max() > 0.1


def test_only_tokens_the_prefix_raises_lose_probability(planted):
    """Documented direction: p'(w)/p(w) is the same (>= 1) for every token the prefix does not raise, and
    smaller exactly for those it raises; on the planted model "he" is among them and drops."""
    model, tok, _ = planted["mlm"]
    ids = encode(tok, SENTENCES[0].format(tok.mask_token))
    position = ids.index(tok.mask_token_id)
    with torch.no_grad():
        p = model(input_ids=torch.tensor([ids])).logits[0, position].double().log_softmax(-1)
        prefixed_ids = _mlm_prefixed(tok, ids)
        q = (
            model(input_ids=torch.tensor([prefixed_ids]))
            .logits[0, position + len(prefixed_ids) - len(ids)]
            .double()
            .log_softmax(-1)
        )
        out = wrap(model, tok, "mlm")(input_ids=torch.tensor([ids])).logits[0, position]
    raised = q.exp() > p.exp()
    ratio = out - p
    assert raised.any() and (~raised).any()
    kept = ratio[~raised]
    assert torch.allclose(kept, kept[0].expand_as(kept), atol=1e-9) and kept[0] >= 0
    assert (ratio[raised] < kept[0]).all()
    he = tok.convert_tokens_to_ids("he")
    assert raised[he] and out[he] < p[he]


def _pairs_table():
    return pa.Table.from_pylist(
        [
            {"row_id": i, "bias_type": "gender", "stereo_antistereo": "stereo", "sent_more": more, "sent_less": less}
            for i, (more, less) in enumerate(PAIRS)
        ]
    )


def test_crows_pairs_scorer_reads_the_rescaled_distribution(planted):
    # masked LM: bias-bench's variant, mean log p' over the modified tokens, each hidden in turn
    model, tok, _ = planted["mlm"]
    scores = score_crows_pairs(
        _pairs_table(), LanguageModel(wrap(model, tok, "mlm"), tok, "mlm"), {"variants": ["bias_bench"]}
    ).to_pylist()
    for row, (more, less) in zip(scores, PAIRS):
        ids_more, ids_less = encode(tok, more), encode(tok, less)
        _, _, modified_more, modified_less = align(ids_more, ids_less)
        for ids, modified, column in (
            (ids_more, modified_more, "more_modified_mean"),
            (ids_less, modified_less, "less_modified_mean"),
        ):
            values = []
            for position in modified:
                masked = list(ids)
                masked[position] = tok.mask_token_id
                values.append(float(_direct(model, masked, _mlm_prefixed(tok, masked))[position, ids[position]]))
            assert row[column] == pytest.approx(float(np.mean(values)), abs=1e-6)
    # causal LM: the sentence log-likelihood
    model, tok, _ = planted["clm"]
    scores = score_crows_pairs(_pairs_table(), LanguageModel(wrap(model, tok, "clm"), tok, "clm")).to_pylist()
    for row, (more, _less) in zip(scores, PAIRS):
        regular, prefixed = _clm_pair(tok, more)
        logp = _direct(model, regular, prefixed)
        assert row["more_loglik"] == pytest.approx(
            float(sum(logp[t, regular[t + 1]] for t in range(len(regular) - 1))), abs=1e-6
        )


def test_scoring_job_loads_the_wrapper_with_the_entry_options(planted):
    _, _, folder = planted["mlm"]
    entry = {"path": str(folder), "family": "mlm", "revision": "local"}
    model, tok = load_for_method(
        "tiny-bert-he",
        entry,
        {"kind": "self_debias", "prefix": "Women are bad: ", "decay_constant": 10, "epsilon": 0.1},
        "cpu",
    )
    assert model.settings == SelfDebiasSettings("Women are bad: ", 10.0, 0.1)
    assert model.prefix_ids == tok("[CLS] Women are bad: ", add_special_tokens=False)["input_ids"]
    with pytest.raises(ConfigError, match="embedding benchmarks do not apply"):
        model.base_model  # noqa: B018 - SEAT's path to hidden states


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("prefix", "  ", "methods.sdb.prefix"),
        ("prefix", 3, "methods.sdb.prefix"),
        ("decay_constant", 0, "methods.sdb.decay_constant"),
        ("decay_constant", "50", "methods.sdb.decay_constant"),
        ("epsilon", 0, "methods.sdb.epsilon"),
        ("epsilon", 1.5, "methods.sdb.epsilon"),
        ("temperature", 1, "methods.sdb.temperature"),
    ],
)
def test_bad_options_are_named(key, value, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        resolution.check_method_entry("sdb", {"kind": "self_debias", key: value})


def test_families_defaults_and_left_out_benchmarks():
    entry = {"kind": "self_debias"}
    resolved = resolution.resolve_method("tiny-gpt2", {"family": "clm"}, "sdb", entry)
    assert resolved["self_debias"] == {"prefix": PREFIX, "decay_constant": 50.0, "epsilon": 0.01}
    assert resolution.seeds_for(entry, [0, 1, 2]) == [0]
    with pytest.raises(ConfigError, match="'sdb'.*'tiny-bart'.*seq2seq"):
        resolution.check_method_family("tiny-bart", "seq2seq", "sdb", entry)
    assert "embedding benchmarks do not apply" in resolution.method_benchmark_exclusion(
        "sdb", entry, {"dataset": "seat_templates"}
    )
    assert resolution.method_benchmark_exclusion("sdb", entry, {"dataset": "winobias"}) is None
    assert resolution.method_benchmark_exclusion("pretrained", {"kind": "pretrained"}, {"dataset": "seat"}) is None
    with pytest.raises(ConfigError, match="'seat_v1' does not apply to method 'sdb'"):
        resolution.check_method_benchmark("sdb", entry, "seat_v1", {"dataset": "seat_templates"})


# ------------------------------------------------------------------------- tokenizers that add a BOS themselves
# A Llama tokenizer puts <s> in front of every text, so a Llama never read a text without it: the prefixed
# input keeps it, BOS tok(prefix) s1 .. sn (bias-bench's own code would do the same: it encodes its prefixes
# with the tokenizer's special tokens). GPT-2's tokenizer adds nothing: its inputs stay bias-bench's (above).


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = build_tiny_model("llama", tmp_path_factory.mktemp("llama") / "llama", seed=0)
    return load_model(model_spec("tiny-llama", {"path": str(folder), "family": "clm", "revision": "local"}))


def test_llama_prefixed_input_starts_with_bos_then_the_prefix(llama, planted):
    model, tok = llama
    assert tok("a")["input_ids"][0] == tok.bos_token_id  # the premise: the tokenizer adds <s> itself
    prefix = tok(PREFIX, add_special_tokens=False)["input_ids"]
    wrapped = wrap(model, tok, "clm")
    assert wrapped.prefix_ids == [tok.bos_token_id] + prefix
    body = tok("He is a nurse.", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([[tok.bos_token_id] + body])
    _, prefixed = wrapped._prefixed(ids, None, None)
    assert prefixed["input_ids"][0].tolist() == [tok.bos_token_id] + prefix + body
    assert wrapped.added_positions() == len(prefix)
    alone = wrapped.prepending_prefix()  # scoring.clm_context: bias_bench, perplexity windows: the sentence alone
    _, prefixed = alone._prefixed(torch.tensor([body]), None, None)
    assert prefixed["input_ids"][0].tolist() == [tok.bos_token_id] + prefix + body
    assert alone.added_positions() == len(prefix) + 1
    # GPT-2 (bos = eos = <|endoftext|>, never added by its tokenizer): the prefix alone, in the start token's place
    gpt2, gpt2_tok, _ = planted["clm"]
    assert wrap(gpt2, gpt2_tok, "clm").prefix_ids == gpt2_tok(PREFIX, add_special_tokens=False)["input_ids"]


def _llama_texts():
    return [s.format("he") for s in SENTENCES[:2]] + ["She is a mechanic.", "The man was strong and brave."]


def test_llama_sentence_loglik_equals_direct_computation_behind_bos(llama):
    model, tok = llama
    bos, texts = tok.bos_token_id, _llama_texts()
    prefix = tok(PREFIX, add_special_tokens=False)["input_ids"]
    wrapped = wrap(model, tok, "clm")
    expected, without_bos = [], []
    for text in texts:
        body = tok(text, add_special_tokens=False)["input_ids"]
        regular = [bos] + body
        for prefixed, out in (([bos] + prefix + body, expected), (prefix + body, without_bos)):
            logp = _direct(model, regular, prefixed)
            out.append(float(sum(logp[t, regular[t + 1]] for t in range(len(regular) - 1))))
    got = sentence_logprobs(wrapped, tok, texts, batch_size=3)  # padded batches of unequal lengths
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(naive_sentence_logprobs(wrapped, tok, texts), expected, atol=1e-6)
    # the test can fail: the old input (prefix in <s>'s place) and no Self-Debias at all both give other numbers
    assert np.abs(got - np.array(without_bos)).max() > 1e-4
    assert np.abs(got - sentence_logprobs(model, tok, texts)).max() > 1e-4


def test_llama_bias_bench_context_keeps_bos_before_the_prefix(llama):
    """scoring.clm_context bias_bench: s1 from the start token's pass (<s> -> <s> prefix), s2 .. sn from the
    sentence alone (s1 .. sn -> <s> prefix s1 .. sn)."""
    model, tok = llama
    bos, texts = tok.bos_token_id, _llama_texts()
    prefix = tok(PREFIX, add_special_tokens=False)["input_ids"]
    expected = []
    for text in texts:
        body = tok(text, add_special_tokens=False)["input_ids"]
        head = float(_direct(model, [bos], [bos] + prefix)[0, body[0]])
        logp = _direct(model, body, [bos] + prefix + body)
        expected.append(head + float(sum(logp[t, body[t + 1]] for t in range(len(body) - 1))))
    wrapped = wrap(model, tok, "clm")
    got = sentence_logprobs(wrapped, tok, texts, batch_size=3, context="bias_bench")
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(naive_sentence_logprobs(wrapped, tok, texts, context="bias_bench"), expected, atol=1e-6)
