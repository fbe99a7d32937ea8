"""Trainer options that reproduce bias-bench's (Meade et al. 2022) CDA/Dropout training data
(experiments/run_mlm.py, run_clm.py): texts packed into blocks (HF group_texts) and gender CDA on the
blocks. Their computation is transcribed here from their code and compared on tiny models."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.methods import resolution
from lmbias.training.data import Corpus
from lmbias.training.jobs import train_job
from lmbias.training.packing import augment_blocks, bias_bench_swap_map, load_bias_bench_pairs, pack_blocks
from lmbias.training.settings import TrainingSettings
from lmbias.training.trainer import Trainer, make_accelerator

#: A few pairs of their data/bias_attribute_words.json "gender" list, in their order (his/her after
#: him/her, guy/girl after boy/girl, mr./ms. after mr./mrs.: later pairs overwrite earlier swaps).
THEIR_PAIRS = [
    ["boy", "girl"],
    ["boys", "girls"],
    ["guy", "girl"],
    ["he", "she"],
    ["him", "her"],
    ["his", "her"],
    ["man", "woman"],
    ["mr.", "mrs."],
    ["mr.", "ms."],
]
TEXTS = [
    "The doctor went to the city.",
    "He said his sister was tired.",
    "The nurse went home early.",
    "The teacher asked the students about the new house in the city.",
    "Mr. Smith met her at the school.",
    "The lawyer read the book.",
    "The boys played, and the girl said: he?",
    "The city was quiet at night.",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-bias-bench")
    return {arch: build_tiny_model(arch, root / arch, seed=0) for arch in ("bert", "gpt2")}


@pytest.fixture(scope="module")
def tokenizers(tiny):
    return {
        arch: load_model(model_spec(f"tiny-{arch}", {"path": str(p), "family": FAMILY_OF[arch]}))[1]
        for arch, p in tiny.items()
    }


@pytest.fixture
def words_file(tmp_path) -> Path:
    path = tmp_path / "bias_attribute_words.json"
    path.write_text(json.dumps({"gender": THEIR_PAIRS, "race": [["black", "white", "asian"]]}))
    return path


# ------------------------------------------------------------------------------------ their computation


def their_group_texts(tok, texts, block, group=1000):
    """run_mlm/run_clm: tokenize (special tokens added), then per map batch of `group` texts concatenate and
    cut into `block`-token chunks, dropping the remainder unless the batch is shorter than one block."""
    out = []
    for start in range(0, len(texts), group):
        ids, special = [], []
        for text in texts[start : start + group]:
            enc = tok(text, return_special_tokens_mask=True)
            ids += enc["input_ids"]
            special += enc["special_tokens_mask"]
        n = len(ids)
        if n >= block:
            n = (n // block) * block
        out += [(ids[i : i + block], special[i : i + block]) for i in range(0, n, block)]
    return out


def their_gender_cda(tok, blocks, pairs, max_length):
    """_create_bias_attribute_words + gender_counterfactual_augmentation (run_mlm.py), with transformers
    4.16's decode (clean-up on; the tiny BERT is WordPiece, whose decode still cleans up here)."""
    attribute_words = [list(p) for p in pairs]
    for mark in [".", ",", "?", "!", ";", ":"]:
        for pair in pairs:
            attribute_words.append([w + mark for w in pair])
    outputs = []
    for ids in blocks:
        sentence = tok.decode(ids, clean_up_tokenization_spaces=True)
        words = sentence.split()
        augmented_sentence = words[:]
        augmented = False
        for position, word in enumerate(words):
            for male, female in attribute_words:
                if male == word:
                    augmented = True
                    augmented_sentence[position] = female
                if female == word:
                    augmented = True
                    augmented_sentence[position] = male
        if augmented:
            outputs.append(" ".join(augmented_sentence))
            outputs.append(sentence)
    enc = tok(
        outputs, return_special_tokens_mask=True, add_special_tokens=False, truncation=True, max_length=max_length
    )
    return outputs, list(zip(enc["input_ids"], enc["special_tokens_mask"]))


# ------------------------------------------------------------------------------------------- settings


