"""Methods end to end on the tiny families, in one shared Snakemake run on a copy of the workflow.

Every tiny family x every method it supports trains (or fits) a few steps and reaches a summary; the
paired table compares tiny-bert pretrained vs cds on BEC-Pro. Then `snakemake -n` says what an edit
would schedule: one method's settings retrain that method only, a scoring option rescores without
retraining, a model's training defaults retrain that model's trained methods only, and a second run
does nothing. The overlay keeps it cheap: GAP validation split, two benchmarks, max_steps 2, the first 100 lines
of WinoBias' type-1 dev files and the first 150 rows of GAP's validation split (helpers.methods_run.DATA_HEADS).

The same run builds the four paper targets (paper_<paper>: tables and figures of resources/published/,
or of tests/fixtures/published/ where the checkout has no transcription) for a `papers:` config of the
tiny models, and the Snakemake report. Of the benchmarks the paper tables read, only seat_v1 (the paper's
test terms, the subset Table 7 selects) and StereoSet (the real dev set's gender examples, from the flat copy
in ../shared/data: 255 intrasentence examples, seconds a pair) are added to the cheap set: each added
benchmark is a scoring and a metric job for every pair that scores it (da_gender and occupations would add
about 100 more jobs, minutes each under CI), so the columns of da_gender, occupations, seat_v2 and logprob
stay missing ("–") here. Meade et al.'s StereoSet column reads bias-bench's reading (papers.meade2022.readings:
stereoset-biasbench), scored for the meade pairs only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.methods_run import (
    BIAS_BENCH_WORDS_FILE,
    GRID,
    LORA,
    PAIRED,
    PAPER_METHODS,
    PAPER_MODELS,
    PAPER_TARGETS,
    PAPERS,
    READING,
    RUN_TARGETS,
    SWEEP,
    TARGETS,
    TRAINED_KINDS,
    prepare_methods_workdir,
)
from helpers.workflow_runs import edited_module, run_snakemake, scheduled_outputs, write_config
from lmbias.metrics.summary import left_out as summary_left_out
from lmbias.papers.tables import is_parameter_table, is_settings_table

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="session")
def methods_run(tmp_path_factory, repo_root, shared_data):
    workdir = prepare_methods_workdir(tmp_path_factory, repo_root, shared_data)
    proc = run_snakemake(workdir, *RUN_TARGETS)
    (workdir / "run.out").write_text(proc.stdout + proc.stderr)
    run_snakemake(workdir, "--report", "results/report.html", *PAPER_TARGETS)
    return workdir


def test_the_run_ends_by_printing_the_before_and_after_page(methods_run):
    """The main job's readable result: one headline per benchmark, before (pretrained) vs after (cds, sd),
    the paired BEC-Pro test, printed when the run ends, and the same table as a web page."""
    page = (methods_run / "results/summary.md").read_text()
    lines = page.splitlines()
    assert "| benchmark | headline | unbiased | tiny-bert / pretrained | tiny-bert / cds | tiny-bert / sd |" in lines
    rows = [line for line in lines if line.startswith(("| winobias |", "| bec_pro_en |", "| seat_v1 |"))]
    assert len(rows) == 4 and all("–" not in line.split("|")[4] for line in rows), rows  # skew, stereotype, gap, SEAT
    assert any(line.startswith("| tiny-bert-cds | tiny-bert / pretrained | tiny-bert / cds |") for line in lines)
    printed = (methods_run / "run.out").read_text()
    assert page in printed and str((methods_run / "results/summary.html").resolve()) in printed
    assert "<table>" in (methods_run / "results/summary.html").read_text()


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
        kind = _kind(methods_run, method)
        if kind == "self_debias":  # SEAT reads embeddings, which Self-Debias does not change: left out, with why
            assert "seat_v1" not in benches
            path = methods_run / f"results/{model}/{method}/summary.parquet"
            left_out = {e["benchmark"]: e["reason"] for e in summary_left_out(path)}
            assert "embedding benchmarks do not apply" in left_out["seat_v1"]
        if kind in TRAINED_KINDS:
            info = json.loads((methods_run / f"results/{model}/{method}/seed0/model/training.json").read_text())
            assert info["steps"] >= 1 and info["seed"] == 0
            objective = "gpr" if kind == "gpr" else {"tiny-gpt2": "clm", "tiny-bart": "infilling"}.get(model, "mlm")
            assert info["settings"]["objective"] == objective
            assert (info["settings"]["er_lambda"] is not None) == (kind == "er")
            # the summary says how many processes trained the model it scored (training.json's world_size)
            assert (summary["train_world_size"] == info["world_size"]).all()
        else:  # pretrained, online, sd, self_debias: nothing trained here
            assert summary["train_world_size"].isna().all()
        assert (summary["score_world_size"] == 1).all() and summary["torch_version"].notna().all()


def _kind(workdir, method) -> str:
    return yaml.safe_load((workdir / "config.yaml").read_text())["methods"][method]["kind"]


def _training_settings(workdir, model, method) -> dict:
    return json.loads((workdir / f"results/{model}/{method}/seed0/model/training.json").read_text())["settings"]


def test_recipes_train_with_the_authors_options_per_family(methods_run):
    """One recipe entry, each family its authors' script: the per-family values reach the trainer."""
    bert, gpt2, bart = (
        _training_settings(methods_run, m, "cds-dagender") for m in ("tiny-bert", "tiny-gpt2", "tiny-bart")
    )
    assert gpt2["text_template"] == "<|startoftext|>{text}<|endoftext|>" and bert["text_template"] == "{text}"
    assert (bert["warmup_steps"], gpt2["warmup_steps"], bart["warmup_steps"]) == (0, 100, 100)
    assert gpt2["padding_in_loss"] and bart["padding_in_loss"] and not bert["padding_in_loss"]
    assert bart["infilling_mode"] == "static_words" and gpt2["pad_to_length"] == 128
    er = _training_settings(methods_run, "tiny-gpt2", "er-dagender")
    assert (er["er_lm_side"], er["er_pooling"], er["er_lambda"]) == ("counterfactual", "family_padded", 0.5)
    bartl = json.loads((methods_run / "results/tiny-bert/cds-bartl/seed0/model/training.json").read_text())
    assert bartl["settings"]["epochs"] == 3 and bartl["settings"]["batch_size"] == 1
    assert "results/corpora/bartl2020/gap-flipped.parquet" in json.dumps(bartl)
    sd = json.loads((methods_run / "results/tiny-bert/sd-dagender/seed0/model/sentence_debias.json").read_text())
    assert sd["settings"]["application"] == "normalise_project_normalise"
    assert sd["settings"]["pair_list"] == "dagender" and sd["settings"]["fit_pooling"] == "mean_padded"
    sd_gpt2 = json.loads((methods_run / "results/tiny-gpt2/sd-dagender/seed0/model/sentence_debias.json").read_text())
    assert sd_gpt2["settings"]["fit_pooling"] == "last"
    manela = json.loads((methods_run / "results/tiny-bert/gpr-a-manela/seed0/model/training.json").read_text())
    assert "gpr-manela-A.parquet" in json.dumps(manela) and manela["settings"]["max_length"] == 164


