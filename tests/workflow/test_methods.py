"""Methods (config.yaml `methods`): resolution per model (lmbias.registry) and their place in the DAG.

Known answers: the over-debiasing paper's Table 12 reaches the trainer settings of bert-large/gpt2-medium/
bart-large; a method a family cannot run, an unknown kind and a misspelt key fail at DAG-build time.
"""

from __future__ import annotations

import pytest
import yaml

from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_files, write_config
from lmbias.errors import ConfigError
from lmbias.methods import resolution


@pytest.fixture(scope="module")
def config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


def _resolve(config, model, method):
    return resolution.resolve_method(model, config["models"][model], method, config["methods"][method])


@pytest.mark.parametrize(
    "model, batch, lr, swap, lam, ratio",
    [
        ("bert-base", 8, 2e-5, 1.0, 0.5, 0.05),
        ("bert-large", 2, 2e-5, 1.0, 0.5, 0.05),
        ("gpt2", 8, 5e-5, 0.9, 0.5, 1.0),
        ("gpt2-medium", 2, 5e-5, 0.9, 1.0, 1.0),
        ("bart-base", 8, 2e-5, 1.0, 1.25, 0.07),
        ("bart-large", 2, 2e-5, 1.0, 1.25, 0.07),
    ],
)
def test_table12_defaults_reach_the_trainer(config, model, batch, lr, swap, lam, ratio):
    cds = _resolve(config, model, "cds")
    assert cds["settings"]["batch_size"] == batch and cds["settings"]["learning_rate"] == lr
    assert cds["settings"]["epochs"] == 8
    assert "er_lambda" not in cds["settings"]  # the model's ER default must not turn CDS into ER
    assert cds["corpus"] == f"results/corpora/gap/cds-{swap}.parquet"
    assert _resolve(config, model, "er")["settings"]["er_lambda"] == lam
    assert _resolve(config, model, "sd")["sd_settings"] == {"ratio_of_pairs": ratio}
    objective = {"mlm": "mlm", "clm": "clm", "seq2seq": "infilling"}[config["models"][model]["family"]]
    assert cds["settings"]["objective"] == objective


def test_method_training_block_wins_over_model_defaults(config):
    entry = {**config["methods"]["cda"], "training": {"learning_rate": 1e-3, "max_steps": 3}}
    got = resolution.resolve_method("bert-base", config["models"]["bert-base"], "cda", entry)["settings"]
    assert got["learning_rate"] == 1e-3 and got["max_steps"] == 3 and got["batch_size"] == 8


def test_gpr_settings(config):
    got = _resolve(config, "bert-base", "gpr-u")
    assert got["settings"]["objective"] == "gpr" and got["settings"]["select_epoch"] == "validation_accuracy"
    assert got["settings"]["epochs"] == 10 and got["settings"]["dropout"] == 0.1


