"""Paired pre/post comparisons (lmbias.metrics.comparison): seed averaging, the BEC-Pro paired test, config checks."""

from __future__ import annotations

import copy
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from lmbias.errors import ConfigError, DataError
from lmbias.jobs.comparisons import check_comparison, paired_comparison_job, paired_rows
from lmbias.metrics.comparison import PAIRED_SCHEMA, mean_over_seeds

BEC_PRO = {
    "dataset": "bec_pro",
    "language": "en",
    "metric": {"test": "wilcoxon", "per_profession": False, "drop_artefacts": False},
}


def _scores(shift_male: float = 0.0, n_per_cell: int = 12) -> pa.Table:
    """A BEC-Pro-shaped score table: every profession group x person gender, known associations."""
    rows, row_id = [], 0
    for group in ("male", "female", "balanced"):
        for gender in ("male", "female"):
            for k in range(n_per_cell):
                base = 0.1 * k - 0.3 + (0.05 if group == "female" else 0.0)
                rows.append(
                    {
                        "row_id": row_id,
                        "prof_gender": group,
                        "gender": gender,
                        "artefact": k == 0,
                        "association": base + (shift_male if gender == "male" else 0.0),
                    }
                )
                row_id += 1
    return pa.Table.from_pylist(rows)


def _by_subset(rows, metric="association_change"):
    return {r["subset"]: r for r in rows if r["metric"] == metric}


def test_known_shift_of_male_rows_is_found_and_female_rows_unchanged():
    rows = paired_rows("bec_pro_en", BEC_PRO, [_scores()], [_scores(shift_male=0.5)], "wilcoxon")
    change = _by_subset(rows)
    for group in ("male", "female", "balanced", "all"):
        male, female = change[f"prof={group}/person=male"], change[f"prof={group}/person=female"]
        assert male["value"] == pytest.approx(0.5) and male["p_value"] < 0.001
        assert female["value"] == 0.0 and math.isnan(female["p_value"])  # no non-zero difference: no test
    assert change["prof=all/person=male"]["n"] == 36
    r = _by_subset(rows, "association_change_r")
    assert r["prof=all/person=male"]["value"] > 0.8  # every pair moved up: r = z / sqrt(n) near its maximum
    assert {row["benchmark"] for row in rows} == {"bec_pro_en"}


def test_seeds_are_averaged_item_by_item_before_the_test():
    after_seeds = [_scores(shift_male=1.0), _scores(shift_male=0.0), _scores(shift_male=0.5)]
    rows = paired_rows("bec_pro_en", BEC_PRO, [_scores()], after_seeds, "t")
    assert _by_subset(rows)["prof=all/person=male"]["value"] == pytest.approx(0.5)
    mean = mean_over_seeds(after_seeds)
    assert mean.column("association").to_pylist()[0] == pytest.approx(0.1 * 0 - 0.3 + 0.5)
    assert mean.column("gender").to_pylist() == _scores().column("gender").to_pylist()


def test_seeds_that_score_different_items_are_refused():
    other = _scores().set_column(2, "gender", pa.array(["female"] * 72))
    with pytest.raises(DataError, match="seed table 1 scores different items"):
        mean_over_seeds([_scores(), other])


def test_drop_artefacts_option_of_the_benchmark_applies_and_names_the_variant():
    entry = copy.deepcopy(BEC_PRO)
    entry["metric"]["drop_artefacts"] = True
    rows = paired_rows("bec_pro_en", entry, [_scores()], [_scores(shift_male=0.5)], "wilcoxon")
    assert _by_subset(rows)["prof=all/person=male"]["n"] == 33  # 3 artefact rows of 36 left out
    assert {r["variant"] for r in rows} == {"test=wilcoxon,drop_artefacts"}


def test_job_writes_the_schema_with_both_sides_named(tmp_path):
    paths = {}
    for name, shift in (("before", 0.0), ("after", -0.2)):
        paths[name] = tmp_path / f"{name}.parquet"
        pq.write_table(_scores(shift_male=shift), paths[name])
    entry = {
        "benchmark": "bec_pro_en",
        "test": "t",
        "before": {"model": "m", "method": "pretrained"},
        "after": {"model": "m", "method": "cds"},
    }
    out = tmp_path / "t" / "paired.parquet"
    paired_comparison_job("m-cds", entry, BEC_PRO, [str(paths["before"])], [str(paths["after"])], str(out))
    table = pq.read_table(out)
    assert table.schema.equals(PAIRED_SCHEMA, check_metadata=False)
    row = _by_subset(table.to_pylist())["prof=all/person=male"]
    assert row["after_method"] == "cds" and row["comparison"] == "m-cds" and row["variant"] == "test=t"
    assert row["value"] == pytest.approx(-0.2) and row["p_value"] < 1e-6
    assert _by_subset(table.to_pylist())["prof=all/person=female"]["p_value"] is None  # NaN is stored as null


@pytest.fixture()
def config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda e: e.update(benchmark="nope"), r"comparisons.c.benchmark: unknown benchmark 'nope'"),
        (
            lambda e: e.update(benchmark="winobias"),
            r"comparisons.c.benchmark: 'winobias' has no paired pre/post test; benchmarks that have one: "
            r"bec_pro_de, bec_pro_en",
        ),
        (lambda e: e["before"].update(model="bert-xxl"), r"comparisons.c.before.model: unknown model 'bert-xxl'"),
        (lambda e: e["after"].update(method="magic"), r"comparisons.c.after.method: unknown method 'magic'"),
        (
            lambda e: e["after"].update(model="tiny-gpt2"),
            r"comparisons.c.after: benchmark 'bec_pro_en' does not apply to model 'tiny-gpt2' of family 'clm'",
        ),
        (
            lambda e: e["after"].update(model="tiny-bert"),
            r"comparisons.c: before and after are the same model and method",
        ),
    ],
)
def test_bad_comparison_entries_name_the_key(config, edit, message):
    entry = {
        "benchmark": "bec_pro_en",
        "before": {"model": "tiny-bert", "method": "pretrained"},
        "after": {"model": "tiny-bert-he", "method": "pretrained"},
    }
    check_comparison("c", entry, config)
    edit(entry)
    with pytest.raises(ConfigError, match=message):
        check_comparison("c", entry, config)