def test_bias_bench_methods_per_family(methods_run):
    """Dropout's per-family rates reach the trainer and the saved config (BART keeps its own); INLP's
    overlay reaches its fit, one accuracy row per iteration."""
    bert, gpt2, bart = (_training_settings(methods_run, m, "dropout") for m in ("tiny-bert", "tiny-gpt2", "tiny-bart"))
    assert (bert["hidden_dropout"], bert["attention_dropout"]) == (0.2, 0.15)
    assert (gpt2["hidden_dropout"], gpt2["attention_dropout"]) == (0.15, 0.15)
    assert (bart["hidden_dropout"], bart["attention_dropout"]) == (None, None)
    config = json.loads((methods_run / "results/tiny-bert/dropout/seed0/model/config.json").read_text())
    assert (config["hidden_dropout_prob"], config["attention_probs_dropout_prob"]) == (0.2, 0.15)
    for model in ("tiny-bert", "tiny-gpt2", "tiny-bart"):
        info = json.loads((methods_run / f"results/{model}/inlp/seed0/model/inlp.json").read_text())
        assert info["settings"]["n_iterations"] == 3 and len(info["iterations"]) == 3


def test_a_methods_benchmark_list_leaves_the_others_out_by_name(methods_run):
    """methods.<name>.benchmarks: the summary holds those only and records why each other one is missing."""
    path = methods_run / "results/tiny-bert/cds-dagender/summary.parquet"
    assert set(pq.read_table(path).column("benchmark").to_pylist()) == {"winobias"}
    left_out = {e["benchmark"]: e for e in summary_left_out(path)}
    assert set(left_out) == {"bec_pro_en", "seat_v1", "stereoset"}
    assert left_out["seat_v1"]["reason"] == "not in methods.cds-dagender.benchmarks"
    assert left_out["seat_v1"]["config_key"] == "methods.cds-dagender.benchmarks"
    assert not (methods_run / "results/tiny-bert/cds-dagender/seed0/scores/seat_v1.parquet").exists()
    inlp = methods_run / "results/tiny-gpt2/inlp/summary.parquet"
    assert set(pq.read_table(inlp).column("benchmark").to_pylist()) == {"winobias", "seat_v1"}