@pytest.mark.parametrize(
    "model, method, message",
    [
        ("gpt2", "gpr-u", "method 'gpr-u' (kind gpr) cannot run on model 'gpt2' of family 'clm'"),
        ("bart-base", "gpr-a", "method 'gpr-a' (kind gpr) cannot run on model 'bart-base' of family 'seq2seq'"),
    ],
)
def test_family_cannot_run_method(config, model, method, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _resolve(config, model, method)


def test_encoder_family_runs_only_pretrained():
    entry = {"family": "encoder", "path": "x", "revision": "local"}
    with pytest.raises(ConfigError, match="method 'cds' .* cannot run on model 'minilm'"):
        resolution.check_method_family("minilm", "encoder", "cds", {"kind": "cds", "corpus": "c"})
    resolution.check_method_family("minilm", entry["family"], "pretrained", {"kind": "pretrained"})


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"kind": "cdss"}, "methods.m.kind: 'cdss' is not a method kind"),
        ({"kind": "cds", "corpus": "c", "trainig": {}}, "methods.m.trainig: unknown key for kind 'cds'"),
        (
            {"kind": "cds", "corpus": "c", "training": {"learning_rte": 1}},
            "methods.m.training.learning_rte: unknown training setting",
        ),
        (
            {"kind": "cds", "corpus": "c", "training": {"objective": "clm"}},
            "methods.m.training.objective: not settable",
        ),
        ({"kind": "cda"}, "methods.m.corpus: kind 'cda' needs a corpus"),
        ({"kind": "online", "corpus": "c"}, "methods.m.corpus: unknown key for kind 'online'"),
    ],
)
def test_bad_method_entries(entry, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolution.check_method_entry("m", entry)


def test_seeds_per_kind():
    assert resolution.seeds_for({"kind": "cds"}, [0, 1, 2]) == [0, 1, 2]
    for kind in ("pretrained", "online", "sd"):
        assert resolution.seeds_for({"kind": kind}, [3, 4]) == [0]


# --------------------------------------------------------------------------------------- the DAG (dry runs)


@pytest.fixture(scope="module")
def dag_workdir(tmp_path_factory, repo_root):
    return copy_workflow(repo_root, tmp_path_factory.mktemp("methods-dag"))


def test_dry_run_chain_corpus_finetune_scores_metrics_summary(dag_workdir, shared_data):
    proc = run_snakemake(
        dag_workdir, "-n", "results/bert-large/cds/summary.parquet", "--config", f"data_dir={shared_data}"
    )
    out = scheduled_files(proc)  # the score files through their score_model job
    assert "results/corpora/gap/cds-1.0.parquet" in out
    assert "results/bert-large/cds/seed0/model" in out
    assert "results/bert-large/cds/seed0/scores/bec_pro_en.parquet" in out
    assert "results/bert-large/cds/seed0/metrics.parquet" in out
    assert "results/bert-large/cds/summary.parquet" in out


def test_dry_run_online_scores_winobias_only(dag_workdir, shared_data):
    proc = run_snakemake(
        dag_workdir, "-n", "results/tiny-bert/online/summary.parquet", "--config", f"data_dir={shared_data}"
    )
    out = scheduled_files(proc)
    assert [o for o in out if "/scores/" in o] == ["results/tiny-bert/online/seed0/scores/winobias.parquet"]
    assert not [o for o in out if o.endswith("/model")]


@pytest.mark.parametrize(
    "target, edit, message",
    [
        (
            "results/tiny-gpt2/gpr-u/summary.parquet",
            None,
            "method 'gpr-u' (kind gpr) cannot run on model 'tiny-gpt2' of family 'clm'",
        ),
        ("results/tiny-bert/cds/summary.parquet", lambda c: c["methods"]["cds"].update(kind="cdx"), "methods.cds.kind"),
        (
            "results/tiny-bert/cds/summary.parquet",
            lambda c: c["methods"]["cds"].update(swap_rate=0.5),
            "methods.cds.swap_rate: unknown key",
        ),
        (
            "results/tiny-bert/cds/summary.parquet",
            lambda c: c["methods"]["cds"].update(ratio_of_pairs=0.5),
            "methods.cds.ratio_of_pairs: unknown key for kind 'cds'",
        ),
        (
            "results/tiny-bert/cda/summary.parquet",
            lambda c: c["methods"]["cda"].update(corpus="results/corpora/gap/cda-nope.parquet"),
            "methods.cda.corpus: 'results/corpora/gap/cda-nope.parquet' is not a corpus this config builds",
        ),
        (
            "results/tiny-bert/cds/summary.parquet",
            lambda c: c["methods"]["cds"].update(benchmarks=["winobias", "seat_v9"]),
            "methods.cds.benchmarks[1]: unknown benchmark 'seat_v9'",
        ),
        (
            "results/tiny-bert/cds/summary.parquet",
            lambda c: c["methods"]["cds"].update(benchmarks=["bec_pro_en"]) or c.update(only_benchmarks=["winobias"]),
            "or methods.cds.benchmarks, leaves none",
        ),
    ],
)
def test_dag_build_errors(dag_workdir, shared_data, target, edit, message):
    args = ["-n", target, "--config", f"data_dir={shared_data}"]
    if edit is not None:
        args += ["--configfile", str(write_config(dag_workdir, edit))]
    proc = run_snakemake(dag_workdir, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


@pytest.mark.parametrize("value", [[], "winobias", [""], [3]])
def test_a_methods_benchmark_list_must_be_names(value):
    from lmbias.errors import ConfigError
    from lmbias.methods.resolution import check_method_entry, method_benchmark_choice

    with pytest.raises(ConfigError, match=r"methods.cds-x.benchmarks: expected a non-empty list of benchmark names"):
        check_method_entry("cds-x", {"kind": "cds", "corpus": "c", "benchmarks": value})
    entry = {"kind": "cds", "corpus": "c", "benchmarks": ["winobias"]}
    check_method_entry("cds-x", entry)
    assert method_benchmark_choice("cds-x@swap_rate=0.7", entry, "winobias") is None
    assert method_benchmark_choice("cds-x@swap_rate=0.7", entry, "seat_v1") == "not in methods.cds-x.benchmarks"
    assert method_benchmark_choice("cds-x", {"kind": "cds"}, "seat_v1") is None
