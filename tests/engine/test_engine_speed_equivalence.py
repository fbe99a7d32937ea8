"""The batched engine gives the naive loop's numbers (to 1e-5) on the request shapes BEC-Pro, StereoSet and
CrowS-Pairs issue: TM/TAM texts with several masks, token-id requests with several masked pieces, and
pseudo-log-likelihood requests -- on tiny models of every family. No timing here (bench/scoring_engine.py)."""

from __future__ import annotations

import numpy as np
import pytest

from lmbias.engine.batching import EngineStats
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.oracles import (
    naive_infill_logprobs,
    naive_infill_logprobs_ids,
    naive_masked_logprobs,
    naive_masked_logprobs_ids,
    naive_sentence_logprobs,
)
from lmbias.engine.pll import content_positions, encode, naive_token_logprobs, token_logprobs
from lmbias.engine.scoring import (
    InfillIdsRequest,
    InfillRequest,
    MaskedIdsRequest,
    MaskedRequest,
    infill_logprobs,
    infill_logprobs_ids,
    masked_logprobs,
    masked_logprobs_ids,
    sentence_logprobs,
    word_token_ids,
)
from lmbias.engine.tiny import build_tiny_model
from lmbias.parsers.bec_pro_generator import generate

FAMILY = {"bert": "mlm", "roberta": "mlm", "gpt2": "clm", "bart": "seq2seq"}
PATTERNS = ["{} is a {}.", "{}, the {}, had a good day at work.", "{} applied for the position of {}."]
PROFESSIONS = {"male": ["mobile equipment mechanic", "plumber"], "female": ["kindergarten teacher", "nurse"]}
PERSONS = {"male": ["he", "my brother", "this man"], "female": ["she", "my sister", "this woman"]}


@pytest.fixture(scope="module", params=sorted(FAMILY))
def tiny(request, tmp_path_factory):
    arch = request.param
    out = tmp_path_factory.mktemp(f"engine-{arch}") / arch
    build_tiny_model(arch, out, seed=0)
    spec = model_spec(f"tiny-{arch}", {"path": str(out), "family": FAMILY[arch], "revision": "local"})
    model, tok = load_model(spec)
    return arch, FAMILY[arch], model, tok


def _rows():
    return generate("en", PATTERNS, PROFESSIONS, PERSONS)


def _close(fast, slow):
    np.testing.assert_allclose(
        np.concatenate([np.atleast_1d(x) for x in fast]),
        np.concatenate([np.atleast_1d(x) for x in slow]),
        atol=1e-5,
        rtol=0,
    )


def test_bec_pro_style_tm_tam_requests(tiny):
    """TM and TAM texts (TAM holds 2-4 masks): the target at mask 0, and every other mask too."""
    arch, family, model, tok = tiny
    rows = _rows()
    stats = EngineStats()
    if family == "clm":
        texts = [r["Sentence"] for r in rows]
        fast = sentence_logprobs(model, tok, texts, batch_size=5, stats=stats)
        slow = naive_sentence_logprobs(model, tok, texts)
        _close(fast, slow)
        return
    requests = []
    for r in rows:
        after_space = not r["Sent_TM"].startswith("[MASK]")
        cand = tuple(word_token_ids(tok, w, after_space)[0] for w in (r["Person"], "she", "he"))
        for text in (r["Sent_TM"], r["Sent_TAM"]):
            text = text.replace("[MASK]", tok.mask_token)
            for k in range(text.count(tok.mask_token)):
                requests.append((text, k, cand))
    if family == "mlm":
        reqs = [MaskedRequest(text=t, candidates=c, mask_index=k) for t, k, c in requests]
        fast = masked_logprobs(model, tok, reqs, batch_size=7, stats=stats)
        slow = naive_masked_logprobs(model, tok, reqs)
    else:
        reqs = [
            InfillRequest(masked_text=t, prefix=t.split(tok.mask_token)[0].rstrip(" "), candidates=c)
            for t, k, c in requests
            if k == 0
        ]
        fast = infill_logprobs(model, tok, reqs, batch_size=7, stats=stats)
        slow = naive_infill_logprobs(model, tok, reqs)
    _close(fast, slow)
    # TM/TAM contexts are shared between person words and professions: far fewer inputs than requests.
    assert stats.unique_inputs < stats.requests / 2


def test_token_id_requests_with_several_masked_pieces(tiny):
    """StereoSet-style: a word's later pieces masked while earlier ones are filled in."""
    arch, family, model, tok = tiny
    if family == "clm":
        pytest.skip("token-id mask requests are for masked and encoder-decoder models")
    stats = EngineStats()
    sentences = [
        "The schoolgirl was very triangle in class.",
        "All the gentlemen in the room were carrots.",
        "My sister wants to become a phlebotomist.",
    ]
    if family == "mlm":
        reqs = []
        for s in sentences:
            ids = encode(tok, s)
            inner = content_positions(tok, ids)
            span = inner[-4:-1]  # three consecutive pieces
            for j, pos in enumerate(span):
                masked = list(ids)
                for p in span[j:]:
                    masked[p] = tok.mask_token_id
                reqs.append(MaskedIdsRequest(input_ids=tuple(masked), position=pos, candidates=(ids[pos], 5, 7)))
        reqs.append(reqs[0])  # a duplicate
        fast = masked_logprobs_ids(model, tok, reqs, batch_size=3, stats=stats)
        slow = naive_masked_logprobs_ids(model, tok, reqs)
    else:
        start = model.config.decoder_start_token_id
        reqs = []
        for s in sentences:
            ids = encode(tok, s)
            enc = tuple(encode(tok, s.rsplit(" ", 1)[0] + " " + tok.mask_token))
            for pos in range(1, len(ids)):  # every decoder prefix: served by one decoder run
                reqs.append(
                    InfillIdsRequest(encoder_ids=enc, decoder_ids=tuple([start] + ids[:pos]), candidates=(ids[pos], 5))
                )
        fast = infill_logprobs_ids(model, tok, reqs, batch_size=2, stats=stats)
        slow = naive_infill_logprobs_ids(model, tok, reqs)
        assert stats.unique_inputs == len(sentences)  # prefix sharing: one run per encoder input
    _close(fast, slow)


def test_pseudo_log_likelihood_equals_naive(tiny):
    arch, family, model, tok = tiny
    if family == "clm":
        pytest.skip("pseudo-log-likelihood is for masked and encoder-decoder models")
    texts = ["Women don't know how to drive.", "Men don't know how to drive.", "He is a nurse."]
    seqs = [encode(tok, t) for t in texts]
    where = [content_positions(tok, s) for s in seqs]
    fast = token_logprobs(model, tok, family, seqs, where, batch_size=4)
    slow = naive_token_logprobs(model, tok, family, seqs, where)
    assert [len(f) for f in fast] == [len(w) for w in where]
    _close(fast, slow)
