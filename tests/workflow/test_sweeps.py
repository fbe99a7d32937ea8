"""Sweeps (config.yaml `methods.<name>.sweep`, the over-debiasing paper's Table 11): expansion into plain
methods named <name>@<setting>=<value>, `{swap_rate}` corpus templates, targets `<name>@*`, bad input, and
their place in the DAG (dry runs on a copy of the workflow).
"""

from __future__ import annotations

import re

import pytest
import yaml

from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_files, scheduled_outputs, write_config
from lmbias.corpora import jobs as corpora
from lmbias.errors import ConfigError
from lmbias.methods import resolution, sweeps

TABLE11 = {
    "cds": ("swap_rate", [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]),
    "er": ("er_lambda", [0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0]),
    "sd": ("ratio_of_pairs", [0.01, 0.05, 0.1, 0.15, 0.2, 0.4, 0.6, 1.0]),
}


@pytest.fixture(scope="module")
def config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


def _expanded(config):
    return sweeps.expand_sweeps(config["methods"])


# ------------------------------------------------------------------------------------------ expansion


def test_config_yaml_declares_table11_and_keeps_the_defaults(config):
    methods = _expanded(config)
    for base, (setting, values) in TABLE11.items():
        assert config["methods"][base]["sweep"] == {setting: values}
        assert "sweep" not in methods[base]  # the Table 12 default, its slice free of the grid
        assert sweeps.sweep_instances(base, methods) == [f"{base}@{setting}={v!r}" for v in values]
        # the recipe of the authors' code sweeps the same grid (paper_over_debiasing reads it)
        recipe = f"{base}-dagender"
        assert config["methods"][recipe]["sweep"] == {setting: values}
        assert sweeps.sweep_instances(recipe, methods) == [f"{recipe}@{setting}={v!r}" for v in values]
    assert len(methods) == len(config["methods"]) + 2 * 24


def test_each_value_goes_where_its_setting_lives(config):
    methods = _expanded(config)
    assert methods["cds@swap_rate=0.7"] == {
        "kind": "cds",
        "corpus": config["methods"]["cds"]["corpus"],
        "training": {"swap_rate": 0.7},
    }
    assert methods["er@er_lambda=2.0"]["training"] == {"er_lambda": 2.0}
    assert (
        methods["sd@ratio_of_pairs=0.01"]["ratio_of_pairs"] == 0.01
        and "training" not in methods["sd@ratio_of_pairs=0.01"]
    )


@pytest.mark.parametrize("model, swap, lam, ratio", [("bert-base", 1.0, 0.5, 0.05), ("gpt2", 0.9, 0.5, 1.0)])
def test_instances_resolve_over_table12_defaults(config, model, swap, lam, ratio):
    methods, entry = _expanded(config), config["models"][model]

    def resolve(name):
        return resolution.resolve_method(model, entry, name, methods[name])

    assert resolve("cds")["corpus"] == f"results/corpora/gap/cds-{swap}.parquet"
    cds = resolve("cds@swap_rate=0.65")
    assert cds["corpus"] == "results/corpora/gap/cds-0.65.parquet"
    assert cds["settings"] == resolve("cds")["settings"]  # only the corpus differs
    assert resolve("er")["settings"]["er_lambda"] == lam
    assert resolve("er@er_lambda=0.3")["settings"] == {**resolve("er")["settings"], "er_lambda": 0.3}
    assert resolve("sd")["sd_settings"] == {"ratio_of_pairs": ratio}
    assert resolve("sd@ratio_of_pairs=0.15")["sd_settings"] == {"ratio_of_pairs": 0.15}


def test_names_floats_shortest_ints_as_written_and_combinations():
    methods = {
        "cds": {
            "kind": "cds",
            "corpus": "c-{swap_rate}",
            "training": {"epochs": 8},
            "sweep": {"swap_rate": [1, 0.5], "epochs": [2, 3]},
        },
        "er": {"kind": "er", "corpus": "c", "sweep": {"lambda": [1, 1.25], "learning_rate": [2e-5]}},
    }
    out = sweeps.expand_sweeps(methods)
    assert list(out) == [
        "cds",
        "er",
        "cds@epochs=2,swap_rate=1.0",
        "cds@epochs=3,swap_rate=1.0",
        "cds@epochs=2,swap_rate=0.5",
        "cds@epochs=3,swap_rate=0.5",
        "er@er_lambda=1.0,learning_rate=2e-05",
        "er@er_lambda=1.25,learning_rate=2e-05",
    ]
    assert out["cds"] == {"kind": "cds", "corpus": "c-{swap_rate}", "training": {"epochs": 8}}
    assert out["cds@epochs=3,swap_rate=0.5"]["training"] == {"epochs": 3, "swap_rate": 0.5}
    assert isinstance(out["cds@epochs=3,swap_rate=0.5"]["training"]["epochs"], int)
    assert out["er@er_lambda=1.25,learning_rate=2e-05"]["training"] == {"er_lambda": 1.25, "learning_rate": 2e-5}
    assert methods["cds"]["sweep"]  # the input is left alone


