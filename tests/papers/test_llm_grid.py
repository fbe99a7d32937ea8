"""The LLM grid (config.yaml papers.llm_gender, target paper_llm_gender; docs/llms.md, "An LLM grid"): our own grid laid
out like a paper, without published numbers.

Unit tests: the definition file (resources/published/llm_gender.yaml) loads as our grid only, its columns select
rows the causal benchmarks write, the figure's panels are the table's columns, and the shipped grid is five
hub decoders (three base, two instruct) x six methods, every pair runnable. The workflow test runs
paper_llm_gender end to end on a tiny grid
(tiny-llama standing in for the 7B decoders, real data, few items: CrowS-Pairs gender, SEAT-v1, the GAP
perplexity stand-in on 5 texts, LoRA training 2 steps; about 50 jobs, 4 CPU-minutes) and reads its table and
figure back. The shipped grid's DAG is tested with the other paper targets (tests/workflow/test_shipped_targets.py).
"""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.llm_grid_run import METHODS, TINY, prepare_llm_grid_run
from helpers.paths import REPO_ROOT
from helpers.workflow_runs import run_snakemake
from lmbias.benchmarks import catalog
from lmbias.errors import DataError
from lmbias.papers import grid
from lmbias.papers.figures import FIGURES
from lmbias.papers.figures_llm_gender import LLM_PANELS, llm_bias_figure, llm_points
from lmbias.papers.published import OWN_GRIDS, PAPERS, load_published, load_published_file
from lmbias.papers.table_render import legend
from lmbias.papers.tables import build_table
from lmbias.workflow.stand_ins import stand_in_entries

REPO = REPO_ROOT


def _config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def _table():
    return load_published("llm_gender").tables["bias_and_perplexity"]


def test_llm_gender_is_our_grid_without_published_numbers():
    pub = load_published("llm_gender")
    assert "llm_gender" in OWN_GRIDS and "llm_gender" not in PAPERS  # the paper-text tests skip it
    assert pub.source is None and not pub.source_is_url
    table = _table()
    assert table.rows == [] and set(table.method_kinds) == {"pretrained", "cda", "cds", "self_debias", "sd", "inlp"}
    assert legend(table).startswith("Cells: ours only")


def test_a_paper_file_may_not_drop_its_rows_or_source(tmp_path):
    """Empty rows and a null source are for our own grids only: a transcription without them still fails."""
    text = (REPO / "resources/published/llm_gender.yaml").read_text()
    path = tmp_path / "resources/published/lu2018.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace("paper: llm_gender", "paper: lu2018"))
    with pytest.raises(DataError, match=r"tables\.bias_and_perplexity\.rows: expected a non-empty list"):
        load_published_file(path)
    own = tmp_path / "resources/published/llm_gender.yaml"
    own.write_text(text.replace("source: null", "source: lu2018_cda_gender_bias.txt"))
    with pytest.raises(DataError, match=r"source: our own grid \(llm_gender\) has no published source"):
        load_published_file(own)
    own.write_text(text.replace("    rows: []", "    rows: [{label: x, model: null, method: pretrained, values: {}}]"))
    with pytest.raises(DataError, match=r"rows: our own grid .* expected \[\]"):
        load_published_file(own)


def test_columns_are_the_causal_benchmarks_and_the_figure_panels():
    """Every column selects a configured benchmark that applies to causal models, every clm benchmark but
    perplexity (added by the table rule) has a column, and the figure draws exactly the table's columns."""
    config = _config()
    columns = _table().columns
    subsets = stand_in_entries(config)  # the tiny models' subsets (models.<tiny>.stand_ins): no column of their own
    clm = {
        b
        for b in catalog.benchmarks_for("clm", config["benchmarks"])
        if not grid.is_reading(config["benchmarks"][b]) and b not in subsets
    }
    selected = {c.benchmark for c in columns}
    assert selected <= clm
    lm = {b for b in clm if catalog.measure_of(config["benchmarks"][b], b) == "perplexity"}
    assert clm - lm == selected, "a causal benchmark without a column (or a column for a non-causal one)"
    for masked_only in ("bec_pro_en", "bec_pro_de", "logprob"):
        assert masked_only not in clm
    assert [(c.benchmark, c.metric, c.subset, c.header) for c in columns] == [p[:4] for p in LLM_PANELS]
    assert [f.id for f in FIGURES["llm_gender"]] == ["bias_vs_perplexity"]


def test_shipped_grid_is_five_open_decoders_by_six_methods():
    """Three base decoders and the instruct siblings of two of them, which prompted benchmarks ask through their
    own chat template (models.<name>.chat_template: true; the base models read raw prompts)."""
    config = _config()
    entry = config["papers"]["llm_gender"]
    assert entry["methods"] == METHODS and len(entry["models"]) == 5
    instruct = [name for name in entry["models"] if config["models"][name].get("chat_template") is True]
    assert instruct == ["qwen2.5-7b-instruct", "olmo-2-7b-instruct"]
    for name in instruct:
        base = name.removesuffix("-instruct")
        assert base in entry["models"] and "chat_template" not in config["models"][base]
        assert config["models"][name]["hub_id"].startswith(config["models"][base]["hub_id"].split("-7B")[0])
    grid.check_papers({**config, "papers": {"llm_gender": entry}})  # (the sweeps @* expand in the workflow)
    assert len(grid.paper_pairs(config, "llm_gender")) == 30 and not grid.left_out_pairs(config, "llm_gender")
    for name in entry["models"]:
        model = config["models"][name]
        assert model["family"] == "clm" and model["dtype"] == "auto" and "/" in model["hub_id"]
        assert model["training"]["learning_rate"] <= 2e-4 and model["training"]["batch_size"] <= 8
    for method in ("cda-lora", "cds-lora"):
        assert config["methods"][method]["training"]["adapter"]["kind"] == "lora"