@pytest.mark.parametrize("model", PAPER_MODELS)
def test_stereoset_rows_from_the_real_dev_set(methods_run, model):
    """StereoSet on real data (the dev set's flat copy, gender examples) for an mlm, a clm and a seq2seq model:
    ss, lms and icat for the gender domain and `all`, over its 255 examples, from the flat file's verified copy."""
    path = methods_run / f"results/{model}/pretrained/summary.parquet"
    frame = pq.read_table(path).to_pandas()
    rows = frame[(frame["benchmark"] == "stereoset") & (frame["seed"] == "mean")]
    assert {(m, s) for m in ("ss", "lms", "icat", "n_terms") for s in ("gender", "all")} <= set(
        zip(rows["metric"], rows["subset"])
    )
    assert set(rows["subset"]) == {"gender", "all"} and (rows["n"] == 255).all()
    scores = rows[rows["metric"].isin(["ss", "lms", "icat"])]["value"]
    assert scores.between(0, 100).all() and scores.notna().all()
    assert (rows[rows["metric"] == "n_terms"]["value"] == 10).all()  # the dev set's gender target terms
    assert "stereoset" not in {e["benchmark"] for e in summary_left_out(path)}
    sha = json.loads(pq.read_table(methods_run / "results/data/stereoset.parquet").schema.metadata[b"lmbias.sha256"])
    assert sha == {"stereoset_dev_flat.jsonl": "9240d77481e211b406092c7bf7a2ad4a29f3ec6d8251f93e9cff518f7cddea52"}


def test_bias_bench_recipe_packs_blocks_and_augments_the_masked_model_only(methods_run):
    """cda-biasbench: packed blocks of max_length, their block CDA (gendered blocks only, each twice) on the
    masked model, packing alone on GPT-2 (as their run_clm.py); dropout-biasbench: packed, not augmented."""
    bert = json.loads((methods_run / "results/tiny-bert/cda-biasbench/seed0/model/training.json").read_text())
    gpt2 = json.loads((methods_run / "results/tiny-gpt2/cda-biasbench/seed0/model/training.json").read_text())
    dropout = json.loads((methods_run / "results/tiny-bert/dropout-biasbench/seed0/model/training.json").read_text())
    assert bert["settings"]["pack_texts"] and gpt2["settings"]["pack_texts"] and dropout["settings"]["pack_texts"]
    assert bert["settings"]["block_augmentation"] == "bias_bench_gender"
    assert gpt2["settings"]["block_augmentation"] is None and dropout["settings"]["block_augmentation"] is None
    assert bert["settings"]["block_augmentation_words"] == BIAS_BENCH_WORDS_FILE
    assert (dropout["settings"]["hidden_dropout"], dropout["settings"]["attention_dropout"]) == (0.2, 0.15)
    assert bert["settings"]["learning_rate"] == 5e-5 and bert["settings"]["warmup_ratio"] == 0.0
    # augmentation keeps gendered blocks in pairs: an even count, fewer than twice the packed blocks
    assert bert["training_examples"] % 2 == 0 and 0 < bert["training_examples"] <= 2 * dropout["training_examples"]


