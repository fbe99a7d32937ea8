"""lmbias.workflow.selection: the seeds a method runs and the benchmarks a summary holds or leaves out (family,
method kind, the method's list, peer readings, missing data)."""

from __future__ import annotations

import pytest

from helpers.shipped_config import shipped_config
from lmbias.errors import ConfigError
from lmbias.workflow import selection

#: The masked benchmarks of the shipped config, as a hub model's summaries hold them.
MASKED = [
    "bbq",
    "bec_pro_de",
    "bec_pro_en",
    "crows_pairs",
    "da_gender",
    "holistic_bias",
    "honest",
    "logprob",
    "occupations",
    "perplexity_gap",
    "perplexity_wikitext2",
    "seat",
    "seat_v1",
    "seat_v2",
    "stereoset",
    "winobias",
    "winogender",
    "winogenerated",
]
EMBEDDING = {"seat", "seat_v1", "seat_v2"}
#: The shipped tiny models read subsets of BBQ, HolisticBias, HONEST and of CrowS-Pairs' and StereoSet's gender parts
#: in their place (models.<tiny>.stand_ins; the counterfactual pairs do not apply to a masked model).
TINY_SUBSETS = {b: f"{b}-subset" for b in ("bbq", "holistic_bias", "honest", "crows_pairs", "stereoset")}
TINY_MASKED = [TINY_SUBSETS.get(b, b) for b in MASKED]
STOOD_IN = [
    {
        "benchmark": benchmark,
        "reason": f"read through its stand-in '{entry}', a subset of it",
        "config_key": f"models.tiny-bert.stand_ins.{benchmark}",
    }
    for benchmark, entry in TINY_SUBSETS.items()
]


def test_seeds_and_kinds():
    config = shipped_config()
    config["seeds"] = [0, 1, 2]
    assert selection.seeds_for(config, "cds") == [0, 1, 2]
    assert selection.seeds_for(config, "sd") == [0]  # a fit does not depend on the seed
    assert selection.method_names_of_kinds(config, {"self_debias"}) == ["self_debias"]


def test_summary_benchmarks_by_family_and_kind():
    chosen = selection.BenchmarkSelection(shipped_config())
    assert chosen.summary_benchmarks("tiny-bert", "pretrained") == TINY_MASKED
    assert chosen.summary_benchmarks("distilbert", "pretrained") == MASKED  # a hub model in no grid with readings
    causal = chosen.summary_benchmarks("tiny-gpt2", "pretrained")
    assert "logprob" not in causal and "bec_pro_en" not in causal and "winobias" in causal
    assert "bold" in causal and "winogender" in causal  # BOLD generates: causal and seq2seq models only
    assert "bold" not in chosen.summary_benchmarks("tiny-gpt2", "self_debias")  # no generation of its own
    assert chosen.summary_benchmarks("tiny-bert", "online") == ["winobias"]  # online changes WinoBias only
    # Self-Debias changes likelihoods only: neither embeddings nor generations (HONEST reads generations)
    not_self_debias = EMBEDDING | {"honest-subset"}
    assert chosen.summary_benchmarks("tiny-bert", "self_debias") == [b for b in TINY_MASKED if b not in not_self_debias]
    reasons = chosen.left_out("tiny-bert", "self_debias")[len(STOOD_IN) :]
    assert {r["benchmark"] for r in reasons} == not_self_debias
    assert {r["config_key"] for r in reasons} == {"methods.self_debias.kind"}
    assert chosen.left_out("tiny-bert", "pretrained") == STOOD_IN
    assert chosen.left_out("distilbert", "pretrained") == []