def _summary(model: str, method: str, rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": model,
                "method": method,
                "seed": "mean",
                "benchmark": b,
                "metric": m,
                "variant": v,
                "subset": s,
                "value": x,
                "p_value": None,
                "n": 10,
            }
            for b, m, v, s, x in rows
        ]
    )


def test_table_and_figure_read_the_default_variant_and_the_wikitext_perplexity():
    """Known cells: the first variant in file order (as every paper table reads it), WikiText-2 on the x axis
    where it is there, a benchmark a method does not run stays missing."""
    pre = _summary(
        "m",
        "pretrained",
        [
            ("crows_pairs", "metric_score", "clm=sentence_loglik", "gender", 60.0),
            ("crows_pairs", "metric_score", "clm=token_mean", "gender", 70.0),
            ("seat_v1", "effect_size", "pooling=last", "occupations-test", 0.4),
            ("perplexity_gap", "perplexity", "stand-in", "all", 30.0),
            ("perplexity_wikitext2", "perplexity", "clm=perplexity", "all", 12.0),
        ],
    )
    sd = _summary(
        "m",
        "self_debias",
        [
            ("crows_pairs", "metric_score", "clm=sentence_loglik", "gender", 52.0),
            ("perplexity_wikitext2", "perplexity", "clm=perplexity", "all", 14.0),
        ],
    )
    summaries = pd.concat([pre, sd], ignore_index=True)
    pairs = [
        {"model": "m", "method": k, "kind": k, "hub_id": "org/m", "recipe": None} for k in ("pretrained", "self_debias")
    ]
    lm = [{"benchmark": "perplexity_wikitext2", "header": "PPL (ours, WikiText-2 test)", "text": "t"}]
    long = build_table(_table(), summaries, pairs, lm_benchmarks=lm)
    cell = long.set_index(["method", "column"])["ours"]
    assert cell[("pretrained", "crows_pairs")] == 60.0 and cell[("self_debias", "crows_pairs")] == 52.0
    assert cell[("pretrained", "ours_perplexity_wikitext2")] == 12.0
    assert pd.isna(cell[("self_debias", "seat_v1")]) and set(long["source"]) == {"ours"}
    points, x_bench = llm_points(summaries)
    assert x_bench == "perplexity_wikitext2"
    crows = points[points["panel"] == "CrowS-Pairs gender (%)"].set_index("method")
    assert crows.loc["pretrained", ["x", "y"]].tolist() == [12.0, 60.0] and crows.loc["self_debias", "y"] == 52.0
    fig = llm_bias_figure(summaries)
    drawn = [ax for ax in fig.axes if ax.get_title() == "CrowS-Pairs gender (%)"][0]
    ys = sorted(float(y) for coll in drawn.collections for _, y in coll.get_offsets())
    assert ys == [52.0, 60.0]


# ------------------------------------------------------------------------------------------ tiny grid, end to end


@pytest.fixture(scope="module")
def tiny_grid_run(tmp_path_factory, repo_root, shared_data):
    workdir, args = prepare_llm_grid_run(tmp_path_factory, repo_root, shared_data)
    run_snakemake(workdir, *args)
    return workdir


@pytest.mark.workflow
def test_tiny_grid_builds_the_table_and_the_figure(tiny_grid_run):
    long = pq.read_table(tiny_grid_run / "results/papers/llm_gender/bias_and_perplexity.parquet").to_pandas()
    assert list(dict.fromkeys(long["method"])) == METHODS and set(long["model"]) == {TINY}
    cells = long.set_index(["method", "column"])["ours"]
    for method in METHODS:
        for column in ("crows_pairs", "ours_perplexity_gap"):
            assert pd.notna(cells[(method, column)]), (method, column)
        assert pd.isna(cells[(method, "da_score")])  # da_gender is not run in this grid: "–", never invented
    assert pd.notna(cells[("inlp", "seat_v1")]) and pd.isna(cells[("self_debias", "seat_v1")])
    # BOLD: generated behind the chat template by every method but Self-Debias (no generation of its own)
    assert pd.notna(cells[("cds-lora", "bold_sentiment_gap")]) and pd.isna(cells[("self_debias", "bold_sentiment_gap")])
    generations = pq.read_table(tiny_grid_run / f"results/{TINY}/pretrained/seed0/scores/bold.parquet")
    assert generations.num_rows == 4 and b"sha256:" in generations.schema.metadata[b"lmbias.chat"]
    # the adapters moved the model: LoRA-CDS scores differ from the pretrained model's
    assert cells[("cds-lora", "ours_perplexity_gap")] != cells[("pretrained", "ours_perplexity_gap")]
    md = (tiny_grid_run / "results/papers/llm_gender/bias_and_perplexity.md").read_text()
    assert "Cells: ours only" in md and "| tiny-llama / cds-lora | tiny-llama / cds-lora |" in md
    for ext in ("png", "svg"):
        assert (tiny_grid_run / f"results/plots/llm_gender/bias_vs_perplexity.{ext}").stat().st_size > 10_000
