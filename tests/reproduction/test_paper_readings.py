"""A paper's grid selects the readings its tables read (config.yaml `papers.<paper>.readings`): the checks, which
pairs hold which reading, the table cells and notes, the schema of a reading entry, and the shipped readings
against the peer table of docs/peers.md."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.paths import REPO_ROOT, TESTS
from lmbias.config import check_papers, config_errors
from lmbias.errors import ConfigError
from lmbias.methods.sweeps import expand_method_targets, expand_sweeps
from lmbias.papers.grid import is_reading, pair_readings, paper_readings, readings_stand_for, table_readings
from lmbias.papers.published import load_published_file
from lmbias.papers.table_render import write_table
from lmbias.papers.tables import apply_readings, build_table, reading_notes

ROOT = REPO_ROOT
FIXTURES = TESTS / "fixtures" / "published"

BENCHMARKS = {
    "seat_v1": {"dataset": "seat_templates", "version": "v1"},
    "seat_v1-dagender": {
        "dataset": "seat_templates",
        "version": "v1",
        "reading": "their code",
        "scoring": {"poolings": {"mlm": ["mean_padded"]}, "pad_to": 128},
    },
    "crows_pairs": {"dataset": "crows_pairs"},
    "crows_pairs-biasbench": {"dataset": "crows_pairs", "reading": "bias-bench's crows.py"},
    "crows_pairs_gender": {"dataset": "crows_pairs", "bias_types": ["gender"]},  # another entry, not a reading
    "perplexity_gap": {"dataset": "gap", "measure": "perplexity"},
    "gap": {"dataset": "gap"},
}
CONFIG = {
    "models": {"tiny-bert": {"family": "mlm"}, "tiny-gpt2": {"family": "clm"}},
    "methods": {
        "pretrained": {"kind": "pretrained"},
        "cds": {"kind": "cds", "corpus": "x"},
        "gpr-u": {"kind": "gpr", "corpus": "y"},
    },
    "benchmarks": BENCHMARKS,
}


def _config(**papers):
    return {**CONFIG, "papers": papers}


@pytest.mark.parametrize(
    "readings, message",
    [
        ({"seat_v9": "seat_v1-dagender"}, "papers.over_debiasing.readings.seat_v9: unknown benchmark 'seat_v9'"),
        ({"seat_v1": "seat_v1-dagendr"}, "papers.over_debiasing.readings.seat_v1: unknown benchmark 'seat_v1-dagendr'"),
        (
            {"seat_v1": "crows_pairs-biasbench"},
            "papers.over_debiasing.readings.seat_v1: 'crows_pairs-biasbench' reads another dataset",
        ),
        ({"gap": "perplexity_gap"}, "papers.over_debiasing.readings.gap: 'perplexity_gap' reads another measure"),
        (
            {"seat_v1-dagender": "seat_v1"},
            "papers.over_debiasing.readings.seat_v1-dagender: 'seat_v1-dagender' is itself a reading",
        ),
        (["seat_v1"], "papers.over_debiasing.readings: expected a mapping"),
    ],
)
def test_readings_config_errors_name_the_key(readings, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_papers(_config(over_debiasing={"models": ["tiny-bert"], "methods": ["pretrained"], "readings": readings}))


def test_pairs_hold_the_readings_of_every_grid_they_are_in():
    """One summary per pair: the readings of all the papers whose grids hold it (none for the others); an entry
    that is not a reading (crows_pairs_gender) is in every summary anyway and is not added."""
    config = _config(
        over_debiasing={
            "models": ["tiny-bert", "tiny-gpt2"],
            "methods": ["pretrained", "cds"],
            "readings": {"seat_v1": "seat_v1-dagender"},
        },
        meade2022={
            "models": ["tiny-gpt2"],
            "methods": ["pretrained", "gpr-u"],
            "readings": {"crows_pairs": "crows_pairs-biasbench", "seat_v1": "seat_v1-dagender"},
        },
        lu2018={"models": ["tiny-bert"], "methods": ["gpr-u"]},
    )
    check_papers(config)
    held = pair_readings(config)
    assert held[("tiny-gpt2", "pretrained")] == ["seat_v1-dagender", "crows_pairs-biasbench"]
    assert held[("tiny-bert", "cds")] == ["seat_v1-dagender"]
    assert ("tiny-bert", "gpr-u") not in held  # lu2018 selects no reading
    assert ("tiny-gpt2", "gpr-u") not in held  # not a pair: gpr needs a masked model
    assert paper_readings(config, "lu2018") == {}
    assert readings_stand_for(config) == {"seat_v1-dagender": ["seat_v1"], "crows_pairs-biasbench": ["crows_pairs"]}
    config["papers"]["meade2022"]["readings"] = {"crows_pairs": "crows_pairs_gender"}
    check_papers(config)
    assert ("tiny-gpt2", "gpr-u") not in pair_readings(config) and not is_reading(BENCHMARKS["crows_pairs_gender"])
    assert ("tiny-bert", "pretrained") in pair_readings(config)


def _row(model, method, bench, metric, variant, subset, value, seed="mean"):
    return {
        "model": model,
        "method": method,
        "seed": seed,
        "benchmark": bench,
        "metric": metric,
        "variant": variant,
        "subset": subset,
        "value": value,
        "p_value": math.nan,
        "n": 40,
    }


BERT = {"model": "bert-base", "method": "pretrained", "kind": "pretrained", "hub_id": "bert-base-uncased"}
BERT_CDS = {"model": "bert-base", "method": "cds", "kind": "cds", "hub_id": "bert-base-uncased"}


@pytest.fixture
def table7():
    return load_published_file(FIXTURES / "over_debiasing.yaml").tables["table7"]


def test_a_column_reads_its_reading_and_never_falls_back_to_the_default(tmp_path, table7):
    summaries = pd.DataFrame(
        [
            _row("bert-base", "pretrained", "seat_v1", "effect_size", "pooling=mean,ddof=1", "occupations-test", 0.70),
            _row(
                "bert-base",
                "pretrained",
                "seat_v1-dagender",
                "effect_size",
                "pooling=mean_padded128,ddof=0",
                "occupations-test",
                0.40,
            ),
            _row(
                "bert-base", "cds", "seat_v1", "effect_size", "pooling=mean,ddof=1", "occupations-test", 0.50
            ),  # no reading rows
            _row("bert-base", "pretrained", "seat_v2", "effect_size", "pooling=mean,ddof=1", "occupations-test", 0.30),
        ]
    )
    column = next(c for c in table7.columns if c.benchmark == "seat_v1")
    seat_v2 = next(c for c in table7.columns if c.benchmark == "seat_v2")
    readings = {"seat_v1": {"entry": "seat_v1-dagender", "reading": "their code"}}

    def cell(long, method, col):
        return long[(long["model"] == "bert-base") & (long["method"] == method) & (long["column"] == col.id)][
            "ours"
        ].iloc[0]

    plain = build_table(table7, summaries, [BERT, BERT_CDS])
    assert cell(plain, "pretrained", column) == pytest.approx(0.70)
    long = build_table(table7, summaries, [BERT, BERT_CDS], readings=readings)
    assert cell(long, "pretrained", column) == pytest.approx(0.40)
    assert pd.isna(cell(long, "cds", column))  # its summary has no reading rows: missing, not the default's 0.50
    assert cell(long, "pretrained", seat_v2) == pytest.approx(0.30)  # a benchmark the paper reads as configured
    read = apply_readings(summaries, {"seat_v1": "seat_v1-dagender"})
    assert list(read[read["benchmark"] == "seat_v1"]["value"]) == [0.40]  # the default's own rows are gone
    assert set(read["benchmark"]) == {"seat_v1", "seat_v1-dagender", "seat_v2"}  # the entry's stay under its name too

    notes = reading_notes(table7, readings)
    assert notes == [
        f"Readings (this paper's `readings` in config.yaml): {column.header} read benchmarks.seat_v1-dagender "
        "instead of seat_v1 (seat_v1-dagender: their code)."
    ]
    assert (
        reading_notes(table7, {"crows_pairs": {"entry": "crows_pairs-biasbench", "reading": "x"}}) == []
    )  # no such column
    write_table(
        table7, summaries, [BERT], tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.html", readings=readings
    )
    assert notes[0] in (tmp_path / "t.md").read_text()
    meta = pq.read_schema(tmp_path / "t.parquet").metadata
    assert (
        b"seat_v1-dagender" in meta[b"lmbias.notes"] and meta[b"lmbias.readings"] == b'{"seat_v1": "seat_v1-dagender"}'
    )


def test_table_readings_are_those_of_the_tables_columns():
    config = _config(
        over_debiasing={
            "models": ["tiny-bert"],
            "methods": ["pretrained"],
            "readings": {"seat_v1": "seat_v1-dagender", "crows_pairs": "crows_pairs-biasbench"},
        }
    )
    assert table_readings(config, "over_debiasing", {"seat_v1", "seat_v2"}) == {
        "seat_v1": {"entry": "seat_v1-dagender", "reading": "their code"}
    }
    assert table_readings(config, "lu2018", {"seat_v1"}) == {}


def _shipped(expanded: bool = False) -> dict:
    """config.yaml as loaded; `expanded`: with its sweeps expanded, as the Snakefile does before any check."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    if expanded:
        for paper, entry in config["papers"].items():
            entry["methods"] = expand_method_targets(entry["methods"], config["methods"], f"papers.{paper}.methods")
        config["methods"] = expand_sweeps(config["methods"])
    return config