def test_a_stand_in_replaces_its_benchmark_for_its_model_only():
    config = shipped_config()
    # holistic_bias and honest read whole again (crows_pairs-subset and stereoset-subset stay tiny-bert's: an entry
    # no model names as a stand-in is an ordinary benchmark of every model)
    config["models"]["tiny-bert"]["stand_ins"] = {b: TINY_SUBSETS[b] for b in ("bbq", "crows_pairs", "stereoset")}
    config["models"]["tiny-bert-he"]["stand_ins"] = {}
    chosen = selection.BenchmarkSelection(config)
    held = chosen.summary_benchmarks("tiny-bert", "pretrained")
    assert held.index("bbq-subset") == MASKED.index("bbq") and "bbq" not in held
    # another tiny model still names holistic_bias-subset: only its summaries hold it
    assert "holistic_bias" in held and "holistic_bias-subset" not in held
    assert chosen.left_out("tiny-bert", "pretrained") == [STOOD_IN[k] for k in (0, 3, 4)]
    assert chosen.summary_benchmarks("tiny-bert-he", "pretrained") == MASKED
    assert "holistic_bias-subset" in chosen.summary_benchmarks("tiny-roberta", "pretrained")
    # only_benchmarks naming the benchmark keeps its stand-in
    config["only_benchmarks"] = ["bbq"]
    assert selection.BenchmarkSelection(config).summary_benchmarks("tiny-bert", "pretrained") == ["bbq-subset"]


def test_a_paper_pair_holds_its_readings():
    chosen = selection.BenchmarkSelection(shipped_config())
    held = chosen.summary_benchmarks("bert-base", "cda-biasbench")
    assert held[-3:] == ["crows_pairs-biasbench", "stereoset-biasbench", "seat-biasbench"]
    assert "crows_pairs-biasbench" not in chosen.summary_benchmarks("tiny-bert", "pretrained")


def test_family_refusal():
    chosen = selection.BenchmarkSelection(shipped_config())
    with pytest.raises(ConfigError, match=r"method 'gpr-u' \(kind gpr\) cannot run on model 'tiny-gpt2' of family"):
        chosen.summary_benchmarks("tiny-gpt2", "gpr-u")


def test_only_benchmarks_and_method_lists():
    config = shipped_config()
    config["only_benchmarks"] = ["winobias", "seat"]
    config["methods"]["cds"]["benchmarks"] = ["winobias"]
    chosen = selection.BenchmarkSelection(config)
    assert chosen.summary_benchmarks("tiny-bert", "pretrained") == ["seat", "winobias"]
    assert chosen.summary_benchmarks("tiny-bert", "cds") == ["winobias"]
    left = {r["benchmark"]: r for r in chosen.left_out("tiny-bert", "cds")}
    assert left["winogender"]["config_key"] == "only_benchmarks"
    assert left["seat"]["config_key"] == "methods.cds.benchmarks"
    config["only_benchmarks"] = ["logprob"]
    with pytest.raises(ConfigError, match=r"^model 'tiny-gpt2': no configured benchmark applies to family 'clm'"):
        selection.BenchmarkSelection(config).summary_benchmarks("tiny-gpt2", "pretrained")


def test_missing_data_stops_unless_opted_out(tmp_path):
    config = shipped_config()
    config["data_dir"] = str(tmp_path)  # an empty folder: every local file is missing
    config["optional_benchmarks"] = ["stereoset"]
    assert selection.missing_benchmark_data(config, "winobias")[1].startswith("data.winobias.files.")
    warnings = []
    chosen = selection.BenchmarkSelection(config, warn=warnings.append)
    with pytest.raises(ConfigError, match=r"^benchmark 'winobias': its data file .* is missing \(data\.winobias\."):
        chosen.verdict("winobias")
    verdict = chosen.verdict("stereoset")
    assert verdict["config_key"] == "optional_benchmarks"
    assert verdict["reason"].endswith("is not in the data_dir folder")
    chosen.verdict("stereoset")
    assert len(warnings) == 1 and "benchmark 'stereoset' left out of summaries (optional_benchmarks)" in warnings[0]
    config["missing_data"] = "skip"
    assert selection.BenchmarkSelection(config).verdict("winobias")["config_key"] == "missing_data"
    assert selection.missing_benchmark_data(config, "logprob") is None  # generated data is never missing