def test_an_entry_without_sweep_passes_through():
    methods = {"pretrained": {"kind": "pretrained"}, "sd": {"kind": "sd", "corpus": "c", "k": 2}}
    assert sweeps.expand_sweeps(methods) == methods


CDS = {"kind": "cds", "corpus": "results/corpora/gap/cds-{swap_rate}.parquet"}


@pytest.mark.parametrize(
    "name, entry, message",
    [
        (
            "cds",
            {**CDS, "sweep": {"swap_rte": [0.6]}},
            "methods.cds.sweep.swap_rte: not a sweepable setting of kind 'cds' (sweepable: epochs, "
            "learning_rate, swap_rate)",
        ),
        (
            "cds",
            {**CDS, "sweep": {"er_lambda": [0.5]}},
            "methods.cds.sweep.er_lambda: not a sweepable setting of kind 'cds'",
        ),
        (
            "er",
            {"kind": "er", "corpus": "c", "sweep": {"swap_rate": [0.5]}},
            "methods.er.sweep.swap_rate: not a sweepable setting of kind 'er' (sweepable: epochs, er_lambda, "
            "learning_rate, lambda)",
        ),
        (
            "sd",
            {"kind": "sd", "corpus": "c", "sweep": {"learning_rate": [1e-5]}},
            "methods.sd.sweep.learning_rate: not a sweepable setting of kind 'sd' (sweepable: k, ratio_of_pairs)",
        ),
        ("cds", {**CDS, "sweep": {"swap_rate": []}}, "methods.cds.sweep.swap_rate: empty list"),
        ("cds", {**CDS, "sweep": {}}, "methods.cds.sweep: empty"),
        (
            "cds",
            {**CDS, "sweep": {"swap_rate": 0.6}},
            "methods.cds.sweep.swap_rate: expected a list of values, got 0.6",
        ),
        ("cds", {**CDS, "sweep": [0.6]}, "methods.cds.sweep: expected a mapping of setting -> list of values"),
        ("cds", {**CDS, "sweep": {"swap_rate": [0.6, "0.7"]}}, "methods.cds.sweep.swap_rate[1]: '0.7' is not a number"),
        ("cds", {**CDS, "sweep": {"swap_rate": [True]}}, "methods.cds.sweep.swap_rate[0]: True is not a number"),
        (
            "cds",
            {**CDS, "sweep": {"swap_rate": [0.6, 1.5]}},
            "methods.cds.sweep.swap_rate[1]: 1.5 is out of range; swap_rate must be in (0, 1]",
        ),
        (
            "cds",
            {**CDS, "sweep": {"swap_rate": [0]}},
            "methods.cds.sweep.swap_rate[0]: 0.0 is out of range; swap_rate must be in (0, 1]",
        ),
        (
            "sd",
            {"kind": "sd", "corpus": "c", "sweep": {"ratio_of_pairs": [0.0]}},
            "methods.sd.sweep.ratio_of_pairs[0]: 0.0 is out of range; ratio_of_pairs must be in (0, 1]",
        ),
        (
            "sd",
            {"kind": "sd", "corpus": "c", "sweep": {"ratio_of_pairs": [1.01]}},
            "methods.sd.sweep.ratio_of_pairs[0]: 1.01 is out of range",
        ),
        (
            "er",
            {"kind": "er", "corpus": "c", "sweep": {"lambda": [0.5, -0.1]}},
            "methods.er.sweep.lambda[1]: -0.1 is out of range; er_lambda must be > 0",
        ),
        # the training settings' own rule (er_lambda > 0), so a sweep never expands to a job that fails inside
        (
            "er",
            {"kind": "er", "corpus": "c", "sweep": {"lambda": [0, 0.5]}},
            "methods.er.sweep.lambda[0]: 0.0 is out of range; er_lambda must be > 0",
        ),
        (
            "er",
            {"kind": "er", "corpus": "c", "sweep": {"er_lambda": [float("inf")]}},
            "methods.er.sweep.er_lambda[0]: inf is not a finite number",
        ),
        (
            "er",
            {"kind": "er", "corpus": "c", "sweep": {"er_lambda": [float("nan")]}},
            "methods.er.sweep.er_lambda[0]: nan is not a finite number",
        ),
        (
            "cds",
            {**CDS, "sweep": {"swap_rate": [0.6, 0.7, 0.70]}},
            "methods.cds.sweep.swap_rate[2]: 0.7 repeats methods.cds.sweep.swap_rate[1]",
        ),
        (
            "cds",
            {**CDS, "sweep": {"swap_rate": [1, 1.0]}},
            "methods.cds.sweep.swap_rate[1]: 1.0 repeats methods.cds.sweep.swap_rate[0]",
        ),
        (
            "cda",
            {"kind": "cda", "corpus": "c", "sweep": {"epochs": [2.5]}},
            "methods.cda.sweep.epochs[0]: 2.5 is not an integer",
        ),
        (
            "cda",
            {"kind": "cda", "corpus": "c", "sweep": {"epochs": [0]}},
            "methods.cda.sweep.epochs[0]: 0 is out of range; epochs must be >= 1",
        ),
        (
            "er",
            {"kind": "er", "corpus": "c", "sweep": {"lambda": [0.5], "er_lambda": [1.0]}},
            "methods.er.sweep.er_lambda: names the same setting as sweep.lambda (er_lambda); keep one",
        ),
        (
            "pretrained",
            {"kind": "pretrained", "sweep": {"swap_rate": [0.5]}},
            "methods.pretrained.sweep: kind 'pretrained' has no settings to sweep",
        ),
        (
            "online",
            {"kind": "online", "sweep": {"er_lambda": [0.5]}},
            "methods.online.sweep: kind 'online' has no settings to sweep",
        ),
        (
            "cds",
            {"kind": "cds", "corpus": "results/corpora/gap/cds-1.0.parquet", "sweep": {"swap_rate": [0.6]}},
            "methods.cds.sweep.swap_rate: the corpus 'results/corpora/gap/cds-1.0.parquet' has no "
            '"{swap_rate}" placeholder',
        ),
    ],
)
def test_bad_sweeps_name_the_key(name, entry, message):
    with pytest.raises(ConfigError) as error:
        sweeps.expand_sweeps({name: entry})
    assert message in str(error.value)


