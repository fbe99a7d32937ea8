"""results/summary.html (lmbias.metrics.summary_page): figures, table and provenance from known summaries, and
the page as a real headless browser draws it."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection

from lmbias.benchmarks import catalog
from lmbias.metrics.headline import HeadlineRow, HeadlineValue, headline_rows, read_summaries
from lmbias.metrics.summary_page import (
    UNBIASED_COLOUR,
    figure_caption,
    figure_svg,
    headline_figure,
    summary_html,
    write_summary_pages,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONFIG_HASH = "c0" * 32
DATA_SHA = "da" * 32
PROVENANCE = {"model_revision": "main", "model_commit": COMMIT, "lmbias_version": "0.1.0", "config_hash": CONFIG_HASH}


def _rows(model: str, method: str, crows: float, crows_ci: tuple[float, float] | None, logprob: float | None) -> list:
    """CrowS-Pairs (an interval, unbiased 50), a logprob effect size (a p-value, unbiased 0) and perplexity
    (no unbiased value) of one (model, method), with provenance."""
    low, high = crows_ci or (math.nan, math.nan)
    common = {"model": model, "method": method, "seed": "mean", "n": 10, "model_id": f"org/{model}", **PROVENANCE}
    rows = [
        {
            **common,
            "benchmark": "crows_pairs",
            "metric": "metric_score",
            "variant": "pll=nangia",
            "subset": "gender",
            "value": crows,
            "ci_low": low,
            "ci_high": high,
            "p_value": math.nan,
            "data_sha256": DATA_SHA,
        },
        {
            **common,
            "benchmark": "perplexity_gap",
            "metric": "perplexity",
            "variant": "",
            "subset": "all",
            "value": 30.0,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "p_value": math.nan,
            "data_sha256": DATA_SHA,
        },
    ]
    if logprob is not None:
        rows.append(
            {
                **common,
                "benchmark": "logprob",
                "metric": "effect_size",
                "variant": "masks=word",
                "subset": "test",
                "value": logprob,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "p_value": 0.07,
                "data_sha256": "",
            }
        )  # generated: no data files
    return rows


DATASETS = {"crows_pairs": "crows_pairs", "logprob": "logprob", "perplexity_gap": "perplexity"}
#: the headlines of every definition, by dataset, and those of the benchmarks above
HEADLINES = {name: d.headlines for name, d in catalog.definitions().items()}
BY_BENCHMARK = {benchmark: HEADLINES[dataset] for benchmark, dataset in DATASETS.items()}


@pytest.fixture
def summary_paths(tmp_path) -> list[Path]:
    """Two models: tiny-bert before (pretrained) and after two methods, tiny-gpt2 before only; tiny-bert/sd has
    no logprob row."""
    spec = [
        ("tiny-bert", "pretrained", 60.0, (55.0, 65.0), 0.8),
        ("tiny-bert", "cds", 52.0, (47.0, 57.5), 0.3),
        ("tiny-bert", "sd", 49.0, (44.0, 54.0), None),
        ("tiny-gpt2", "pretrained", 58.0, (51.0, 63.0), -0.4),
    ]
    paths = []
    for model, method, *numbers in spec:
        path = tmp_path / f"{model}-{method}.parquet"
        pd.DataFrame(_rows(model, method, *numbers)).to_parquet(path)
        paths.append(path)
    return paths


def _row(paths, benchmark: str) -> HeadlineRow:
    return next(r for r in headline_rows(read_summaries(paths), BY_BENCHMARK) if r.benchmark == benchmark)


def _labelled(ax, prefix: str) -> dict[str, object]:
    return {
        a.get_label().removeprefix(prefix): a for a in [*ax.lines, *ax.collections] if a.get_label().startswith(prefix)
    }


def test_a_figure_has_a_panel_per_model_and_a_dot_per_method(summary_paths):
    fig = headline_figure(_row(summary_paths, "crows_pairs"))
    bert, gpt2 = fig.axes
    assert [t.get_text() for t in bert.get_yticklabels()] == ["pretrained", "cds", "sd"]  # before first
    assert [t.get_text() for t in gpt2.get_yticklabels()] == ["pretrained"]
    assert {t.get_text() for t in bert.texts} == {"tiny-bert"} and {t.get_text() for t in gpt2.texts} == {"tiny-gpt2"}
    dots = _labelled(bert, "value:")
    assert sorted(dots) == ["cds", "pretrained", "sd"] and sorted(_labelled(gpt2, "value:")) == ["pretrained"]
    assert [(list(d.get_xdata()), list(d.get_ydata())) for d in dots.values()] == [
        ([60.0], [0]),
        ([52.0], [-1]),
        ([49.0], [-2]),
    ]
    assert dots["pretrained"].get_color() == "#000000"  # the "before" in black, the methods in their colours
    assert len({d.get_color() for d in dots.values()}) == 3


def test_the_reference_line_sits_at_the_unbiased_value(summary_paths):
    assert HEADLINES["crows_pairs"][0].unbiased_value == 50.0 and HEADLINES["perplexity"][0].unbiased_value is None
    fig = headline_figure(_row(summary_paths, "crows_pairs"))
    for ax in fig.axes:
        line = _labelled(ax, "")["unbiased"]
        assert list(line.get_xdata()) == [50.0, 50.0] and line.get_color() == UNBIASED_COLOUR
        assert ax.get_xlim()[0] < 44.0 and ax.get_xlim()[1] > 65.0  # every interval in view
    logprob = headline_figure(_row(summary_paths, "logprob"))
    assert [list(_labelled(ax, "")["unbiased"].get_xdata()) for ax in logprob.axes] == [[0.0, 0.0]] * 2
    assert logprob.axes[0].get_xlim()[0] < 0.0 < 0.3  # zero in view although every tiny-bert value is positive
    # perplexity: not a bias, no unbiased value, no line
    perplexity = headline_figure(_row(summary_paths, "perplexity_gap"))
    assert all("unbiased" not in _labelled(ax, "") for ax in perplexity.axes)


def test_intervals_are_drawn_where_the_summary_has_them(summary_paths):
    bert = headline_figure(_row(summary_paths, "crows_pairs")).axes[0]
    bars = _labelled(bert, "interval:")
    assert sorted(bars) == ["cds", "pretrained", "sd"]
    assert isinstance(bars["cds"], LineCollection)
    assert np.allclose(bars["cds"].get_segments()[0], [[47.0, -1.0], [57.5, -1.0]])
    # pretrained's value as a dotted line through the model's rows
    assert list(_labelled(bert, "")["pretrained"].get_xdata()) == [60.0, 60.0]
    # logprob has a p-value, no interval: dots only; sd has no logprob row: said, not drawn
    logprob = headline_figure(_row(summary_paths, "logprob")).axes[0]
    assert not _labelled(logprob, "interval:") and sorted(_labelled(logprob, "value:")) == ["cds", "pretrained"]
    assert "no value" in {t.get_text() for t in logprob.texts}


def test_captions_say_what_has_no_interval(summary_paths):
    assert figure_caption(_row(summary_paths, "crows_pairs")) == "benchmark <code>crows_pairs</code> · unbiased: 50"
    assert figure_caption(_row(summary_paths, "logprob")).endswith("no interval (see the table for p-values)")
    assert "no unbiased value" in figure_caption(_row(summary_paths, "perplexity_gap"))
    seat = HeadlineRow("seat", HEADLINES["seat"][0], "SEAT", {("m", "pretrained"): HeadlineValue(0.4, tests=2)})
    assert figure_caption(seat).endswith("unbiased: 0 · mean over the tests, no interval")
    assert headline_figure(seat).axes[0].get_xlim() == pytest.approx((-0.032, 0.432))  # 0 to 0.4, 8 % margins


def test_the_page_holds_figures_table_and_provenance(summary_paths, tmp_path):
    summaries = read_summaries(summary_paths)
    page = summary_html(summaries, BY_BENCHMARK)
    assert page.count("<figure>") == 3 and page.count("<svg ") == 3  # crows_pairs, logprob, perplexity
    assert "<table>" in page and "<td>CrowS-Pairs metric score (gender)</td>" in page
    assert "<td>52.00<small>[47.00, 57.50]</small></td>" in page and "<td>0.80<small>(p 0.07)</small></td>" in page
    footer = page[page.index("<footer>") :]
    for text in ("org/tiny-bert", "org/tiny-gpt2", "main", COMMIT, "0.1.0", CONFIG_HASH, DATA_SHA):
        assert text in footer
    assert "generated (no data files" in footer  # logprob: data_sha256 empty
    local = summaries[("tiny-gpt2", "pretrained")].assign(model_commit="")
    assert "none (a local folder)" in summary_html({("tiny-gpt2", "pretrained"): local}, BY_BENCHMARK)
    older = summaries[("tiny-gpt2", "pretrained")].drop(columns=["model_commit", "config_hash"])
    assert summary_html({("tiny-gpt2", "pretrained"): older}, BY_BENCHMARK).count("<td>not recorded</td>") == 2
    # self-contained: no script, no external file or font; one id per element on the whole page
    assert not re.search(r"<script|<link|<img|@import|url\((?!#)|<\?xml|<!DOCTYPE svg", page)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert ids and len(ids) == len(set(ids))
    assert all(ref in ids for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', page))


def test_rerunning_writes_identical_bytes(summary_paths, tmp_path):
    outputs = []
    for run in ("a", "b"):
        md, page = tmp_path / f"{run}.md", tmp_path / f"{run}.html"
        write_summary_pages(summary_paths, BY_BENCHMARK, [], md, page)
        outputs.append((md.read_bytes(), page.read_bytes()))
    assert outputs[0] == outputs[1]


def test_names_are_escaped(tmp_path):
    model, method = "<b>m&1</b>", 'x"<script>'
    path = tmp_path / "odd.parquet"
    pd.DataFrame(_rows(model, method, 55.0, (50.0, 60.0), 0.2)).to_parquet(path)
    page = summary_html(read_summaries([path]), BY_BENCHMARK)
    assert "<script" not in page and "<b>m&1" not in page
    assert "&lt;b&gt;m&amp;1&lt;/b&gt; / x&quot;&lt;script&gt;" in page  # the table's column header
    assert "org/&lt;b&gt;m&amp;1&lt;/b&gt;" in page  # provenance


def test_svg_ids_are_prefixed_per_figure(summary_paths):
    row = _row(summary_paths, "crows_pairs")
    first, second = (figure_svg(headline_figure(row), prefix, "t") for prefix in ("f0-", "f1-"))
    assert first.startswith('<svg role="img" aria-label="t" ')
    assert re.findall(r'\bid="([^"]+)"', first) == [f"f0-{i[3:]}" for i in re.findall(r'\bid="([^"]+)"', second)]


# ------------------------------------------------------------------------------------------ a real browser

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    """Debian's chromium, or a skip with a reason where it is absent (a failure under CI=true: .ci/run
    installs it)."""
    found = shutil.which("chromium")
    if found is None:
        message = "chromium not found (Debian: apt-get install chromium) to screenshot results/summary.html"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI installs it (.ci/run)")
        pytest.skip(message)
    return found


def _fixture_summaries(repo_root: Path, out: Path) -> list[Path]:
    """tests/fixtures/figure_summaries.parquet (a real run's rows) split into one summary per (model, method),
    with provenance columns added (the fixture leaves them out)."""
    rows = pd.read_parquet(repo_root / "tests/fixtures/figure_summaries.parquet")
    paths = []
    for (model, method), frame in rows.groupby(["model", "method"], sort=False):
        frame = frame.assign(
            model_id=f"hf-internal-testing/{model}",
            model_revision="main",
            model_commit=COMMIT,
            lmbias_version="0.1.0",
            config_hash=CONFIG_HASH,
            data_sha256=DATA_SHA,
        )
        paths.append(out / f"{model}-{method}.parquet")
        frame.to_parquet(paths[-1])
    return sorted(paths, key=lambda p: ("pretrained" not in p.name, p.name))


def test_a_headless_browser_draws_the_figures(repo_root, tmp_path):
    chromium = _chromium()
    from PIL import Image

    paths = _fixture_summaries(repo_root, tmp_path)
    datasets = {
        "winobias": "winobias",
        "bec_pro_en": "bec_pro",
        "occupations": "occupations",
        "seat_v1": "seat_templates",
        "seat_v2": "seat_templates",
        "logprob": "logprob",
        "da_gender": "da_gender",
    }
    page, shot = tmp_path / "summary.html", tmp_path / "summary.png"
    headlines = {benchmark: HEADLINES[dataset] for benchmark, dataset in datasets.items()}
    write_summary_pages(paths, headlines, [], tmp_path / "summary.md", page)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            page.resolve().as_uri(),
        ],
        check=True,
        timeout=180,
        capture_output=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape == (1600, 1200, 3)
    assert pixels.std() > 20  # not blank
    # The figures are drawn: the dashed unbiased lines (one per model panel of 8 figures; the key's swatch
    # alone is ~20 px) and the methods' dots and intervals (cds in blue, pretrained in black).
    unbiased = np.abs(pixels - np.array([0x00, 0x9E, 0x73])).sum(axis=2) < 60
    cds_blue = np.abs(pixels - np.array([0x00, 0x72, 0xB2])).sum(axis=2) < 60
    assert unbiased.sum() > 400 and cds_blue.sum() > 200, (unbiased.sum(), cds_blue.sum())
    # the figure area (below the key, the grid of figures) is mostly white, with ink in it
    figures = pixels[450:1600, :, :]
    ink = (figures.sum(axis=2) < 600).mean()
    assert 0.01 < ink < 0.5, ink
