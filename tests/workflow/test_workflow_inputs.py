"""lmbias.workflow.inputs, params and methods: the inputs and the config slice a job reads, and the pair checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.shipped_config import REPO, shipped_config
from lmbias.errors import ConfigError
from lmbias.workflow import inputs, methods, params, selection


def test_scoring_inputs():
    config = shipped_config()
    assert inputs.scoring_inputs(config, "tiny-bert", "cds", "0", "winobias") == {
        "model_spec": "results/scoring/tiny-bert.json",
        "spec": "results/scoring/cds/winobias.json",
        "benchmark_items": "results/data/winobias.parquet",
        "library": "results/library/winobias.sha256",
        "weights": "resources/models/tiny-bert",
        "method_model": "results/tiny-bert/cds/seed0/model",
        "method_library": [],
    }
    self_debias = inputs.scoring_inputs(config, "tiny-bert", "self_debias", "0", "crows_pairs")
    assert self_debias["method_model"] == [] and self_debias["method_library"] == "results/library/self_debias.sha256"
    assert inputs.model_weights_input(config, "bert-base") == "resources/models/bert-base"  # a hub model's folder


def test_scoring_refuses_what_the_pair_cannot_run():
    config = shipped_config()
    with pytest.raises(ConfigError, match=r"runs seed\(s\) 0, not '1'"):
        inputs.scoring_inputs(config, "tiny-bert", "cds", "1", "winobias")
    with pytest.raises(ConfigError, match="logprob"):
        inputs.scoring_inputs(config, "tiny-gpt2", "pretrained", "0", "logprob")
    config["models"]["local"] = {"family": "mlm", "path": "/no/such/folder"}
    with pytest.raises(ConfigError, match=r"^models\.local\.path: model folder /no/such/folder does not exist"):
        inputs.model_weights_input(config, "local")


def test_metric_inputs():
    config = shipped_config()
    chosen = selection.BenchmarkSelection(config)
    seed = inputs.seed_metric_inputs(config, chosen, "tiny-bert", "online", "0")
    assert seed == {  # every benchmark's scores through the seed's one scoring job (rule score_model)
        "scores": ["results/tiny-bert/online/seed0/scores.json"],
        "library": ["results/library/winobias.sha256"],
    }
    # one benchmark's metrics: always its own score file (rule score_benchmark), summary or not, so that such a
    # target costs that benchmark alone
    assert (
        inputs.metric_inputs(config, "tiny-bert", "cds", "0", "seat")["scores"]
        == "results/tiny-bert/cds/seed0/scores/seat.parquet"
    )
    assert (
        inputs.metric_inputs(config, "tiny-bert", "online", "0", "seat")["scores"]
        == "results/tiny-bert/online/seed0/scores/seat.parquet"
    )
    assert inputs.scoring_inputs(config, "tiny-bert", "cds", "0", "seat")["spec"] == ("results/scoring/cds/seat.json")
    scoring = inputs.model_scoring_inputs(config, chosen, "tiny-bert", "online", "0")
    assert scoring == {
        "model_spec": "results/scoring/tiny-bert.json",
        "spec": ["results/scoring/online/winobias.json"],
        "benchmark_items": ["results/data/winobias.parquet"],
        "library": ["results/library/winobias.sha256"],
        "weights": "resources/models/tiny-bert",
        "method_model": [],
    }
    scoring = inputs.model_scoring_inputs(config, chosen, "tiny-gpt2", "self_debias", "0")
    assert "results/library/self_debias.sha256" in scoring["library"]
    assert scoring["benchmark_items"] == [
        inputs.benchmark_items_file(b) for b in chosen.summary_benchmarks("tiny-gpt2", "self_debias")
    ]
    metrics = inputs.summary_metric_files(config, chosen, "tiny-bert", "cds")
    assert metrics == ["results/tiny-bert/cds/seed0/metrics.parquet"]


def test_method_job_inputs_and_library_sets():
    config = shipped_config()
    assert inputs.method_job_inputs(config, "tiny-bert", "cds") == {
        "corpus": "results/corpora/gap/cds-1.0.parquet",
        "weights": "resources/models/tiny-bert",
        "library": "results/library/finetune.sha256",
    }
    assert inputs.method_job_inputs(config, "tiny-bert", "sd")["library"] == "results/library/sentence_debias.sha256"
    assert inputs.sd_pair_files(config, "tiny-bert", "sd") == {}
    sets = inputs.library_sets(config, REPO)
    assert str(REPO / "src/lmbias/engine/scoring.py") in sets["winobias"]
    # the module the causal scoring paths take their log-probabilities from: editing it reruns every benchmark
    assert all(
        str(REPO / "src/lmbias/engine/scored_logits.py") in files for files in (sets["winobias"], sets["crows_pairs"])
    )
    assert sets["self_debias"] == [str(REPO / "src/lmbias/engine/self_debias.py")]
    assert str(REPO / "src/lmbias/training/inlp.py") not in sets["finetune"]
    comparison = inputs.comparison_inputs(config, selection.BenchmarkSelection(config), "tiny-bert-cds", Path("/base"))
    assert comparison["before"] == ["results/tiny-bert/pretrained/seed0/scores.json"]
    assert comparison["library"][1:] == [
        "/base/src/lmbias/metrics/comparison.py",
        "/base/src/lmbias/metrics/summary.py",
    ]


def test_method_corpus_must_be_built():
    config = shipped_config()
    config["methods"]["cds"]["corpus"] = "results/corpora/gap/nothing.parquet"
    with pytest.raises(ConfigError, match=r"^methods\.cds\.corpus: 'results/corpora/gap/nothing\.parquet' is not"):
        methods.resolved_method(config, "tiny-bert", "cds")


def test_params_slices():
    config = shipped_config()
    assert params.model_entry(config, "bert-base") == {
        "hub_id": "bert-base-uncased",
        "family": "mlm",
        "revision": "main",
        "snapshot": "resources/models/bert-base",
    }
    assert params.method_entry(config, "tiny-bert", "cds") == {"kind": "cds"}
    self_debias = params.method_entry(config, "tiny-bert", "self_debias")
    assert set(self_debias) == {"kind", "prefix", "decay_constant", "epsilon"}
    online = params.metric_slice(config, "online", "winobias")["metric"]["online_skew"]
    assert "none" not in online and online
    assert "metric" not in params.benchmark_scoring_slice(config, "winobias")
    config["models"]["tiny-bert"]["max_tokens"] = 123
    assert params.scoring_max_tokens(config, "tiny-bert") == 123
    assert "max_tokens" not in params.model_entry(config, "tiny-bert")
    slices = params.summary_config_slices(config, selection.BenchmarkSelection(config), "tiny-bert", "online")
    assert list(slices["benchmarks"]) == ["winobias"] and slices["seeds"] == [0]
    # full fine-tuning keeps float32 master weights (no dtype); a LoRA method's frozen base loads in it
    assert "dtype" not in params.training_model_entry(config, "qwen2.5-7b", "cds")
    assert params.training_model_entry(config, "qwen2.5-7b", "cds-lora")["dtype"] == "auto"
    assert params.fitting_model_entry(config, "qwen2.5-7b")["dtype"] == "auto"
