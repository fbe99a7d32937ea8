"""Classifier scorers (lmbias.engine.classifiers) on tiny classifiers built here (lmbias.engine.tiny_classifier):
planted outputs come back exactly, labels resolve by name with errors that name the key, batched scores equal
one-by-one scores, sigmoid vs softmax follows problem_type, and the readings of a planted classifier are known."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from lmbias.engine.batching import EngineStats
from lmbias.engine.classifiers import (
    GENERATIONS_KEY_METADATA,
    classification_key,
    classify_generations,
    label_probabilities,
    load_classifier,
    naive_label_probabilities,
    resolve_labels,
    scorer_spec,
)
from lmbias.engine.hub import SOURCE_FILE
from lmbias.engine.tiny_classifier import build_tiny_classifier
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.classifier_scores import SCORER_METADATA, ClassifierScoreOptions, classifier_metric_rows
from lmbias.metrics.score_keys import SCORE_KEY_METADATA

WORDS = ["he", "she", "was", "an", "actor", "actress", "terrible", "wonderful", "nice", "man", "woman", "film"]
TOXIC_IN, TOXIC_OUT = 1 / (1 + math.exp(-4.0)), 1 / (1 + math.exp(4.0))  # planted margin 4: sigmoid(+-4)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("classifiers")
    words = root / "words.txt"
    words.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return {
        "toxic": build_tiny_classifier(
            root / "toxic", ("neutral", "toxic"), planted={"terrible": "toxic"}, words=words
        ),
        "regard": build_tiny_classifier(
            root / "regard",
            ("negative", "neutral", "positive", "other"),
            planted={"terrible": "negative", "wonderful": "positive"},
            default_label="neutral",
            words=words,
        ),
        "bert": build_tiny_classifier(root / "bert", ("a", "b", "c"), seed=3, words=words),
        "roberta": build_tiny_classifier(
            root / "roberta", ("a", "b", "c"), architecture="roberta", seed=3, words=words
        ),
        "mixed": build_tiny_classifier(root / "mixed", ("negative", "neutral", "positive", "mixed"), words=words),
        "multi": build_tiny_classifier(
            root / "multi",
            ("toxic", "insult", "threat"),
            problem_type="multi_label_classification",
            seed=1,
            words=words,
        ),
    }


def _generations(rows) -> pa.Table:
    """A BOLD-like generations table from (prompt_id, group, gender, prompt, sample, continuation) rows."""
    names = ("prompt_id", "group", "gender", "prompt", "sample", "continuation")
    table = pa.Table.from_pylist([dict(zip(names, r)) for r in rows])
    return table.replace_schema_metadata({SCORE_KEY_METADATA: "gen-key", "lmbias.generation": "{}"})


def _bold_table() -> pa.Table:
    """Actors: 3 prompts x 2 samples, 2 prompts with one "terrible" sample each; actresses: 3 prompts x 2 samples,
    1 prompt with both samples "terrible"."""
    rows = []
    male = [["he was terrible", "he was nice"], ["a nice film", "Terrible, he was."], ["he was an actor", "nice"]]
    female = [["she was terrible", "terrible film"], ["she was nice", "a wonderful actress"], ["she", ""]]
    for pid, samples in enumerate(male):
        rows += [(pid, "American_actors", "male", f"Actor {pid} ", k, t) for k, t in enumerate(samples)]
    for pid, samples in enumerate(female, start=10):
        rows += [(pid, "American_actresses", "female", f"Actress {pid} ", k, t) for k, t in enumerate(samples)]
    return _generations(rows)


def test_the_planted_toxicity_classifier_gives_its_known_probabilities(folders):
    entry = {"kind": "toxicity", "path": str(folders["toxic"])}
    out = classify_generations("tox", entry, _bold_table(), device="cpu", benchmark="bold")
    texts = out.column("continuation").to_pylist()
    expected = [TOXIC_IN if "terrible" in t.lower() else TOXIC_OUT for t in texts]
    np.testing.assert_allclose(out.column("toxicity").to_pylist(), expected, atol=1e-6)
    assert out.column("label").to_pylist() == ["toxic" if "terrible" in t.lower() else "neutral" for t in texts]
    assert out.column_names[:6] == ["prompt_id", "group", "gender", "prompt", "sample", "continuation"]
    metadata = {k.decode(): v.decode() for k, v in out.schema.metadata.items()}
    assert metadata[GENERATIONS_KEY_METADATA] == "gen-key" and SCORE_KEY_METADATA not in metadata
    assert metadata["lmbias.generation"] == "{}"  # the generations' own provenance is kept
    record = json.loads(metadata[SCORER_METADATA])
    assert record["kind"] == "toxicity" and record["benchmark"] == "bold" and record["activation"] == "softmax"
    assert record["labels"] == {"toxic": "toxic"} and record["model_labels"] == ["neutral", "toxic"]
    assert record["threshold"] == 0.5 and record["text"] == "continuation" and record["truncated"] == 0
    assert record["source"] == str(folders["toxic"]) and "transformers_version" in json.dumps(record["versions"])


def test_the_planted_classifier_reads_the_prompt_only_when_asked(folders):
    table = _generations([(0, "American_actors", "male", "A terrible ", 0, "man")])
    entry = {"kind": "toxicity", "path": str(folders["toxic"])}
    alone = classify_generations("tox", entry, table, device="cpu").column("toxicity")[0].as_py()
    joined = classify_generations("tox", {**entry, "text": "prompt_and_continuation"}, table, device="cpu")
    assert alone == pytest.approx(TOXIC_OUT, abs=1e-6)
    assert joined.column("toxicity")[0].as_py() == pytest.approx(TOXIC_IN, abs=1e-6)


def test_the_planted_toxicity_readings_are_the_hand_counted_ones(folders):
    entry = {"kind": "toxicity", "path": str(folders["toxic"]), "bootstrap": 200}
    classified = classify_generations("tox", entry, _bold_table(), device="cpu", benchmark="bold")
    rows = classifier_metric_rows(classified, ClassifierScoreOptions.from_config("tox", entry))
    got = {(r["metric"], r["subset"]): r for r in rows}
    # actors: prompts 0 and 1 have a toxic sample, prompt 2 none; 2 of 6 texts toxic
    male_emt = (TOXIC_IN + TOXIC_IN + TOXIC_OUT) / 3
    female_emt = (TOXIC_IN + TOXIC_OUT + TOXIC_OUT) / 3
    assert got[("expected_max_toxicity", "American_actors")]["value"] == pytest.approx(male_emt, abs=1e-6)
    assert got[("expected_max_toxicity", "American_actresses")]["value"] == pytest.approx(female_emt, abs=1e-6)
    assert got[("toxicity_probability", "American_actors")]["value"] == pytest.approx(2 / 3)
    assert got[("toxicity_probability", "American_actresses")]["value"] == pytest.approx(1 / 3)
    assert got[("toxic_share", "American_actors")]["value"] == pytest.approx(100 * 2 / 6)
    assert got[("toxic_share", "American_actresses")]["value"] == pytest.approx(100 * 2 / 6)
    assert got[("toxicity_probability_gap", "male-female")]["value"] == pytest.approx(1 / 3)
    assert got[("expected_max_toxicity_gap", "male-female")]["value"] == pytest.approx(male_emt - female_emt, abs=1e-6)
    assert got[("toxic_share_gap", "male-female")]["value"] == pytest.approx(0.0)
    assert got[("toxicity_probability", "all")]["value"] == pytest.approx(3 / 6)
    assert got[("toxicity_probability", "all")]["n"] == 6 and got[("toxic_share", "all")]["n"] == 12
    assert {r["variant"] for r in rows} == {"tox,toxic>=0.5"} and {r["benchmark"] for r in rows} == {"bold"}


def test_the_planted_regard_classifier_gives_each_text_its_role(folders):
    entry = {"kind": "regard", "path": str(folders["regard"])}
    out = classify_generations("reg", entry, _bold_table(), device="cpu")
    texts = [t.lower() for t in out.column("continuation").to_pylist()]
    want = ["negative" if "terrible" in t else "positive" if "wonderful" in t else "neutral" for t in texts]
    assert out.column("regard").to_pylist() == want
    # no planted word: logits (-4, 0, -4, -4); a negative or positive one: (4, 0, -4, -4) or (-4, 0, 4, -4)
    neutral = [
        1 / (1 + 3 * math.exp(-4.0)) if w == "neutral" else 1 / (1 + math.exp(4.0) + 2 * math.exp(-4.0)) for w in want
    ]
    np.testing.assert_allclose(out.column("regard_neutral").to_pylist(), neutral, atol=1e-6)
    rows = classifier_metric_rows(out, ClassifierScoreOptions.from_config("reg", entry), benchmark="bold")
    got = {(r["metric"], r["subset"]): r["value"] for r in rows}
    # actresses: 6 texts, 2 terrible (negative), 1 wonderful (positive); actors: 2 terrible of 6
    assert got[("regard_negative_share", "American_actresses")] == pytest.approx(100 * 2 / 6)
    assert got[("regard_positive_share", "American_actresses")] == pytest.approx(100 * 1 / 6)
    assert got[("regard_positive_share", "American_actors")] == pytest.approx(0.0)
    assert got[("regard_positive_share_gap", "male-female")] == pytest.approx(-100 / 6)
    assert got[("regard_other_share", "all")] == pytest.approx(0.0)
    assert {r["variant"] for r in rows} == {"reg"}


def test_labels_resolve_by_name_ignoring_case_or_by_index(folders):
    model, _ = load_classifier(scorer_spec("t", {"kind": "toxicity", "path": str(folders["toxic"])}))
    for label in ("toxic", "TOXIC", 1):
        spec = scorer_spec("t", {"kind": "toxicity", "path": str(folders["toxic"]), "labels": {"toxic": label}})
        assert resolve_labels(spec, model.config) == {"toxic": 1}


def test_a_missing_label_names_the_key_and_the_models_labels(folders):
    entry = {"kind": "toxicity", "path": str(folders["toxic"]), "labels": {"toxic": "hateful"}}
    with pytest.raises(ConfigError, match=r"scorers\.tox\.labels\.toxic: .*no label 'hateful'.*0: neutral, 1: toxic"):
        classify_generations("tox", entry, _bold_table(), device="cpu")
    multi = {"kind": "regard", "path": str(folders["multi"])}  # labels toxic, insult, threat: no regard role
    with pytest.raises(ConfigError, match=r"scorers\.r\.labels\.positive: .*no label 'positive'"):
        classify_generations("r", multi, _bold_table(), device="cpu")
    partial = {**multi, "labels": {"positive": "toxic", "negative": "insult", "neutral": 2}}
    spec = scorer_spec("r", partial)
    model, _ = load_classifier(spec)
    assert resolve_labels(spec, model.config) == {"positive": 0, "negative": 1, "neutral": 2}  # no `other`: fine
    mixed = scorer_spec("r", {"kind": "regard", "path": str(folders["mixed"])})
    with pytest.raises(ConfigError, match=r"scorers\.r\.labels: .*label\(s\) mixed have no role.*labels\.other: mixed"):
        resolve_labels(mixed, load_classifier(mixed)[0].config)
    with pytest.raises(ConfigError, match=r"scorers\.r\.labels\.other: .*'nope'"):
        resolve_labels(scorer_spec("r", {**partial, "labels": {**partial["labels"], "other": "nope"}}), model.config)


def test_scorer_entries_are_checked_with_their_keys(folders, tmp_path):
    with pytest.raises(ConfigError, match=r"scorers\.s\.labels\.positive: not a role of kind toxicity"):
        scorer_spec("s", {"kind": "toxicity", "path": "x", "labels": {"positive": "a"}})
    with pytest.raises(ConfigError, match=r"scorers\.s: needs exactly one of: path, hub_id"):
        scorer_spec("s", {"kind": "toxicity", "path": "x", "hub_id": "y"})
    with pytest.raises(ConfigError, match=r"scorers\.s\.thresold: unknown key"):
        scorer_spec("s", {"kind": "toxicity", "path": "x", "thresold": 0.4})
    with pytest.raises(ConfigError, match=r"scorers\.s\.path: classifier folder .* does not exist"):
        load_classifier(scorer_spec("s", {"kind": "toxicity", "path": str(tmp_path / "none")}))
    mlm = tmp_path / "mlm"
    mlm.mkdir()
    (mlm / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(ConfigError, match=r"scorers\.s: .*BertForMaskedLM checkpoint, not a sequence classifier"):
        load_classifier(scorer_spec("s", {"kind": "toxicity", "path": str(mlm)}))
    with pytest.raises(DataError, match="no column 'prompt'"):
        classify_generations(
            "s",
            {"kind": "toxicity", "path": str(folders["toxic"]), "text": "prompt_and_continuation"},
            _bold_table().drop(["prompt"]),
        )


def test_honest_completions_are_classified_and_read_per_category(folders):
    rows = [
        {
            "template_id": t,
            "template": f"the {who} was a [M].",
            "identity": f"the {who}",
            "category": category,
            "rank": k,
            "completion": completion,
        }
        for t, (who, category, completions) in enumerate(
            [
                ("man", "male", ["terrible", "nice"]),
                ("woman", "female", ["nice", "film"]),
                ("woman", "female", ["actress", "nice"]),
            ]
        )
        for k, completion in enumerate(completions)
    ]
    table = pa.Table.from_pylist(rows)
    entry = {"kind": "toxicity", "path": str(folders["toxic"]), "bootstrap": 0}
    out = classify_generations("tox", entry, table, device="cpu", benchmark="honest")
    assert out.column("label").to_pylist() == ["toxic"] + ["neutral"] * 5
    got = {
        (r["metric"], r["subset"]): r
        for r in classifier_metric_rows(out, ClassifierScoreOptions.from_config("tox", entry))
    }
    assert got[("toxicity_probability", "male")]["value"] == 1.0 and got[("toxicity_probability", "female")]["n"] == 2
    assert got[("toxic_share_gap", "male-female")]["value"] == pytest.approx(50.0)
    assert {r["benchmark"] for r in got.values()} == {"honest"}
    terrible = pa.Table.from_pylist([{**rows[2], "template": "a terrible [M] here"}])
    joined = classify_generations("tox", {**entry, "text": "prompt_and_continuation"}, terrible, device="cpu")
    assert joined.column("label").to_pylist() == ["toxic"]  # "a terrible nice": the text before [M], then a space
    assert classify_generations("tox", entry, terrible, device="cpu").column("label").to_pylist() == ["neutral"]


TEXTS = [
    "he was an actor",
    "",
    "a wonderful film , a nice man and a terrible actress who was nice",
    "she",
    "he was an actor",
    "Unseen words: zebra quokka 42!",
    "nice " * 30,
    "woman",
]


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_batched_probabilities_equal_one_text_at_a_time(folders, arch):
    model, tokenizer = load_classifier(scorer_spec("s", {"kind": "toxicity", "path": str(folders[arch])}))
    stats = EngineStats()
    batched, truncated = label_probabilities(model, tokenizer, TEXTS, batch_size=3, max_tokens=64, stats=stats)
    naive = naive_label_probabilities(model, tokenizer, TEXTS)
    np.testing.assert_allclose(batched, naive, atol=1e-6, rtol=0)
    assert truncated == 0 and stats.unique_inputs == len(set(TEXTS)) and stats.forward_passes >= 3
    np.testing.assert_allclose(batched.sum(axis=1), 1.0, atol=1e-9)
    assert batched.std(axis=0).max() > 0.01  # the random head spreads the probabilities: a mix-up would show
    short, truncated = label_probabilities(model, tokenizer, TEXTS, max_length=8)
    assert truncated == 3  # the three texts of more than 8 tokens
    np.testing.assert_allclose(short, naive_label_probabilities(model, tokenizer, TEXTS, max_length=8), atol=1e-6)


def test_a_multi_label_model_reads_sigmoids_and_a_single_label_one_softmax(folders):
    multi, tokenizer = load_classifier(scorer_spec("m", {"kind": "toxicity", "path": str(folders["multi"])}))
    enc = tokenizer(TEXTS[:3], padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = multi(**enc).logits.double()
    probs, _ = label_probabilities(multi, tokenizer, TEXTS[:3])
    np.testing.assert_allclose(probs, torch.sigmoid(logits).numpy(), atol=1e-6)
    assert not np.allclose(probs.sum(axis=1), 1.0)
    forced, _ = label_probabilities(multi, tokenizer, TEXTS[:3], activation="softmax")
    np.testing.assert_allclose(forced, torch.softmax(logits, -1).numpy(), atol=1e-6)
    single, tokenizer = load_classifier(scorer_spec("s", {"kind": "toxicity", "path": str(folders["bert"])}))
    enc = tokenizer(TEXTS[:3], padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = single(**enc).logits.double()
    np.testing.assert_allclose(
        label_probabilities(single, tokenizer, TEXTS[:3])[0], torch.softmax(logits, -1), atol=1e-6
    )
    sig, _ = label_probabilities(single, tokenizer, TEXTS[:3], activation="sigmoid")
    np.testing.assert_allclose(sig, torch.sigmoid(logits).numpy(), atol=1e-6)
    out = classify_generations("m", {"kind": "toxicity", "path": str(folders["multi"])}, _bold_table(), device="cpu")
    assert json.loads(out.schema.metadata[SCORER_METADATA.encode()])["activation"] == "sigmoid"


def test_the_planted_output_holds_for_one_word_among_many(folders):
    model, tokenizer = load_classifier(scorer_spec("t", {"kind": "toxicity", "path": str(folders["toxic"])}))
    long = " ".join(["nice"] * 400 + ["terrible"])
    probs, _ = label_probabilities(model, tokenizer, [long, "nice " * 400, "terrible " * 3 + "nice"])
    np.testing.assert_allclose(probs[:, 1], [TOXIC_IN, TOXIC_OUT, TOXIC_IN], atol=1e-6)


def test_the_classification_key_follows_what_the_numbers_depend_on(folders):
    entry = {"kind": "toxicity", "path": str(folders["toxic"])}
    key = classification_key("t", entry, "gen-key", folders["toxic"])
    assert key == classification_key(
        "t", {**entry, "threshold": 0.3, "bootstrap": 10, "max_tokens": 99}, "gen-key", folders["toxic"]
    )
    assert key != classification_key("t", entry, "other-generations", folders["toxic"])
    assert key != classification_key("t", {**entry, "text": "prompt_and_continuation"}, "gen-key", folders["toxic"])
    assert key != classification_key("t", entry, "gen-key", folders["regard"])


def test_a_hub_scorer_loads_offline_from_its_fetched_folder_and_records_the_commit(folders, tmp_path):
    fetched = tmp_path / "fetched"
    shutil.copytree(folders["toxic"], fetched)
    (fetched / SOURCE_FILE).write_text(json.dumps({"hub_id": "org/tox", "commit": "c0ffee" * 6 + "abcd"}))
    entry = {"kind": "toxicity", "hub_id": "org/tox", "revision": "main", "snapshot": str(fetched)}
    out = classify_generations("tox", entry, _bold_table(), device="cpu")
    record = json.loads(out.schema.metadata[SCORER_METADATA.encode()])
    assert record["source"] == "org/tox" and record["revision"] == "main" and record["commit"] == "c0ffee" * 6 + "abcd"
    with pytest.raises(ConfigError, match=r"scorers\.tox: org/tox has not been fetched into"):
        classify_generations("tox", {**entry, "snapshot": str(tmp_path / "nowhere")}, _bold_table(), device="cpu")
