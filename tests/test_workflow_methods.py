"""Methods end to end on the tiny families, in one shared Snakemake run on a copy of the workflow.

Every tiny family x every method it supports trains (or fits) a few steps and reaches a summary; the
paired table compares tiny-bert pretrained vs cds on BEC-Pro. Then `snakemake -n` says what an edit
would schedule: one method's settings retrain that method only, a scoring option rescores without
retraining, a model's training defaults retrain that model's trained methods only, and a second run
does nothing. The overlay keeps it cheap: GAP validation split, two benchmarks, max_steps 2.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from test_workflow import _copy_workflow, run_snakemake, scheduled_outputs, write_config

pytestmark = pytest.mark.workflow

MLM_METHODS = ["pretrained", "cds", "cda", "er", "sd", "gpr-u", "gpr-a", "online"]
OTHER_METHODS = ["pretrained", "cds", "cda", "er", "sd", "online"]
GRID = {"tiny-bert": MLM_METHODS, "tiny-roberta": MLM_METHODS, "tiny-gpt2": OTHER_METHODS, "tiny-bart": OTHER_METHODS}
PAIRED = "results/tables/paired/tiny-bert-cds.parquet"
TARGETS = [f"results/{m}/{k}/summary.parquet" for m, methods in GRID.items() for k in methods] + [PAIRED]


def _cheap(config: dict, shared_data) -> dict:
    config["data_dir"] = str(shared_data)
    keep = {"gap", "winobias", "bec_pro_en"}
    config["benchmarks"] = {k: v for k, v in config["benchmarks"].items() if k in keep}
    config["optional_benchmarks"] = []  # the shipped [stereoset] names a benchmark this grid drops
    config["benchmarks"]["gap"]["splits"] = ["validation"]
    config["benchmarks"]["winobias"]["types"] = [1]
    config["benchmarks"]["winobias"]["scoring"]["conditions"] = ["professions_masked", "referent_masked"]
    config["benchmarks"]["winobias"]["metric"]["bootstrap"] = 0
    config["benchmarks"]["winobias"]["metric"]["alice_bob"] = False
    config["corpora"]["gap"]["interventions"] = {k: v for k, v in config["corpora"]["gap"]["interventions"].items()
                                                 if k in ("cda-grammatical", "cds-1.0", "cds-0.9")}
    config["corpora"]["ontonotes"].update(path=str(shared_data / "winobias" / "conll_format"), pattern="dev_type1_*_conll")
    for model in GRID:
        config["models"][model]["training"].update(max_steps=2, limit_examples=16, batch_size=4)
    for method in ("gpr-u", "gpr-a"):
        config["methods"][method]["training"]["epochs"] = 2
    config["methods"]["sd"]["limit_sentences"] = 64
    config["comparisons"] = {"tiny-bert-cds": {"benchmark": "bec_pro_en", "test": "wilcoxon",
                                               "before": {"model": "tiny-bert", "method": "pretrained"},
                                               "after": {"model": "tiny-bert", "method": "cds"}}}
    config["targets"]["comparisons"] = []
    return config


@pytest.fixture(scope="session")
def methods_run(tmp_path_factory, repo_root, shared_data):
    workdir = _copy_workflow(repo_root, tmp_path_factory.mktemp("methods"))
    # the cheap config replaces config.yaml (a --configfile overlay can add keys but not remove benchmarks)
    config = _cheap(yaml.safe_load((workdir / "config.yaml").read_text()), shared_data)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run_snakemake(workdir, *TARGETS)
    return workdir


@pytest.mark.parametrize("model", sorted(GRID))
def test_every_supported_method_reaches_a_summary(methods_run, model):
    for method in GRID[model]:
        summary = pq.read_table(methods_run / f"results/{model}/{method}/summary.parquet").to_pandas()
        assert set(summary["method"]) == {method}
        benches = set(summary["benchmark"])
        if method == "online":
            assert benches == {"winobias"}
            assert summary["variant"].str.contains("online_skew=").all()
            assert not summary["variant"].str.contains("online_skew=none").any()
        else:
            assert "winobias" in benches
        if method in ("cds", "cda", "er", "gpr-u", "gpr-a"):
            info = json.loads((methods_run / f"results/{model}/{method}/seed0/model/training.json").read_text())
            assert info["steps"] >= 1 and info["seed"] == 0
            objective = "gpr" if method.startswith("gpr") else {"tiny-gpt2": "clm", "tiny-bart": "infilling"}.get(model, "mlm")
            assert info["settings"]["objective"] == objective
            assert (info["settings"]["er_lambda"] is not None) == (method == "er")
            # the summary says how many processes trained the model it scored (training.json's world_size)
            assert (summary["train_world_size"] == info["world_size"]).all()
        else:  # pretrained, online, sd: nothing trained here
            assert summary["train_world_size"].isna().all()
        assert (summary["score_world_size"] == 1).all() and summary["torch_version"].notna().all()


def test_trained_model_scores_differ_from_pretrained(methods_run):
    before = pq.read_table(methods_run / "results/tiny-bert/pretrained/seed0/scores/bec_pro_en.parquet").to_pandas()
    after = pq.read_table(methods_run / "results/tiny-bert/cds/seed0/scores/bec_pro_en.parquet").to_pandas()
    numeric = [c for c in before.columns if before[c].dtype.kind == "f"]
    assert numeric and not before[numeric].equals(after[numeric]), "scoring must load the fine-tuned folder"


def test_paired_table_compares_pretrained_and_cds(methods_run):
    table = pq.read_table(methods_run / PAIRED).to_pandas()
    assert len(table) > 0


def test_second_run_does_nothing(methods_run):
    proc = run_snakemake(methods_run, "-n", *TARGETS)
    assert scheduled_outputs(proc) == [], (proc.stdout + proc.stderr)[-3000:]


def _dry_run_after(workdir, edit):
    return scheduled_outputs(run_snakemake(workdir, "-n", *TARGETS, "--configfile", str(write_config(workdir, edit))))


def test_editing_one_method_retrains_that_method_only(methods_run):
    out = _dry_run_after(methods_run, lambda c: c["methods"]["cda"].setdefault("training", {}).update(learning_rate=3e-4))
    models = sorted(o for o in out if o.endswith("/model"))
    assert models == [f"results/{m}/cda/seed0/model" for m in sorted(GRID)]
    assert all("/cda/" in o for o in out), out


def test_editing_a_scoring_option_rescores_without_retraining(methods_run):
    out = _dry_run_after(methods_run, lambda c: c["benchmarks"]["bec_pro_en"].setdefault("scoring", {}).update(batch_size=7))
    assert any(o.endswith("/scores/bec_pro_en.parquet") for o in out)
    assert not [o for o in out if o.endswith("/model") or "/corpora/" in o], out


def test_editing_a_model_training_default_retrains_that_model_only(methods_run):
    out = _dry_run_after(methods_run, lambda c: c["models"]["tiny-gpt2"]["training"].update(learning_rate=1e-3))
    models = sorted(o for o in out if o.endswith("/model"))
    # sd reads no learning rate: it is not refitted
    assert models == [f"results/tiny-gpt2/{k}/seed0/model" for k in ("cda", "cds", "er")]