def test_settings_defaults_unchanged_and_bad_values_name_the_key(words_file):
    s = TrainingSettings.from_dict({"objective": "mlm"})
    assert (s.pack_texts, s.block_augmentation, s.block_augmentation_words) == (False, None, None)
    ok = {
        "objective": "mlm",
        "pack_texts": True,
        "block_augmentation": "bias_bench_gender",
        "block_augmentation_words": str(words_file),
    }
    assert TrainingSettings.from_dict(ok).block_augmentation == "bias_bench_gender"
    bad = [
        ({"pack_texts": "yes"}, "settings.pack_texts"),
        ({"objective": "infilling", "pack_texts": True}, "settings.pack_texts"),
        ({"objective": "gpr", "pack_texts": True}, "settings.pack_texts"),
        ({"pack_texts": True, "er_lambda": 1.0}, "settings.pack_texts"),
        ({"pack_texts": True, "whole_word_masking": True}, "settings.pack_texts"),
        ({"block_augmentation": "gender"}, "settings.block_augmentation"),
        ({"pack_texts": False}, "settings.block_augmentation"),
        ({"block_augmentation_words": None}, "settings.block_augmentation_words"),
        ({"block_augmentation_words": ""}, "settings.block_augmentation_words"),
        ({"block_augmentation": None}, "settings.block_augmentation_words"),
    ]
    for change, key in bad:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.") + r"\b"):
            TrainingSettings.from_dict({**ok, **change})
    # a recipe entry may set them per family (bias-bench's GPT-2 "CDA" trained on unaugmented blocks)
    entry = {
        "kind": "cda",
        "corpus": "c.parquet",
        "training": {
            "pack_texts": True,
            "block_augmentation": {"mlm": "bias_bench_gender"},
            "block_augmentation_words": {"mlm": str(words_file)},
        },
    }
    mlm = resolution.resolve_method("m", {"family": "mlm"}, "cda-biasbench", entry)["settings"]
    clm = resolution.resolve_method("m", {"family": "clm"}, "cda-biasbench", entry)["settings"]
    assert mlm["block_augmentation"] == "bias_bench_gender" and "block_augmentation" not in clm
    with pytest.raises(ConfigError, match=r"methods\.cda-biasbench\.training\.block_augmentation\b"):
        resolution.resolve_method(
            "m", {"family": "mlm"}, "cda-biasbench", {**entry, "training": {"block_augmentation": "bias_bench_gender"}}
        )


def test_word_pairs_file_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="nowhere.json"):
        load_bias_bench_pairs(tmp_path / "nowhere.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gender": [["he", "she"], ["his"]]}))
    with pytest.raises(DataError, match=r"bad\.json.*gender\[1\]"):
        load_bias_bench_pairs(bad)
    bad.write_text(json.dumps({"race": [["a", "b"]]}))
    with pytest.raises(DataError, match=r"bad\.json"):
        load_bias_bench_pairs(bad)


def test_swap_map_punctuated_forms_and_last_pair_wins():
    swap = bias_bench_swap_map([tuple(p) for p in THEIR_PAIRS])
    assert swap["he"] == "she" and swap["she"] == "he" and swap["he."] == "she." and swap["she:"] == "he:"
    assert swap["her"] == "his" and swap["her,"] == "his," and swap["girl"] == "guy" and swap["girls"] == "boys"
    assert swap["mr."] == "ms." and swap["mrs.?"] == "mr.?" and swap["boy"] == "girl"
    assert "he's" not in swap and "He" not in swap  # whole whitespace words only, case-sensitive


