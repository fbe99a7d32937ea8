"""Shared prefixes read once (lmbias.engine.prefix_cache) give the full recomputation's numbers to 1e-5."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lmbias.benchmarks.stereoset import score_stereoset
from lmbias.engine import scored_logits
from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.oracles import naive_sentence_logprobs
from lmbias.engine.prefix_cache import common_prefix_length, grouped_sentence_logprobs, low_padding_runs
from lmbias.engine.scoring import sentence_logprobs
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.parsers import parse_stereoset

# groups: candidates sharing words before a blank, choices sharing a whole prompt, a text that is a prefix of
# another, a duplicate text, a group of one, and a group sharing only the start token (full path)
TEXTS = [
    ("blank", "The schoolgirl is walking down the street, she is a quiet girl."),
    ("blank", "The schoolgirl is walking down the street, she is a loud girl."),
    ("blank", "The schoolgirl is walking down the street, she is a triangle girl."),
    ("choice", "The nurse said that the doctor was late. Who was late? The doctor"),
    ("choice", "The nurse said that the doctor was late. Who was late? The nurse"),
    ("nested", "The man is"),
    ("nested", "The man is a nurse."),
    ("nested", "The man is"),
    ("one", "She is a chemist."),
    ("start", "Quiet girls read."),
    ("start", "Loud boys shout."),
]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny_clm(request, tmp_path_factory):
    arch = request.param
    out = tmp_path_factory.mktemp(f"prefix-{arch}") / arch
    build_tiny_model(arch, out, seed=0)
    model, tok = load_model(model_spec(f"tiny-{arch}", {"path": str(out), "family": "clm", "revision": "local"}))
    return arch, model, tok


def test_common_prefix_compares_token_ids_and_leaves_a_token_to_continue():
    assert common_prefix_length([[1, 2, 3, 4], [1, 2, 5]]) == 2
    assert common_prefix_length([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shorter keeps one token
    assert common_prefix_length([[1, 2], [3, 2]]) == 0


def test_low_padding_runs_cut_a_long_tail_and_keep_batches():
    lengths = [8, 8, 8, 9, 20, 8, 8, 8]
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    # six 8s and a 9 pad to 7 x 9 = 63 <= 1.125 x 57 tokens; the 20 would pad to 8 x 20 = 160 > 1.125 x 77: cut
    assert low_padding_runs(order, lengths, batch_size=64) == [[0, 1, 2, 5, 6, 7, 3], [4]]
    # after a full batch (batch_size rows) run_batches starts a new one anyway: no cut needed
    assert low_padding_runs(order, lengths, batch_size=7) == [[0, 1, 2, 5, 6, 7, 3, 4]]


@pytest.mark.parametrize("context", ["bos", "bias_bench"])
def test_grouped_scores_equal_the_full_recomputation(tiny_clm, context):
    arch, model, tok = tiny_clm
    groups, texts = zip(*TEXTS)
    stats = EngineStats()
    got = grouped_sentence_logprobs(model, tok, texts, groups, batch_size=4, stats=stats, context=context)
    full = sentence_logprobs(model, tok, texts, context=context)
    naive = naive_sentence_logprobs(model, tok, texts, context=context)
    np.testing.assert_allclose(got, full, rtol=0, atol=1e-5)
    np.testing.assert_allclose(got, naive, rtol=0, atol=1e-5)
    assert got[5] == got[7]
    assert stats.requests == len(texts) and stats.unique_inputs == len(set(texts))


@pytest.mark.parametrize("context", ["bos", "bias_bench"])
def test_without_the_prefix_terms_differences_within_a_group_stay(tiny_clm, context):
    """score_prefix=False (WinoGender: ll(prompt + choice) - ll(prompt)) leaves out what a group's texts share:
    every difference within a group equals the full scores', and a text of a shared group is worth less than
    its whole log-likelihood by exactly its prefix's terms (the same for every member of the group)."""
    arch, model, tok = tiny_clm
    groups, texts = zip(*TEXTS)
    stats = EngineStats()
    short = grouped_sentence_logprobs(
        model, tok, texts, groups, batch_size=4, stats=stats, context=context, score_prefix=False
    )
    full = sentence_logprobs(model, tok, texts, context=context)
    for g in dict.fromkeys(groups):
        members = [i for i, name in enumerate(groups) if name == g]
        np.testing.assert_allclose(np.diff(short[members]), np.diff(full[members]), rtol=0, atol=1e-5)
        prefix_terms = full[members] - short[members]
        np.testing.assert_allclose(prefix_terms, prefix_terms[0], rtol=0, atol=1e-5)
        shared_prefix = g in ("blank", "choice", "nested")
        assert (abs(prefix_terms[0]) > 1e-3) == shared_prefix, (g, prefix_terms)  # read in full: nothing left out
    assert stats.requests == len(texts)


def test_a_model_without_logits_to_keep_gives_the_same_numbers(tiny_clm, monkeypatch):
    """A forward without ``logits_to_keep`` computes every position's logits; the scored ones are taken."""
    _, model, tok = tiny_clm
    groups, texts = zip(*TEXTS)
    kept = grouped_sentence_logprobs(model, tok, texts, groups, batch_size=4)
    monkeypatch.setattr(scored_logits, "keeps_logits", lambda model: False)
    every = grouped_sentence_logprobs(model, tok, texts, groups, batch_size=4)
    np.testing.assert_allclose(every, kept, rtol=0, atol=1e-5)
    np.testing.assert_allclose(every, sentence_logprobs(model, tok, texts), rtol=0, atol=1e-5)


def test_group_keys_must_match_the_texts(tiny_clm):
    _, model, tok = tiny_clm
    with pytest.raises(ValueError, match="group keys"):
        grouped_sentence_logprobs(model, tok, ["a b", "a c"], ["g"])


@pytest.fixture(scope="module")
def real_subset(shared_data):
    """Real StereoSet dev intrasentence examples of every domain: the first 120 of each (1,440 sentences)."""
    items = parse_stereoset(shared_data / "stereoset" / "stereoset_dev_flat.jsonl")
    parts = []
    for bias_type in ("gender", "profession", "race", "religion"):
        part = items.filter(pc.equal(items["bias_type"], bias_type))
        parts.append(part.slice(0, 360))
    return pa.concat_tables(parts)


@pytest.mark.parametrize("context", ["bos", "bias_bench"])
def test_stereoset_shared_prefix_equals_full_scoring_on_real_dev_items(tiny_clm, real_subset, context):
    """`shared_prefix: true` equals the reference (`false`, the default) per candidate to 1e-5, float32."""
    _, model, tok = tiny_clm
    cached = score_stereoset(
        real_subset, LanguageModel(model, tok, "clm"), {"clm_context": context, "shared_prefix": True}
    )
    full = score_stereoset(real_subset, LanguageModel(model, tok, "clm"), {"clm_context": context})
    assert cached.column("sentence_id").to_pylist() == full.column("sentence_id").to_pylist()
    same = ["sum_logprob", "mean_prob"]  # mean_prob is NaN for clm (NaN != NaN)
    assert cached.drop_columns(same).equals(full.drop_columns(same))
    got = np.asarray(cached.column("sum_logprob").to_pylist())
    want = np.asarray(full.column("sum_logprob").to_pylist())
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_stereoset_shared_prefix_option_is_checked(tiny_clm, real_subset):
    _, model, tok = tiny_clm
    with pytest.raises(ConfigError, match="shared_prefix"):
        score_stereoset(real_subset.slice(0, 3), LanguageModel(model, tok, "clm"), {"shared_prefix": "yes"})
