"""lmbias.workflow.refusals: a path naming what the config does not define fails, naming it and the
configured names."""

from __future__ import annotations

import pytest

from helpers.shipped_config import shipped_config
from lmbias.errors import ConfigError
from lmbias.workflow import refusals


def test_summary_path_names_the_unknown_model_then_method():
    config = shipped_config()
    with pytest.raises(ConfigError, match=r"^unknown model 'x' in the target path; models configured in"):
        refusals.reject_unknown_target(config, "x", "cds")
    with pytest.raises(ConfigError, match=r"^unknown method 'y' in the target path"):
        refusals.reject_unknown_target(config, "tiny-bert", "y")
    with pytest.raises(ConfigError, match=r"^results/tiny-bert/cds/summary\.parquet: no rule can build it$"):
        refusals.reject_unknown_target(config, "tiny-bert", "cds")


def test_result_path_names_benchmark_and_seed():
    config = shipped_config()
    with pytest.raises(ConfigError, match=r"^results/tiny-bert/cds/seed0/scores/wino\.parquet: unknown benchmark"):
        refusals.reject_unknown_result(config, "tiny-bert", "cds", "0", "scores", "wino")
    with pytest.raises(ConfigError, match=r"method 'cds' runs seed\(s\) 0, not '3' \(config key `seeds`\)"):
        refusals.reject_unknown_result(config, "tiny-bert", "cds", "3", "metrics", "winobias")
    with pytest.raises(ConfigError, match=r"not 'x1'"):
        refusals.reject_unknown_seed_metrics(config, "tiny-bert", "cds", "x1")
    with pytest.raises(ConfigError, match=r"^results/nobody/cds/seed0/metrics\.parquet: unknown model 'nobody'"):
        refusals.reject_unknown_seed_metrics(config, "nobody", "cds", "0")
    with pytest.raises(ConfigError, match=r"^results/tiny-bert/cds/seed3/scores\.json: method 'cds' runs seed"):
        refusals.reject_unknown_seed_metrics(config, "tiny-bert", "cds", "3", "scores.json")


def test_model_folder_and_comparison():
    config = shipped_config()
    with pytest.raises(
        ConfigError, match=r"only models with a `tiny:` or `gguf:` entry are built here \(configured: .*tiny-bert"
    ):
        refusals.reject_unknown_model_folder(config, "bert-base")
    with pytest.raises(ConfigError, match=r"unknown comparison 'c'.*configured in config\.yaml: tiny-bert-cds"):
        refusals.reject_unknown_comparison(config, "c")
    config["comparisons"] = {}
    with pytest.raises(ConfigError, match=r"configured in config\.yaml: none$"):
        refusals.reject_unknown_comparison(config, "c")