def test_instance_name_collision_is_named():
    # The schema keeps '@' out of configured names; the library checks anyway.
    methods = {
        "cds": {**CDS, "sweep": {"swap_rate": [0.7]}},
        "cds@swap_rate=0.7": {**CDS, "training": {"swap_rate": 0.7}},
    }
    with pytest.raises(
        ConfigError,
        match=re.escape("methods.cds.sweep: its instance 'cds@swap_rate=0.7' collides with an existing method"),
    ):
        sweeps.expand_sweeps(methods)


def test_targets_base_name_is_the_default_and_name_at_star_the_instances(config):
    methods = config["methods"]
    got = sweeps.expand_method_targets(
        ["pretrained", "sd", "sd@*", "er@er_lambda=1.5", "sd@ratio_of_pairs=0.2"], methods
    )
    assert got == ["pretrained", "sd"] + [f"sd@ratio_of_pairs={v!r}" for v in TABLE11["sd"][1]] + ["er@er_lambda=1.5"]


@pytest.mark.parametrize(
    "targets, message",
    [
        (["pretrained@*"], "targets.methods[0]: 'pretrained@*': methods.pretrained declares no sweep"),
        (["cds", "nope@*"], "targets.methods[1]: 'nope@*' names unknown method 'nope'"),
        (["cds@swap_rate=0.33"], "targets.methods[0]: unknown method 'cds@swap_rate=0.33'; configured:"),
        (["pretrained", "cdss"], "targets.methods[1]: unknown method 'cdss'"),
    ],
)
def test_bad_method_targets_are_named(config, targets, message):
    with pytest.raises(ConfigError) as error:
        sweeps.expand_method_targets(targets, config["methods"])
    assert message in str(error.value)