def test_a_reading_entry_takes_its_datasets_keys():
    """A reading under a name of its own (crows_pairs-biasbench) is validated as its dataset's entry: its keys are
    accepted, a misspelt one is named; entries of other datasets keep the generic keys."""
    config = _shipped()
    assert config_errors(config, ROOT / "schemas/config.schema.yaml") == []
    config["benchmarks"]["crows_pairs-biasbench"]["scoring"]["variant"] = ["bias_bench"]
    config["benchmarks"]["seat-biasbench"]["metric"]["ddof"] = [2]
    config["benchmarks"]["stereoset-biasbench"]["reading"] = ""
    config["benchmarks"]["ppl"] = {"dataset": "gap", "measure": "perplexity", "scoring": {"limit_texts": 3}}
    errors = config_errors(config, ROOT / "schemas/config.schema.yaml")
    assert "benchmarks.crows_pairs-biasbench.scoring.variant: unknown key" in errors
    assert any(e.startswith("benchmarks.seat-biasbench.metric.ddof") for e in errors)
    assert any(e.startswith("benchmarks.stereoset-biasbench.reading") for e in errors)
    assert not any(e.startswith("benchmarks.ppl") for e in errors) and len(errors) == 3, errors


def test_shipped_grids_read_the_authors_computations():
    """docs/peers.md's peer table, as the shipped grids select it: Meade et al.'s tables read bias-bench's CrowS-Pairs,
    StereoSet and SEAT; the over-debiasing paper's its code's SEAT-v1, SEAT-v2 and logprob-score; the other
    papers read our defaults (their code's, or no code)."""
    config = _shipped(expanded=True)
    check_papers(config)
    bench = config["benchmarks"]
    assert paper_readings(config, "meade2022") == {
        "crows_pairs": "crows_pairs-biasbench",
        "stereoset": "stereoset-biasbench",
        "seat": "seat-biasbench",
    }
    crows = bench["crows_pairs-biasbench"]
    assert crows["scoring"] == {"variants": ["bias_bench"], "clm_context": "bias_bench"}
    assert crows["metric"] == {"variant": "bias_bench", "round_decimals": 3} and crows["bias_types"] == ["gender"]
    stereoset = bench["stereoset-biasbench"]
    assert stereoset["scoring"] == {"remaining_pieces": "drop", "clm_context": "bias_bench"}
    assert stereoset["metric"] == {"masked_score": "mean_prob", "clm_score": "token_mean"}
    seat = bench["seat-biasbench"]
    assert seat["scoring"]["poolings"] == {"mlm": ["mean"], "clm": ["mean"]}
    assert seat["tests"] == list(seat["metric"]["averages"]["sent-weat6-8b"])
    assert paper_readings(config, "over_debiasing") == {
        "seat_v1": "seat_v1-dagender",
        "seat_v2": "seat_v2-dagender",
        "logprob": "logprob-dagender",
    }
    for name in ("seat_v1-dagender", "seat_v2-dagender"):
        assert bench[name]["scoring"] == {
            "poolings": {"mlm": ["mean_padded"], "clm": ["last"], "seq2seq": ["decoder_mean_padded"]},
            "pad_to": 128,
        }
        assert bench[name]["metric"] == {"ddof": [0], "std_epsilon": 1e-8, "alternative": "two-sided"}
        assert bench[name]["version"] == bench[name.split("-")[0]]["version"]
    assert bench["logprob-dagender"]["metric"] == {"ddof": 0, "std_epsilon": 1e-8, "alternative": "two-sided"}
    for paper in ("manela2021", "bartl2020", "lu2018"):
        assert paper_readings(config, paper) == {}
    readings = {e for p in config["papers"] for e in paper_readings(config, p).values()}
    assert readings == {name for name, entry in bench.items() if is_reading(entry)}  # no reading selected by none
