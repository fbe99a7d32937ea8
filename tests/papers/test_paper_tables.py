"""Paper tables (lmbias.papers.tables) from known summary rows, and the `papers:` config checks."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers.paths import TESTS
from lmbias.config import check_papers
from lmbias.errors import ConfigError
from lmbias.papers.grid import left_out_pairs, pair_info, paper_pairs
from lmbias.papers.published import load_published_file
from lmbias.papers.table_render import pair_notes, to_html, to_markdown, write_table
from lmbias.papers.tables import TABLE_SCHEMA, build_table, is_settings_table

FIXTURES = TESTS / "fixtures" / "published"


def _row(model, method, bench, metric, variant, subset, value, p=math.nan, seed="mean", **extra):
    return {
        "model": model,
        "method": method,
        "seed": seed,
        "benchmark": bench,
        "metric": metric,
        "variant": variant,
        "subset": subset,
        "value": value,
        "p_value": p,
        "n": 40,
        **extra,
    }


BERT = {"model": "bert-base", "method": "pretrained", "kind": "pretrained", "hub_id": "bert-base-uncased"}
BERT_CDS = {"model": "bert-base", "method": "cds", "kind": "cds", "hub_id": "bert-base-uncased"}
TINY = {"model": "tiny-bert", "method": "pretrained", "kind": "pretrained", "hub_id": None}


@pytest.fixture
def table7():
    return load_published_file(FIXTURES / "over_debiasing.yaml").tables["table7"]


@pytest.fixture
def summaries():
    return pd.DataFrame(
        [
            _row("bert-base", "pretrained", "seat_v1", "effect_size", "default", "weat6", 0.70, 0.001),
            _row(
                "bert-base", "pretrained", "seat_v1", "effect_size", "other", "weat6", 9.99, 0.5
            ),  # not the default variant
            _row(
                "bert-base", "pretrained", "seat_v1", "effect_size", "default", "weat6", 5.0, 0.001, seed="0"
            ),  # a seed, not the mean
            _row("bert-base", "pretrained", "seat_v2", "effect_size", "default", "weat6", 0.30, 0.2),
            _row("bert-base", "pretrained", "logprob", "effect_size", "v", "dev", 7.0, 0.001),
            _row("bert-base", "pretrained", "logprob", "effect_size", "v", "test", 1.0, 0.005),
            _row("bert-base", "cds", "seat_v1", "effect_size", "default", "weat6", 0.50, 0.02, std=0.1, n_seeds=3),
            _row("tiny-bert", "pretrained", "seat_v1", "effect_size", "default", "weat6", 0.05, 0.0001),
        ]
    )


def _cell(long, row, column):
    hit = long[(long["row"] == row) & (long["column"] == column)]
    assert len(hit) == 1, (row, column, long)
    return hit.iloc[0]


def test_same_model_gets_ours_published_and_difference(table7, summaries):
    long = build_table(table7, summaries, [BERT, BERT_CDS, TINY])
    c = _cell(long, "BERT-base", "seat_v1")
    assert (c["model"], c["method"], c["source"]) == ("bert-base", "pretrained", "both")
    assert c["ours"] == pytest.approx(0.70) and c["published"] == pytest.approx(0.62)
    assert c["difference"] == pytest.approx(0.08)
    # subset selector: test, not dev
    assert _cell(long, "BERT-base", "logprob")["ours"] == pytest.approx(1.0)
    cds = _cell(long, "BERT-base CDS", "seat_v1")
    assert cds["ours"] == pytest.approx(0.50) and cds["ours_std"] == pytest.approx(0.1) and cds["n_seeds"] == 3
    assert cds["difference"] == pytest.approx(0.09)


def test_other_models_get_their_own_rows_without_difference(table7, summaries):
    long = build_table(table7, summaries, [BERT, TINY])
    tiny = _cell(long, "tiny-bert / pretrained", "seat_v1")
    assert tiny["source"] == "ours" and tiny["ours"] == pytest.approx(0.05)
    assert pd.isna(tiny["published"]) and pd.isna(tiny["difference"])
    # published rows come first, in paper order; ours-only rows after them
    assert list(dict.fromkeys(long.sort_values("row_order")["row"])) == [
        "BERT-base",
        "BERT-base CDS",
        "GPT2",
        "tiny-bert / pretrained",
    ]


def test_missing_stays_missing(table7, summaries):
    long = build_table(table7, summaries, [BERT])
    stereo = _cell(long, "BERT-base", "stereo")  # a column we do not compute (benchmark: null)
    assert pd.isna(stereo["ours"]) and stereo["published"] == pytest.approx(60.3) and pd.isna(stereo["difference"])
    gpt2 = _cell(long, "GPT2", "seat_v2")  # not printed, not run
    assert pd.isna(gpt2["ours"]) and pd.isna(gpt2["published"]) and gpt2["source"] == "published"
    md = to_markdown(table7, long)
    assert "| GPT2 | – | – (0.12) | – | – | – (62.7) |" in md
    assert "nan" not in md.lower()


def test_significance_bolds_ours_below_the_threshold(table7, summaries):
    long = build_table(table7, summaries, [BERT, BERT_CDS, TINY])
    assert bool(_cell(long, "BERT-base", "seat_v1")["significant"]) is True
    assert bool(_cell(long, "BERT-base", "seat_v2")["significant"]) is False
    assert bool(_cell(long, "BERT-base CDS", "seat_v1")["significant"]) is False  # p = 0.02 >= 0.01
    assert pd.isna(_cell(long, "BERT-base", "stereo")["significant"])
    md = to_markdown(table7, long)
    # ours bold (p < 0.01), published bold as the paper prints it, Δ for the same model only
    assert (
        "| BERT-base | bert-base / pretrained | **0.70** (**0.62**; Δ +0.08) | 0.30 (0.35; Δ −0.05) | "
        "**1.00** (**1.24**; Δ −0.24) | – (60.3) |" in md
    )
    assert "| tiny-bert / pretrained | tiny-bert / pretrained | **0.05** | – | – | – |" in md
    assert "<b>0.70</b>" in to_html(table7, long)


def test_no_significance_no_bold(summaries):
    table8 = load_published_file(FIXTURES / "over_debiasing.yaml").tables["table8"]
    rows = pd.DataFrame(
        [
            _row("bert-base", "pretrained", "da_gender", "da_score", "association=ratio", "all", 90.0, 0.0001),
            _row("bert-base", "pretrained", "da_gender", "da_score", "association=tm", "all", 10.0),
        ]
    )
    long = build_table(table8, rows, [BERT])
    c = _cell(long, "BERT-base", "da")
    assert c["ours"] == pytest.approx(90.0)  # the first (default) variant
    assert pd.isna(c["significant"])
    assert "| BERT-base | bert-base / pretrained | 90.0 (95.1; Δ −5.1) |" in to_markdown(table8, long)


def test_method_name_and_kind_pick_the_pair():
    table2 = load_published_file(FIXTURES / "manela2021.yaml").tables["table2"]
    rows = pd.DataFrame(
        [
            _row("bert-base", m, "winobias", "f1_male", "cutoff=0.1", "type1/pro", v)
            for m, v in (("pretrained", 60.0), ("gpr-a", 70.0), ("gpr-u", 80.0))
        ]
    )
    pairs = [BERT, {**BERT, "method": "gpr-a", "kind": "gpr"}, {**BERT, "method": "gpr-u", "kind": "gpr"}]
    long = build_table(table2, rows, pairs)
    assert _cell(long, "BERT", "f1_pro_m")["ours"] == pytest.approx(60.0)
    u = _cell(long, "BERT-U", "f1_pro_m")
    assert u["method"] == "gpr-u" and u["ours"] == pytest.approx(80.0) and u["difference"] == pytest.approx(80.0 - 72.1)
    assert _cell(long, "bert-base / gpr-a", "f1_pro_m")["source"] == "ours"


def test_sweep_names_are_their_base_kind(table7):
    sweep = {**BERT_CDS, "method": "cds@swap_rate=0.7"}
    rows = pd.DataFrame(
        [
            _row("bert-base", "cds@swap_rate=0.7", "seat_v1", "effect_size", "d", "weat6", 0.3, 0.5),
            _row("bert-base", "cds", "seat_v1", "effect_size", "d", "weat6", 0.2, 0.5),
        ]
    )
    long = build_table(table7, rows, [BERT_CDS, sweep])
    assert _cell(long, "BERT-base CDS", "seat_v1")["method"] == "cds"  # the plain method is the paper's row
    assert _cell(long, "bert-base / cds@swap_rate=0.7", "seat_v1")["ours"] == pytest.approx(0.3)


def test_settings_table_reads_resolved_settings():
    table12 = load_published_file(FIXTURES / "over_debiasing.yaml").tables["table12"]
    assert is_settings_table(table12)
    config = {
        "models": {
            "bert-base": {
                "hub_id": "bert-base-uncased",
                "family": "mlm",
                "training": {
                    "batch_size": 8,
                    "learning_rate": 3e-5,
                    "epochs": 8,
                    "swap_rate": 1.0,
                    "er_lambda": 0.5,
                    "ratio_of_pairs": 0.05,
                },
            }
        },
        "methods": {
            "cds": {"kind": "cds", "corpus": "c-{swap_rate}.parquet"},
            "er": {"kind": "er", "corpus": "c.parquet", "training": {"er_lambda": 0.75}},
            "sd": {"kind": "sd", "corpus": "s.parquet"},
        },
    }
    pairs = [pair_info(config, "bert-base", k, True) for k in ("cds", "er", "sd")]
    long = build_table(table12, pd.DataFrame(), pairs)
    assert _cell(long, "BERT-base", "er_lambda")["ours"] == pytest.approx(0.75)
    assert _cell(long, "BERT-base", "er_lambda")["difference"] == pytest.approx(0.25)
    assert _cell(long, "BERT-base", "swap_rate")["ours"] == pytest.approx(1.0)
    assert _cell(long, "BERT-base", "ratio_of_pairs")["ours"] == pytest.approx(0.05)
    assert _cell(long, "BERT-base", "learning_rate")["difference"] == pytest.approx(1e-5)
    assert _cell(long, "BERT-base", "batch_size")["ours"] == 8
    assert pd.isna(_cell(long, "GPT2", "epochs")["ours"])  # gpt2 not configured: published only


def test_write_table_files(tmp_path, table7, summaries):
    write_table(table7, summaries, [BERT, TINY], tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.html")
    assert pq.read_schema(tmp_path / "t.parquet").names == TABLE_SCHEMA.names
    assert (tmp_path / "t.md").read_text().startswith("### Table 7")
    assert "<table>" in (tmp_path / "t.html").read_text()


CONFIG = {
    "models": {"tiny-bert": {"family": "mlm"}, "tiny-gpt2": {"family": "clm"}},
    "methods": {
        "pretrained": {"kind": "pretrained"},
        "gpr-u": {"kind": "gpr", "corpus": "x"},
        "cds@swap_rate=0.7": {"kind": "cds", "corpus": "y"},
    },
}


@pytest.mark.parametrize(
    "papers, message",
    [
        (
            {"manela": {"models": ["tiny-bert"], "methods": ["pretrained"]}},
            "papers.manela: unknown paper; known papers: manela2021",
        ),
        (
            {"lu2018": {"models": ["tiny-brt"], "methods": ["pretrained"]}},
            "papers.lu2018.models[0]: unknown model 'tiny-brt'",
        ),
        (
            {"lu2018": {"models": ["tiny-bert"], "methods": ["pretrained", "cda"]}},
            "papers.lu2018.methods[1]: unknown method 'cda'",
        ),
        ({"lu2018": {"models": [], "methods": ["pretrained"]}}, "papers.lu2018.models: expected a non-empty list"),
    ],
)
def test_papers_config_errors_name_the_key(papers, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_papers({**CONFIG, "papers": papers})


def test_paper_grid_skips_pairs_a_family_cannot_run():
    config = {
        **CONFIG,
        "papers": {
            "manela2021": {
                "models": ["tiny-bert", "tiny-gpt2"],
                "methods": ["pretrained", "gpr-u", "cds@swap_rate=0.7"],
            }
        },
    }
    check_papers(config)
    assert paper_pairs(config, "manela2021") == [
        ("tiny-bert", "pretrained"),
        ("tiny-bert", "gpr-u"),
        ("tiny-bert", "cds@swap_rate=0.7"),
        ("tiny-gpt2", "pretrained"),
        ("tiny-gpt2", "cds@swap_rate=0.7"),
    ]


def test_pairs_whose_inputs_cannot_be_had_are_left_out_with_the_reason(tmp_path, table7):
    """No OntoNotes path: the gpr pairs are not built, and the tables that show gpr say which and why."""
    methods = {**CONFIG["methods"], "gpr-u": {"kind": "gpr", "corpus": "results/corpora/ontonotes/gpr-U.parquet"}}
    config = {
        **CONFIG,
        "methods": methods,
        "corpora": {"ontonotes": {"path": None}},
        "papers": {"manela2021": {"models": ["tiny-bert", "tiny-gpt2"], "methods": ["pretrained", "gpr-u"]}},
    }
    assert paper_pairs(config, "manela2021") == [("tiny-bert", "pretrained"), ("tiny-gpt2", "pretrained")]
    left_out = left_out_pairs(config, "manela2021")
    assert left_out == [
        {
            "model": "tiny-bert",
            "method": "gpr-u",
            "kind": "gpr",
            "reason": "needs corpora.ontonotes.path: licensed OntoNotes 5.0 (LDC2013T19), not downloadable",
        }
    ]
    from dataclasses import replace

    gpr_table = replace(table7, method_kinds=("pretrained", "gpr"))
    notes = pair_notes(gpr_table, [TINY], left_out)
    assert notes == [
        "Left out: gpr-u for tiny-bert (needs corpora.ontonotes.path: licensed OntoNotes 5.0 "
        "(LDC2013T19), not downloadable)."
    ]
    assert pair_notes(table7, [TINY], left_out) == []  # a table without gpr rows has nothing left out
    write_table(
        gpr_table,
        pd.DataFrame(),
        [TINY],
        tmp_path / "t.parquet",
        tmp_path / "t.md",
        tmp_path / "t.html",
        left_out=left_out,
    )
    assert notes[0] in (tmp_path / "t.md").read_text()
    assert "Left out: gpr-u for tiny-bert" in (tmp_path / "t.html").read_text()
    meta = pq.read_schema(tmp_path / "t.parquet").metadata
    assert b"ontonotes" in meta[b"lmbias.left_out"]
    config["corpora"]["ontonotes"]["path"] = "/data/conll-2012"
    assert left_out_pairs(config, "manela2021") == [] and ("tiny-bert", "gpr-u") in paper_pairs(config, "manela2021")


def test_table_notes_name_the_recipe_behind_each_method(table7):
    recipe = {**BERT_CDS, "method": "cds-dagender", "recipe": "the DA-Gender authors' code (recipe dagender)"}
    from dataclasses import replace

    cds_table = replace(table7, method_kinds=("pretrained", "cds"))
    assert pair_notes(cds_table, [BERT, BERT_CDS, recipe]) == [
        "Ours: cds = as the papers describe it (lmbias defaults); "
        "cds-dagender = the DA-Gender authors' code (recipe dagender)."
    ]


def test_a_recipe_must_be_a_text():
    from lmbias.methods.resolution import check_method_entry

    check_method_entry("cds-x", {"kind": "cds", "corpus": "c", "recipe": "DA-Gender code"})
    with pytest.raises(ConfigError, match="methods.cds-x.recipe: expected a short text"):
        check_method_entry("cds-x", {"kind": "cds", "corpus": "c", "recipe": ""})


def test_scale_converts_to_the_papers_unit(table7):
    from dataclasses import replace

    scaled = replace(table7, columns=[replace(table7.columns[0], scale=100.0)], rows=[])
    long = build_table(
        scaled, pd.DataFrame([_row("tiny-bert", "pretrained", "seat_v1", "effect_size", "d", "w", 0.25)]), [TINY]
    )
    assert long.iloc[0]["ours"] == pytest.approx(25.0)


def test_transposed_parameter_table_matches_models_by_printed_name():
    paper = load_published_file(FIXTURES / "over_debiasing.yaml")
    table = paper.tables["table12t"]
    assert is_settings_table(table)
    config = {
        "models": {
            "bert-base": {
                "hub_id": "bert-base-uncased",
                "family": "mlm",
                "training": {"learning_rate": 3e-5, "er_lambda": 0.5},
            },
            "tiny-bert": {"family": "mlm", "training": {"learning_rate": 1e-4, "er_lambda": 0.25}},
        },
        "methods": {"er": {"kind": "er", "corpus": "c.parquet"}},
    }
    pairs = [pair_info(config, m, "er", True) for m in ("bert-base", "tiny-bert")]
    long = build_table(table, pd.DataFrame(), pairs, paper)
    lr = long[(long["row"] == "Learning rate")].set_index("column")
    assert lr.loc["bert_base", "ours"] == pytest.approx(3e-5) and lr.loc["bert_base", "difference"] == pytest.approx(
        1e-5
    )
    assert pd.isna(lr.loc["gpt2", "ours"]) and lr.loc["gpt2", "published"] == pytest.approx(5e-5)
    assert lr.loc["tiny-bert", "source"] == "ours" and lr.loc["tiny-bert", "ours"] == pytest.approx(1e-4)
    md = to_markdown(table, long)
    assert "| Row | Ours | BERT-base | GPT2 | tiny-bert |" in md
    assert "| λ | per column | 0.5 (0.5; Δ 0) | – (0.5) | 0.25 |" in md


LM_BENCHMARKS = {
    "perplexity_wikitext2": {"dataset": "wikitext2", "measure": "perplexity", "split": "test"},
    "perplexity_gap": {"dataset": "gap", "measure": "perplexity", "splits": ["test"]},
    "seat_v1": {"dataset": "seat_v1"},
}


def test_language_modelling_columns_are_the_perplexity_benchmarks_wikitext_first():
    from lmbias.papers.tables import lm_benchmark_columns

    columns = lm_benchmark_columns(LM_BENCHMARKS, ["perplexity_gap", "seat_v1", "perplexity_wikitext2"])
    assert [c["benchmark"] for c in columns] == ["perplexity_wikitext2", "perplexity_gap"]
    assert [c["header"] for c in columns] == ["PPL (ours, WikiText-2 test)", "PPL (ours, gap test stand-in)"]
    assert "not WikiText-2" in columns[1]["text"] and "not WikiText-2" not in columns[0]["text"]
    assert lm_benchmark_columns(LM_BENCHMARKS, ["seat_v1"]) == []


def test_every_table_with_methods_shows_our_perplexity_beside_the_papers_columns(tmp_path, table7, summaries):
    from lmbias.papers.tables import lm_benchmark_columns

    lm = lm_benchmark_columns(LM_BENCHMARKS, ["perplexity_gap"])
    rows = pd.concat(
        [
            summaries,
            pd.DataFrame(
                [
                    _row(
                        "bert-base",
                        "pretrained",
                        "perplexity_gap",
                        "perplexity",
                        "mlm=pseudo_perplexity,stand-in=gap-test",
                        "all",
                        12.5,
                    ),
                    _row(
                        "bert-base",
                        "pretrained",
                        "perplexity_gap",
                        "mean_nll",
                        "mlm=pseudo_perplexity,stand-in=gap-test",
                        "all",
                        2.53,
                    ),
                    _row(
                        "tiny-bert",
                        "pretrained",
                        "perplexity_gap",
                        "perplexity",
                        "mlm=pseudo_perplexity,stand-in=gap-test",
                        "all",
                        900.0,
                    ),
                ]
            ),
        ],
        ignore_index=True,
    )
    long = write_table(
        table7, rows, [BERT, TINY], tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.html", lm_benchmarks=lm
    )
    assert list(dict.fromkeys(long["column"]))[-1] == "ours_perplexity_gap"  # after the paper's columns
    bert = _cell(long, "BERT-base", "ours_perplexity_gap")
    assert bert["ours"] == pytest.approx(12.5) and pd.isna(bert["published"]) and bert["source"] == "ours"
    assert pd.isna(bert["difference"])
    assert _cell(long, "tiny-bert / pretrained", "ours_perplexity_gap")["ours"] == pytest.approx(900.0)
    assert pd.isna(_cell(long, "GPT2", "ours_perplexity_gap")["ours"])  # a published row without our pair
    assert _cell(long, "BERT-base", "seat_v1")["source"] == "both"  # the paper's columns are unchanged
    md = (tmp_path / "t.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Row |"))
    assert header.endswith("| PPL (ours, gap test stand-in) |")
    bert_line = next(line for line in md.splitlines() if line.startswith("| BERT-base | bert-base / pretrained |"))
    assert bert_line.endswith("| 12.50 |")  # ours only: no "(published; Δ)"
    assert "Language modelling, ours only" in md and "not WikiText-2" in md
    assert "PPL (ours, gap test stand-in)" in (tmp_path / "t.html").read_text()
    assert b"Language modelling" in pq.read_schema(tmp_path / "t.parquet").metadata[b"lmbias.notes"]


def test_no_perplexity_column_where_the_paper_prints_it_or_shows_no_method(table7):
    from dataclasses import replace

    from lmbias.papers.published import PublishedColumn
    from lmbias.papers.tables import lm_benchmark_columns, lm_columns

    lm = lm_benchmark_columns(LM_BENCHMARKS, ["perplexity_wikitext2", "perplexity_gap"])
    printed = PublishedColumn(
        id="ppl", header="Perplexity", benchmark="perplexity_wikitext2", metric="perplexity", variant=None, subset="all"
    )
    with_ppl = replace(table7, columns=[*table7.columns, printed])
    assert [c.id for c in lm_columns(with_ppl, lm)] == ["ours_perplexity_gap"]  # WikiText-2 is the paper's own column
    assert lm_columns(replace(table7, method_kinds=()), lm) == []  # coreference systems: no method of ours
    table12 = load_published_file(FIXTURES / "over_debiasing.yaml").tables["table12"]
    assert lm_columns(table12, lm) == []  # hyper-parameters


def test_the_transcriptions_note_is_printed_under_the_table(tmp_path, table7):
    """A reader sees where the published numbers come from (e.g. Meade et al.'s are quotations)."""
    from dataclasses import replace

    noted = replace(table7, note="Quoted from a later paper; not read from the paper itself.")
    write_table(noted, pd.DataFrame(), [TINY], tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.html")
    assert (
        "Published numbers: Quoted from a later paper; not read from the paper itself."
        in (tmp_path / "t.md").read_text()
    )
    assert "Quoted from a later paper" in (tmp_path / "t.html").read_text()
    assert b"Quoted from a later paper" in pq.read_schema(tmp_path / "t.parquet").metadata[b"lmbias.notes"]