# -------------------------------------------------------------------------------------------- packing


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
@pytest.mark.parametrize("group", [1000, 3, 1])
def test_packing_equals_their_group_texts(tokenizers, arch, group):
    tok = tokenizers[arch]
    texts = TEXTS * 3 + ["He left."]  # the last one shorter than a block
    block = 8
    ours = pack_blocks(tok, texts, block, group_texts=group)
    theirs = their_group_texts(tok, texts, block, group)
    assert [(b.ids, b.special) for b in ours] == theirs
    stream = [t for text in texts for t in tok(text)["input_ids"]]
    if group == 1000:  # one group: the concatenated stream cut into whole blocks, the remainder dropped
        assert all(len(b.ids) == block for b in ours)
        assert [t for b in ours for t in b.ids] == stream[: len(stream) // block * block]
    if group == 1:  # every text is its own group: short texts stay one short block, long ones lose the rest
        assert any(len(b.ids) < block for b in ours) and sum(len(b.ids) for b in ours) < len(stream)
    if arch == "bert":  # [CLS]/[SEP] inside the blocks are marked special (never masked), as their collator
        assert all(s == (t in (tok.cls_token_id, tok.sep_token_id)) for b in ours for t, s in zip(b.ids, b.special))


# ------------------------------------------------------------------------------------ CDA on the blocks


def test_block_augmentation_equals_their_cda(tokenizers, words_file):
    tok = tokenizers["bert"]
    block = 12
    blocks = pack_blocks(tok, TEXTS, block)
    swap = bias_bench_swap_map(load_bias_bench_pairs(words_file))
    ours = augment_blocks(tok, blocks, swap, block)
    texts, theirs = their_gender_cda(tok, [b.ids for b in blocks], THEIR_PAIRS, block)
    assert [(e.ids, e.special) for e in ours] == theirs
    # some blocks dropped, some kept, each kept block twice: swapped first, then as it was
    gendered = [
        b for b in blocks if any(w in swap for w in tok.decode(b.ids, clean_up_tokenization_spaces=True).split())
    ]
    assert 0 < len(gendered) < len(blocks) and len(ours) == 2 * len(gendered)
    assert [e.ids for e in ours[1::2]] == [
        tok(tok.decode(b.ids, clean_up_tokenization_spaces=True), add_special_tokens=False)["input_ids"][:block]
        for b in gendered
    ]
    swapped = " ".join(texts[0::2])
    assert "she said her sister" in swapped  # he -> she, his -> her
    assert "ms. smith met his" in swapped  # mr. -> ms. (the later pair), her -> his (the later pair)
    # attached punctuation (he? -> she?); girl -> guy (the later pair); boys -> girls. WordPiece decodes ":"
    # (and ";") spaced off, so their ":" and ";" forms never match there
    assert "girls played, and the guy said : she?" in swapped
    # [CLS]/[SEP] were decoded into the text: re-tokenised as tokens of the text, not marked special
    assert tok.cls_token_id in ours[0].ids and not any(ours[0].special)


def test_trainer_builds_the_packed_and_augmented_examples(tiny, tokenizers, words_file):
    model, tok = load_model(model_spec("tiny-bert", {"path": str(tiny["bert"]), "family": "mlm"}))
    settings = TrainingSettings.from_dict(
        {
            "objective": "mlm",
            "batch_size": 2,
            "epochs": 1,
            "max_length": 12,
            "pack_texts": True,
            "block_augmentation": "bias_bench_gender",
            "block_augmentation_words": str(words_file),
        }
    )
    trainer = Trainer(model, tok, "mlm", Corpus(list(TEXTS)), settings, 0, None, "test", make_accelerator("fp32"))
    expected = augment_blocks(
        tok, pack_blocks(tok, TEXTS, 12), bias_bench_swap_map(load_bias_bench_pairs(words_file)), 12
    )
    assert [e.ids for e in trainer.examples] == [e.ids for e in expected]
    neutral = ["The doctor went to the city.", "The nurse went home early."] * 4
    with pytest.raises(DataError, match="no block"):
        Trainer(
            model,
            tok,
            "mlm",
            Corpus(neutral, path="neutral.parquet"),
            settings,
            0,
            None,
            "test",
            make_accelerator("fp32"),
        )


# ----------------------------------------------------------------------------------- training end to end


@pytest.mark.parametrize("arch,objective", [("bert", "mlm"), ("gpt2", "clm")])
def test_a_few_steps_on_packed_augmented_blocks(tiny, tokenizers, words_file, tmp_path, arch, objective):
    corpus = tmp_path / "texts.parquet"
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in TEXTS * 4]), corpus)
    out = tmp_path / "model"
    settings = {
        "objective": objective,
        "batch_size": 4,
        "max_steps": 3,
        "epochs": 50,
        "learning_rate": 1e-3,
        "max_length": 16,
        "precision": "fp32",
        "group_by_length": False,
        "pack_texts": True,
        "block_augmentation": "bias_bench_gender",
        "block_augmentation_words": str(words_file),
    }
    train_job({"path": str(tiny[arch]), "family": FAMILY_OF[arch]}, f"tiny-{arch}", str(corpus), str(out), 0, settings)
    info = json.loads((out / "training.json").read_text())
    tok = tokenizers[arch]
    expected = augment_blocks(
        tok, pack_blocks(tok, TEXTS * 4, 16), bias_bench_swap_map(load_bias_bench_pairs(words_file)), 16
    )
    assert info["steps"] == 3 and info["training_examples"] == len(expected) > 0
    assert len(info["block_augmentation_words_sha256"]) == 64
    losses = [r["loss"] for r in pq.read_table(out / "train_log.parquet").to_pylist()]
    assert len(losses) == 3 and all(math.isfinite(v) and v > 0 for v in losses)