# --------------------------------------------------------------------------------- {swap_rate} corpora

TEMPLATED = {
    "cds-1.0": {"method": "cds", "intervention": "naive", "swap_rate": 1.0},
    "cds-{swap_rate}": {"method": "cds", "intervention": "grammatical", "seed": 0},
}


def test_template_builds_any_rate_and_a_named_entry_wins():
    assert corpora.resolve_intervention(TEMPLATED, "cds-0.7", "corpora.gap.interventions") == (
        "corpora.gap.interventions.cds-{swap_rate}",
        {"method": "cds", "intervention": "grammatical", "seed": 0, "swap_rate": 0.7},
    )
    assert corpora.resolve_intervention(TEMPLATED, "cds-1.0", "p")[1]["intervention"] == "naive"
    pattern = re.compile(corpora.intervention_pattern(TEMPLATED))
    for name in ("cds-0.7", "cds-1.0", "cds-1e-05", "cds-0.65"):
        assert pattern.fullmatch(name), name
    for name in ("cds-names-0.9", "cds-", "cda-0.7", "cds-0.7x"):
        assert not pattern.fullmatch(name), name


@pytest.mark.parametrize(
    "name, message",
    [
        ("cds-0.70", "'cds-0.70' writes the swap rate '0.70' non-canonically; the file for that rate is cds-0.7"),
        ("cds-1.5", "'cds-1.5' asks for swap rate 1.5; it must be in (0, 1]"),
        ("cds-abc", "corpora.gap.interventions: no entry builds 'cds-abc'"),
    ],
)
def test_bad_template_files_are_named(name, message):
    with pytest.raises(ConfigError) as error:
        corpora.resolve_intervention(TEMPLATED, name, "corpora.gap.interventions")
    assert message in str(error.value)


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"method": "cda", "intervention": "naive"},
            "corpora.gap.interventions.cds-{swap_rate}.method: only cds interventions take a swap rate",
        ),
        (
            {"method": "cds", "intervention": "naive", "swap_rate": 0.5},
            "corpora.gap.interventions.cds-{swap_rate}.swap_rate: a template takes its swap rate from the file name",
        ),
        (
            {"method": "cds", "intervention": "pos"},
            "corpora.gap.interventions.cds-{swap_rate}.intervention: must be one of",
        ),
    ],
)
def test_bad_templates_are_named(entry, message):
    with pytest.raises(ConfigError) as error:
        corpora.check_corpora_config(
            {"gap": {"interventions": {"cds-{swap_rate}": entry}}}, {"gap": {"dataset": "gap"}}
        )
    assert message in str(error.value)


# ------------------------------------------------------------------------------------ the DAG (dry runs)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, repo_root):
    return copy_workflow(repo_root, tmp_path_factory.mktemp("sweeps-dag"))


def _cheap(config, shared_data, **targets):
    config["data_dir"] = str(shared_data)
    config["only_benchmarks"] = ["winobias", "bec_pro_en"]
    config["targets"].update(targets)
    return config


def test_dry_run_instances_train_on_their_own_corpus_and_compare(workdir, shared_data):
    def edit(config):
        _cheap(config, shared_data)
        config["comparisons"]["cds-sweep"] = {
            "benchmark": "bec_pro_en",
            "test": "wilcoxon",
            "before": {"model": "tiny-bert", "method": "pretrained"},
            "after": {"model": "tiny-bert", "method": "cds@swap_rate=0.7"},
        }

    targets = [
        "results/tiny-bert/cds@swap_rate=0.7/summary.parquet",
        "results/tiny-gpt2/er@er_lambda=2.0/summary.parquet",
        "results/tiny-bart/sd@ratio_of_pairs=0.4/summary.parquet",
        "results/tables/paired/cds-sweep.parquet",
    ]
    proc = run_snakemake(workdir, "-n", *targets, "--configfile", str(write_config(workdir, edit)))
    out = scheduled_files(proc)  # the score files through their score_model job
    assert "results/corpora/gap/cds-0.7.parquet" in out
    assert not [o for o in out if re.fullmatch(r"results/corpora/gap/cds-(?!0\.7\.).*", o)]  # no other rate
    text = proc.stdout + proc.stderr
    # the instance's training job reads the cds-0.7 corpus
    blocks = [
        b
        for b in re.findall(r"rule finetune:\n(.*?)\n\n", text, re.S)
        if "output: results/tiny-bert/cds@swap_rate=0.7/seed0/model" in b
    ]
    assert len(blocks) == 1 and "input: results/corpora/gap/cds-0.7.parquet," in blocks[0], blocks
    for path in (
        "results/tiny-bert/cds@swap_rate=0.7/seed0/scores/winobias.parquet",
        "results/tiny-bert/cds@swap_rate=0.7/seed0/metrics.parquet",
        "results/tiny-gpt2/er@er_lambda=2.0/seed0/model",
        "results/tiny-gpt2/er@er_lambda=2.0/summary.parquet",
        "results/tiny-bart/sd@ratio_of_pairs=0.4/seed0/model",
        "results/tiny-bart/sd@ratio_of_pairs=0.4/seed0/metrics.parquet",
        "results/tables/paired/cds-sweep.parquet",
    ):
        assert path in out, path
    # the defaults are not pulled in; an instance scores with its kind's scoring specs (lmbias.workflow.scoring_specs)
    assert not [o for o in out if ("/cds/" in o or "/er/" in o or "/sd/" in o) and not o.startswith("results/scoring/")]
    assert "results/scoring/cds/winobias.json" in out