def test_lora_method_trains_an_adapter_and_scores_base_plus_adapter(methods_run):
    folder = methods_run / f"results/tiny-gpt2/{LORA}/seed0/model"
    names = {p.name for p in folder.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names and "model.safetensors" not in names
    info = json.loads((folder / "training.json").read_text())
    assert info["adapter"]["target_modules"] == ["c_attn"] and info["trainable_parameters"] < 10_000
    before = pq.read_table(methods_run / "results/tiny-gpt2/pretrained/seed0/scores/winobias.parquet").to_pandas()
    after = pq.read_table(methods_run / f"results/tiny-gpt2/{LORA}/seed0/scores/winobias.parquet").to_pandas()
    numeric = [c for c in before.columns if before[c].dtype.kind == "f"]
    assert numeric and not before[numeric].equals(after[numeric]), "scoring must load the adapter"


def test_trained_model_scores_differ_from_pretrained(methods_run):
    before = pq.read_table(methods_run / "results/tiny-bert/pretrained/seed0/scores/bec_pro_en.parquet").to_pandas()
    after = pq.read_table(methods_run / "results/tiny-bert/cds/seed0/scores/bec_pro_en.parquet").to_pandas()
    numeric = [c for c in before.columns if before[c].dtype.kind == "f"]
    assert numeric and not before[numeric].equals(after[numeric]), "scoring must load the fine-tuned folder"


def test_paired_table_compares_pretrained_and_cds(methods_run):
    table = pq.read_table(methods_run / PAIRED).to_pandas()
    assert len(table) > 0


def test_second_run_does_nothing(methods_run):
    proc = run_snakemake(methods_run, "-n", *TARGETS, *PAPER_TARGETS)
    assert scheduled_outputs(proc) == [], (proc.stdout + proc.stderr)[-3000:]


def _dry_run_after(workdir, edit, targets=TARGETS):
    return scheduled_outputs(run_snakemake(workdir, "-n", *targets, "--configfile", str(write_config(workdir, edit))))


def test_editing_one_method_retrains_that_method_only(methods_run):
    out = _dry_run_after(
        methods_run, lambda c: c["methods"]["cda"].setdefault("training", {}).update(learning_rate=3e-4)
    )
    models = sorted(o for o in out if o.endswith("/model"))
    assert models == [f"results/{m}/cda/seed0/model" for m in sorted(GRID)]
    assert all("/cda/" in o for o in out), out


def test_editing_a_scoring_option_rescores_without_retraining(methods_run):
    out = _dry_run_after(
        methods_run, lambda c: c["benchmarks"]["bec_pro_en"].setdefault("scoring", {}).update(batch_size=7)
    )
    # the pairs' one scoring job each (score_model: it rescores bec_pro_en alone, by its score keys, as
    # tests/jobs/test_model_scoring.py counts); never a training or corpus job
    rescored = {tuple(o.split("/")[1:3]) for o in out if o.endswith("/scores.json")}
    assert rescored and all(m in ("tiny-bert", "tiny-roberta", "tiny-bart") for m, _ in rescored), rescored
    assert not [o for o in out if o.endswith("/model") or "/corpora/" in o], out


def test_editing_a_model_training_default_retrains_that_model_only(methods_run):
    out = _dry_run_after(methods_run, lambda c: c["models"]["tiny-gpt2"]["training"].update(learning_rate=1e-3))
    models = sorted(o for o in out if o.endswith("/model"))
    # sd and inlp read no learning rate: they are not refitted; cds-bartl sets its own
    assert models == sorted(
        f"results/tiny-gpt2/{k}/seed0/model" for k in ("cda", "cds", "cds-dagender", "dropout", "er", "er-dagender")
    )


def test_editing_a_trainer_module_retrains_the_fine_tuned_methods_only(methods_run):
    """The trainer's modules reach the fine-tuning jobs through results/library/finetune.sha256: an edit
    retrains cds, cda, er and gpr, and refits no SentenceDebias model (its module set is its own)."""
    with edited_module(methods_run / "src/lmbias/training/objectives.py"):
        out = scheduled_outputs(run_snakemake(methods_run, "-n", *TARGETS))
    assert "results/library/finetune.sha256" in out and "results/library/sentence_debias.sha256" not in out
    models = sorted(o for o in out if o.endswith("/model"))
    assert models == sorted(
        f"results/{m}/{k}/seed0/model"
        for m, methods in GRID.items()
        for k in methods
        if _kind(methods_run, k) in TRAINED_KINDS
    )


def _published(workdir, paper):
    from lmbias.papers.published import load_published

    return load_published(paper, workdir)


@pytest.mark.parametrize("paper", PAPERS)
def test_paper_target_builds_every_table_with_published_and_our_numbers(methods_run, paper):
    import pandas as pd

    published = _published(methods_run, paper)
    # bartl2020's transcription has no tables (its numbers are in the text: published.figures), so its
    # target holds figures only
    assert published.tables or paper == "bartl2020"
    for table_id, table in published.tables.items():
        base = methods_run / f"results/papers/{paper}/{table_id}"
        long = pd.read_parquet(f"{base}.parquet")
        md = Path(f"{base}.md").read_text()
        assert Path(f"{base}.html").exists()
        # every published value is in the table, as transcribed
        for i, row in enumerate(table.rows):  # published rows first, in paper order
            got = long[long["row_order"] == i].set_index("column")["published"]
            assert (long[long["row_order"] == i]["row"] == row.label).all()
            for column, value in row.values.items():
                assert got[column] == pytest.approx(value), (paper, table_id, row.label, column)
            assert f"| {row.label} |" in md
        # our tiny pairs are rows of their own (no tiny model is the paper's model), never with a difference
        ours = long[long["source"] == "ours"]
        assert set(ours["model"]) <= set(PAPER_MODELS) and ours["difference"].isna().all()
        if table.method_kinds or is_settings_table(table):  # else a table of systems we do not run (Lu's NCR)
            assert not ours.empty, (paper, table_id)
        assert (long["source"] == "both").sum() == 0
        run_benchmarks = yaml.safe_load((methods_run / "config.yaml").read_text())["benchmarks"]
        ran = set(run_benchmarks)
        selected = [c.id for c in table.columns if c.benchmark in ran and _computed(run_benchmarks, c)]
        if selected:  # the columns this run computes are filled for at least one tiny pair
            assert ours[ours["column"].isin(selected)]["ours"].notna().any(), (paper, table_id)
        missing = [
            c.id
            for c in table.columns
            if c.benchmark is not None and (c.benchmark not in ran or not _computed(run_benchmarks, c))
        ]
        assert ours[ours["column"].isin(missing)]["ours"].isna().all()  # never invented
    for spec in _figures(paper):
        for ext in ("png", "svg"):
            assert (methods_run / f"results/plots/{paper}/{spec.id}.{ext}").stat().st_size > 0


def _computed(run_benchmarks: dict, column) -> bool:
    """Whether the cheap run computes a column of a benchmark it ran, by what lmbias.metrics.winobias emits:
    only the configured test types (Table 2 reads type 2), Alice & Bob columns (variant entities=names) only
    with alice_bob on and the names condition scored, competency columns (entities=person, per class) only
    with the person condition scored and competency_labels set."""
    if column.benchmark != "winobias":
        return True
    winobias = run_benchmarks["winobias"]
    conditions = winobias["scoring"].get("conditions", ["professions_masked", "referent_masked", "names", "person"])
    subset_type = (column.subset or "").split("/")[0]
    if subset_type.startswith("type") and int(subset_type[4:]) not in winobias.get("types", [1, 2]):
        return False
    variant = column.variant or ""
    if "entities=names" in variant:
        return "names" in conditions and winobias["metric"].get("alice_bob") is not False
    if "entities=person" in variant:
        per_class = "/" in (column.subset or "")
        return "person" in conditions and (not per_class or bool(winobias["metric"].get("competency_labels")))
    return True


def _figures(paper):
    try:
        from lmbias.papers.figures import FIGURES
    except ImportError:
        return []
    return FIGURES.get(paper, [])


def test_meade_stereoset_column_reads_the_bias_bench_reading(methods_run):
    """papers.meade2022.readings: the StereoSet table's cells are the stereoset-biasbench rows of each pair's
    summary (bias-bench's computation), not the default entry's; a pair outside Meade's grid holds no such
    rows; the notes name the entry and its reading."""
    import pandas as pd

    path = methods_run / "results/papers/meade2022/stereoset_gender.parquet"
    long = pd.read_parquet(path)
    ours = long[(long["source"] == "ours") & long["ours"].notna()]
    assert {"tiny-bert", "tiny-gpt2", "tiny-bart"} <= set(ours["model"])
    for (model, method), cells in ours.groupby(["model", "method"]):
        summary = pq.read_table(methods_run / f"results/{model}/{method}/summary.parquet").to_pandas()
        mean = summary[summary["seed"] == "mean"]
        for column, subset in (("ss", "gender"), ("lms", "all")):
            want = mean[(mean["benchmark"] == READING) & (mean["metric"] == column) & (mean["subset"] == subset)]
            assert cells[cells["column"] == column]["ours"].iloc[0] == pytest.approx(want["value"].iloc[0]), (
                model,
                method,
            )
    # causal models: their per-token mean in their context is another number than our default's sum after a BOS
    gpt2 = pq.read_table(methods_run / "results/tiny-gpt2/pretrained/summary.parquet").to_pandas()
    gpt2 = gpt2[(gpt2["seed"] == "mean") & (gpt2["subset"] == "gender") & gpt2["metric"].isin(["ss", "lms"])]
    values = gpt2.pivot_table(index="metric", columns="benchmark", values="value", aggfunc="first")
    assert (values[READING] - values["stereoset"]).abs().max() > 1e-9, values
    notes = json.loads(pq.read_schema(path).metadata[b"lmbias.notes"])
    assert any(f"read benchmarks.{READING} instead of stereoset" in n and "bias-bench" in n for n in notes), notes
    assert READING not in set(
        pq.read_table(methods_run / "results/tiny-bert/cds/summary.parquet").column("benchmark").to_pylist()
    )


def test_editing_a_peer_reading_reruns_its_jobs_only(methods_run):
    """A metric option of the reading re-summarises the pairs of the grid that selects it (no forward pass); a
    scoring option rescores that entry only; its `reading` text rebuilds only the table that prints it."""
    everything = [*TARGETS, *PAPER_TARGETS]
    meade = {(m, k) for m in PAPER_MODELS for k in PAPER_METHODS["meade2022"]}
    out = [
        o.rstrip(",")
        for o in _dry_run_after(
            methods_run,
            lambda c: c["benchmarks"][READING]["metric"].update(clm_score="sum_logprob"),
            targets=everything,
        )
    ]
    assert not [o for o in out if o.endswith(("/scores.json", "/model"))], out
    pairs = {
        tuple(o.split("/")[1:3])
        for o in out
        if o.startswith("results/") and not o.startswith(("results/papers/", "results/plots/", "results/summary."))
    }
    assert pairs and pairs <= meade, pairs
    out = _dry_run_after(methods_run, lambda c: c["benchmarks"][READING]["scoring"].update(remaining_pieces="mask"))
    # rescored by the scoring jobs of the grid's pairs only (inside each, the reading alone: its score key)
    scores = {tuple(o.split("/")[1:3]) for o in out if o.endswith("/scores.json")}
    assert scores and scores <= meade, scores
    out = [
        o.rstrip(",")
        for o in _dry_run_after(
            methods_run, lambda c: c["benchmarks"][READING].update(reading="another text"), targets=everything
        )
    ]
    assert out and all(o.startswith("results/papers/meade2022/stereoset_gender.") for o in out), out


def test_sweep_instance_is_a_method_of_its_own(methods_run):
    """sd@ratio_of_pairs=0.5 is fitted with its own ratio, scored, summarised and shown in the paper tables."""
    import pandas as pd

    for model in PAPER_MODELS:
        summary = pq.read_table(methods_run / f"results/{model}/{SWEEP}/summary.parquet").to_pandas()
        assert set(summary["method"]) == {SWEEP} and "winobias" in set(summary["benchmark"])
        base = pq.read_table(methods_run / f"results/{model}/sd/summary.parquet").to_pandas()
        key = ["benchmark", "metric", "variant", "subset", "seed"]
        both = summary.merge(base, on=key, suffixes=("_sweep", "_base"))
        assert not both.empty and not (both["value_sweep"] == both["value_base"]).all(), model
    table7 = pd.read_parquet(methods_run / "results/papers/over_debiasing/table7.parquet")
    assert SWEEP in set(table7["method"])


def test_settings_table_shows_the_resolved_settings(methods_run):
    import pandas as pd

    checked = 0
    for table_id, table in _published(methods_run, "over_debiasing").tables.items():
        if not is_settings_table(table):
            continue
        long = pd.read_parquet(methods_run / f"results/papers/over_debiasing/{table_id}.parquet")
        if is_parameter_table(table):  # one row per setting, one column per model
            order = {r.settings["parameter"]: i for i, r in enumerate(table.rows)}

            def ours(model, key):
                return long[(long["row_order"] == order[key]) & (long["column"] == model)]["ours"].iloc[0]
        else:  # one row per model, one column per setting

            def ours(model, key):
                return long[(long["source"] == "ours") & (long["model"] == model) & (long["column"] == key)][
                    "ours"
                ].iloc[0]

        assert ours("tiny-gpt2", "er_lambda") == pytest.approx(0.5)
        assert ours("tiny-bert", "batch_size") == 4  # the cheap overlay's batch size
        checked += 1
    assert checked


def test_report_names_every_paper_table(methods_run):
    report = (methods_run / "results/report.html").read_text(errors="replace")
    assert "How it was computed" in report  # the captions (report/*.rst) are rendered into it
    for paper in PAPERS:
        for table_id in _published(methods_run, paper).tables:
            assert f"{table_id}.html" in report, (paper, table_id)


def test_editing_er_lambda_reruns_er_and_the_paper_aggregates_that_read_it(methods_run):
    out = _dry_run_after(
        methods_run,
        lambda c: c["methods"]["er"].setdefault("training", {}).update(er_lambda=0.9),
        targets=[*TARGETS, *PAPER_TARGETS],
    )
    out = [o.rstrip(",") for o in out]  # a job with several outputs lists them comma-separated
    models = sorted(o for o in out if o.endswith("/model"))
    assert models == [f"results/{m}/er/seed0/model" for m in sorted(GRID)]
    per_pair = [o for o in out if not o.startswith(("results/papers/", "results/plots/"))]
    assert per_pair and all("/er/" in o for o in per_pair), per_pair
    papers = {o.split("/")[2] for o in out if o.startswith(("results/papers/", "results/plots/"))}
    assert papers == {"over_debiasing"}, out  # manela2021, bartl2020 and lu2018 show no er pair
    for table_id, table in _published(methods_run, "over_debiasing").tables.items():
        reads_er = "er" in table.method_kinds or is_settings_table(table)
        assert (f"results/papers/over_debiasing/{table_id}.parquet" in out) == reads_er, (table_id, out)
