"""lmbias.workflow.constraints: the wildcards take configured names only, and the reject_* rules' patterns
match exactly the paths naming something the config does not define."""

from __future__ import annotations

import re

from helpers.shipped_config import shipped_config
from lmbias.workflow import constraints


def test_alternatives_are_escaped_and_sorted():
    assert constraints.alternatives(["b.c", "a"]) == r"a|b\.c"
    assert constraints.alternatives([]) == ""


def test_global_constraints_admit_configured_names_only():
    config = shipped_config()
    found = constraints.global_constraints(config)
    assert re.fullmatch(found["model"], "tiny-bert") and not re.fullmatch(found["model"], "tiny-bertx")
    assert re.fullmatch(found["method"], "cds@swap_rate=0.7")
    assert found["seed"] == r"\d+"
    for library in ("finetune", "sentence_debias", "inlp", "self_debias", "winobias", "bec_pro"):
        assert re.fullmatch(found["library"], library)
    config.pop("comparisons")
    assert constraints.global_constraints(config)["comparison"] == "(?!)"


def test_methods_of_kinds():
    config = shipped_config()
    assert constraints.methods_of_kinds(config, {"inlp"}) == r"inlp|inlp\-biasbench"
    assert constraints.methods_of_kinds(config, {"no-kind"}) == "(?!)"


def test_result_paths_of_the_config_are_not_rejected():
    config = shipped_config()
    valid = re.compile(constraints.valid_result_paths(config))
    assert valid.match("tiny-bert/cds/seed0/scores/winobias.parquet")
    assert valid.match("tiny-bert/cds/seed0/metrics/winobias.parquet")
    assert not valid.match("tiny-bert/cds/seed1/scores/winobias.parquet")  # seeds: [0]
    assert not valid.match("tiny-bert/cds/seed0/scores/wino.parquet")
    assert not valid.match("nobody/cds/seed0/scores/winobias.parquet")
    pattern = constraints.unknown_result_model(config)
    assert not re.match(pattern, "tiny-bert/cds/seed0/scores/winobias.parquet")
    assert re.match(pattern, "tiny-bert/cds/seed7/scores/winobias.parquet")


def test_unknown_model_method_and_folder_patterns():
    config = shipped_config()
    assert not re.match(constraints.unknown_model(config), "tiny-bert/cds/summary.parquet")
    assert re.match(constraints.unknown_model(config), "tiny-bertx/cds/summary.parquet")
    assert not re.match(constraints.unknown_method(config), "cds/summary.parquet")
    assert re.match(constraints.unknown_method(config), "cdsx/summary.parquet")
    assert not re.fullmatch(constraints.unknown_model_folder(config), "tiny-bert")
    assert re.fullmatch(constraints.unknown_model_folder(config), "tiny-bertx")
    assert not re.match(constraints.unknown_seed_metrics_model(config), "tiny-bert/cds/seed0/metrics.parquet")
    assert re.match(constraints.unknown_seed_metrics_model(config), "tiny-bert/cds/seed3/metrics.parquet")
    assert not re.match(constraints.unknown_seed_scores_model(config), "tiny-bert/cds/seed0/scores.json")
    assert re.match(constraints.unknown_seed_scores_model(config), "tiny-bert/cds/seed3/scores.json")
    assert re.match(constraints.unknown_seed_scores_model(config), "nobody/cds/seed0/scores.json")


def test_unknown_comparison_pattern():
    config = shipped_config()
    assert not re.fullmatch(constraints.unknown_comparison(config), "tiny-bert-cds.parquet")
    assert re.fullmatch(constraints.unknown_comparison(config), "other.parquet")
    config["comparisons"] = {}
    assert constraints.unknown_comparison(config) == "[^/]+"