def _grid(workdir, shared_data, values):
    def edit(config):
        _cheap(config, shared_data, models=["tiny-bert"], methods=["cds@*", "sd@*"])
        config["methods"]["cds"]["sweep"] = {"swap_rate": values}
        config["methods"]["sd"]["sweep"] = {"ratio_of_pairs": [0.5]}

    return set(scheduled_outputs(run_snakemake(workdir, "-n", "--configfile", str(write_config(workdir, edit)))))


def test_editing_one_swept_value_changes_only_that_instances_jobs(workdir, shared_data):
    before = _grid(workdir, shared_data, [0.6, 0.8])
    after = _grid(workdir, shared_data, [0.6, 0.85])
    assert "results/tiny-bert/sd@ratio_of_pairs=0.5/summary.parquet" in before & after
    gone, new = before - after, after - before
    assert gone and new
    assert all("/cds@swap_rate=0.8/" in p or p == "results/corpora/gap/cds-0.8.parquet" for p in gone), gone
    assert all("/cds@swap_rate=0.85/" in p or p == "results/corpora/gap/cds-0.85.parquet" for p in new), new
    assert {p.replace("0.85", "0.8") for p in new} == gone


@pytest.mark.parametrize(
    "target, edit, message",
    [
        (
            "results/tiny-bert/pretrained/summary.parquet",
            lambda c: c["methods"]["cds"].update(sweep={"swap_rate": [0.6, 1.5]}),
            "methods.cds.sweep.swap_rate[1]: 1.5 is out of range; swap_rate must be in (0, 1] (in ",
        ),
        (
            "results/tiny-bert/pretrained/summary.parquet",
            lambda c: c["targets"].update(methods=["online@*"]),
            "targets.methods[0]: 'online@*': methods.online declares no sweep",
        ),
        (
            "results/tiny-bert/cds@swap_rate=0.33/summary.parquet",
            None,
            "unknown method 'cds@swap_rate=0.33' in the target path",
        ),
        (
            "results/tiny-bert/cds@swap_rate=0.7/seed7/scores/winobias.parquet",
            None,
            "method 'cds@swap_rate=0.7' runs seed(s) 0, not '7'",
        ),
    ],
)
def test_bad_sweep_input_stops_the_dag_naming_it(workdir, shared_data, target, edit, message):
    args = ["-n", target, "--config", f"data_dir={shared_data}"]
    if edit is not None:
        args += ["--configfile", str(write_config(workdir, edit))]
    proc = run_snakemake(workdir, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    if message.endswith("(in "):  # the file that set the key
        assert "edited.yaml)" in proc.stdout + proc.stderr


def test_corpora_target_builds_the_template_for_every_swap_rate_in_use(workdir, shared_data):
    proc = run_snakemake(workdir, "-n", "corpora", "--config", f"data_dir={shared_data}")
    built = {o for o in scheduled_outputs(proc) if re.fullmatch(r"results/corpora/gap/cds-[0-9.]+\.parquet", o)}
    rates = {1.0, 0.9} | set(TABLE11["cds"][1])  # Table 12 defaults (named entries) and the Table 11 sweep
    assert built == {f"results/corpora/gap/cds-{r!r}.parquet" for r in rates}
