"""lmbias.workflow.targets: what the default target and `corpora` expand to."""

from __future__ import annotations

from helpers.shipped_config import shipped_config
from lmbias.workflow import targets


def test_default_target():
    config = shipped_config()
    config["targets"] = {"models": ["tiny-bert", "tiny-gpt2"], "methods": ["pretrained", "cds"], "comparisons": ["c"]}
    assert targets.all_targets(config) == [
        "results/tiny-bert/pretrained/summary.parquet",
        "results/tiny-bert/cds/summary.parquet",
        "results/tiny-gpt2/pretrained/summary.parquet",
        "results/tiny-gpt2/cds/summary.parquet",
        "results/tables/paired/c.parquet",
        "results/summary.md",
    ]
    del config["targets"]["comparisons"]
    assert targets.default_target_comparisons(config) == []


def test_corpora_target_fills_templates_with_the_swap_rates_in_use():
    config = shipped_config()
    out = targets.corpora_targets(config)
    assert out[0] == "results/corpora/gap/sentences.parquet"
    assert "results/corpora/gap/cds-1.0.parquet" in out and "results/corpora/gap/cds-0.65.parquet" in out
    assert not any("{swap_rate}" in path for path in out)
    assert len(out) == len(set(out))
    assert not any("ontonotes" in path for path in out)  # GPR only with corpora.ontonotes.path
    for entry in list(config["models"].values()) + list(config["methods"].values()):
        (entry.get("training") or {}).pop("swap_rate", None)
    assert not any("cds-0.65" in path for path in targets.corpora_targets(config))
