"""results/summary.md (lmbias.metrics.headline): the headline row of each benchmark, from known summary rows."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmbias.benchmarks import catalog
from lmbias.errors import DataError
from lmbias.metrics.headline import headline_cell, paired_lines, read_summaries, summary_markdown
from lmbias.metrics.summary_page import summary_html, write_summary_pages


def _row(method, bench, metric, variant, subset, value, lo=math.nan, hi=math.nan, p=math.nan, seed="mean"):
    return {
        "model": "tiny-bert",
        "method": method,
        "seed": seed,
        "benchmark": bench,
        "metric": metric,
        "variant": variant,
        "subset": subset,
        "value": value,
        "ci_low": lo,
        "ci_high": hi,
        "p_value": p,
        "n": 10,
    }


def _summary(method, shift=0.0):
    return pd.DataFrame(
        [
            _row(method, "winobias", "mu_skew", "cutoff=0.1,probability=pair", "type1", 40.0 - shift),
            _row(method, "winobias", "mu_skew", "cutoff=0.1,probability=pair", "type2", 99.0),
            _row(method, "winobias", "mu_skew", "cutoff=0.1,probability=pair,online_skew=referent", "type1", 77.0),
            _row(method, "winobias", "mu_skew", "cutoff=0.1,probability=pair", "type1", 12.0, seed="0"),  # a seed row
            _row(method, "winobias", "mu_stereo", "cutoff=0.1,probability=pair", "type1", 5.0),
            _row(method, "crows_pairs", "metric_score", "pll=nangia", "gender", 55.0 - shift, 48.0, 61.5, 0.2),
            _row(method, "crows_pairs", "metric_score", "pll=nangia", "all", 60.0, 58.0, 62.0),
            _row(method, "seat", "effect_size", "pooling=mean,ddof=1", "weat6", -0.5, p=0.9),
            _row(method, "seat", "effect_size", "pooling=mean,ddof=1", "weat7", 0.3, p=0.1),
            _row(method, "seat", "effect_size", "pooling=mean,ddof=0", "weat7", 9.0, p=0.1),
            _row(method, "da_gender", "da_score", "association=tm,masks=word", "all", 1.0),
            _row(method, "da_gender", "da_score", "association=ratio,masks=word", "all", 51.5, 49.6, 53.5),
            _row(
                method, "bec_pro_en", "association_gap", "test=wilcoxon", "prof=all", -0.0002, -0.0003, -0.0001, 1e-30
            ),
            _row(method, "logprob", "effect_size", "masks=word,ddof=1,alternative=greater", "test", 0.7, p=0.07),
        ]
    )


DATASETS = {
    "winobias": "winobias",
    "crows_pairs": "crows_pairs",
    "seat": "seat",
    "da_gender": "da_gender",
    "bec_pro_en": "bec_pro",
    "logprob": "logprob",
}
#: the headlines of every definition, by dataset, and those of the benchmarks above
HEADLINES = {name: d.headlines for name, d in catalog.definitions().items()}
BY_BENCHMARK = {benchmark: HEADLINES[dataset] for benchmark, dataset in DATASETS.items()}


def test_each_headline_reads_its_row():
    frame = _summary("pretrained")
    assert headline_cell(frame, "winobias", HEADLINES["winobias"][0]) == "40.00"  # type1, plain variant, mean seed
    assert headline_cell(frame, "crows_pairs", HEADLINES["crows_pairs"][0]) == "55.00 [48.00, 61.50]"
    # SEAT: mean |effect size| of the first variant (ddof=1) over its two tests
    assert headline_cell(frame, "seat", HEADLINES["seat"][0]) == "0.40 (2 tests)"
    assert headline_cell(frame, "da_gender", HEADLINES["da_gender"][0]) == "51.50 [49.60, 53.50]"
    assert headline_cell(frame, "bec_pro_en", HEADLINES["bec_pro"][0]) == "-2.00e-04 [-3.00e-04, -1.00e-04]"
    assert headline_cell(frame, "logprob", HEADLINES["logprob"][0]) == "0.70 (p 0.07)"
    assert headline_cell(frame, "stereoset", HEADLINES["stereoset"][0]) == "–"


def test_online_method_reads_its_online_skew_variant():
    frame = _summary("online")
    frame = frame[~((frame["benchmark"] == "winobias") & ~frame["variant"].str.contains("online_skew"))]
    assert headline_cell(frame, "winobias", HEADLINES["winobias"][0]) == "77.00"


def test_markdown_puts_before_and_after_side_by_side(tmp_path):
    paths = []
    for method, shift in (("pretrained", 0.0), ("cds", 10.0)):
        path = tmp_path / f"{method}.parquet"
        pq.write_table(pa.Table.from_pandas(_summary(method, shift)), path)
        paths.append(path)
    paired = tmp_path / "paired.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "comparison": "tiny-bert-cds",
                    "before_model": "tiny-bert",
                    "before_method": "pretrained",
                    "after_model": "tiny-bert",
                    "after_method": "cds",
                    "metric": "association_change",
                    "subset": "prof=all/person=female",
                    "value": 0.25,
                    "p_value": 0.001,
                },
                {
                    "comparison": "tiny-bert-cds",
                    "before_model": "tiny-bert",
                    "before_method": "pretrained",
                    "after_model": "tiny-bert",
                    "after_method": "cds",
                    "metric": "association_change",
                    "subset": "prof=male/person=female",
                    "value": 9.0,
                    "p_value": 0.5,
                },
            ]
        ),
        paired,
    )
    text = summary_markdown(paths, BY_BENCHMARK, [paired])
    lines = text.splitlines()
    assert "| benchmark | headline | unbiased | tiny-bert / pretrained | tiny-bert / cds |" in lines
    assert "| winobias | WinoBias mean skew (type1) | 0 | 40.00 | 30.00 |" in lines
    assert (
        "| crows_pairs | CrowS-Pairs metric score (gender) | 50 | 55.00 [48.00, 61.50] | 45.00 [48.00, 61.50] |"
        in lines
    )
    assert (
        "| tiny-bert-cds | tiny-bert / pretrained | tiny-bert / cds | prof=all/person=female: 0.25 (p 1.00e-03) |"
        in lines
    )
    assert not any("stereoset" in line for line in lines)  # no summary holds it: no row
    html = summary_html(read_summaries(paths), BY_BENCHMARK, paired_lines([paired]))
    assert "<td>WinoBias mean skew (type1)</td>" in html and "<td>30.00</td>" in html
    assert "<td>55.00<small>[48.00, 61.50]</small></td>" in html
    out_md, out_html = tmp_path / "summary.md", tmp_path / "summary.html"
    assert write_summary_pages(paths, BY_BENCHMARK, [paired], out_md, out_html) == text
    assert out_md.read_text() == text and out_html.read_text() == html


def test_an_empty_summary_is_named(tmp_path):
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pandas(_summary("x").iloc[0:0]), path)
    with pytest.raises(DataError, match="empty.parquet"):
        summary_markdown([path], BY_BENCHMARK)
