"""Real Snakemake runs on a copy of the workflow: end to end on tiny models, rerun semantics, dry runs,
bad config and bad data, and the Slurm profile.

One full run with the shipped config.yaml (tiny-bert, its planted-bias twin, tiny-gpt2 and tiny-bart;
every configured benchmark whose data is in ../shared/data) is shared by the tests of this module; the
rerun tests then ask `snakemake -n` what an edit would schedule.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.shipped_run import MODELS, PAIRED, prepare_shipped_run
from helpers.workflow_runs import copy_workflow, edited_module, run_snakemake, scheduled_outputs, write_config
from lmbias.metrics.summary import SUMMARY_SCHEMA

pytestmark = pytest.mark.workflow

PLAIN_WINOBIAS = "cutoff=0.1,probability=pair"  # the paper's variant, without -O / names


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, repo_root, shared_data):
    workdir, args = prepare_shipped_run(tmp_path_factory, repo_root, shared_data)
    run_snakemake(workdir, *args)
    return workdir, shared_data


def _summary(workdir: Path, model: str):
    return pq.read_table(workdir / f"results/{model}/pretrained/summary.parquet")


@pytest.mark.parametrize("model", ["tiny-bert", "tiny-gpt2", "tiny-bart"])
def test_summary_has_every_applicable_benchmark_with_data(tiny_run, model):
    """Issue 4's bar: rows for every benchmark that applies to the family and whose data is present
    (all but WikiText-2 with ../shared/data; StereoSet from its flat copy there)."""
    from lmbias.benchmarks import catalog
    from lmbias.parsers import required_files
    from lmbias.workflow.stand_ins import apply_stand_ins, stand_ins_of

    workdir, data = tiny_run
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    family = config["models"][model]["family"]

    def present(name):
        bench = config["benchmarks"][name]
        return all((data / bench["dataset"] / f).exists() for f in required_files(bench, config["data"], name, data))

    # less the optional benchmarks without data in ../shared/data (WikiText-2): left out, recorded
    absent = {b for b in config["optional_benchmarks"] if not present(b)}
    assert "perplexity_wikitext2" in absent and "stereoset" not in absent
    # peer readings (entries with `reading:`) aside: a summary holds those its papers' grids select, none here
    # the tiny models read the subsets of the largest benchmarks in their place (models.<tiny>.stand_ins)
    names = [
        b for b in catalog.benchmarks_for(family, config["benchmarks"]) if not config["benchmarks"][b].get("reading")
    ]
    expected = set(apply_stand_ins(config, model, names)) - absent
    assert "bbq-subset" in expected and "bbq" not in expected
    read_as = stand_ins_of(config, model)  # tiny-bert reads CrowS-Pairs' and StereoSet's gender parts
    assert {"winobias", read_as.get("crows_pairs", "crows_pairs"), read_as.get("stereoset", "stereoset")} <= expected
    rows = _summary(workdir, model).to_pylist()
    assert {r["benchmark"] for r in rows} == expected
    assert {r["benchmark"] for r in rows if r["seed"] == "mean" and r["value"] is not None} == expected


def test_summary_has_skew_and_stereotype_rows_with_provenance(tiny_run):
    workdir, _ = tiny_run
    table = _summary(workdir, "tiny-bert")
    assert table.schema.equals(SUMMARY_SCHEMA, check_metadata=False)
    rows = [r for r in table.to_pylist() if r["benchmark"] == "winobias" and r["variant"] == PLAIN_WINOBIAS]
    got = {(r["metric"], r["subset"], r["seed"]) for r in rows}
    for t in (1, 2):
        for metric in ("mu_skew", "mu_stereo"):
            assert (metric, f"type{t}", "0") in got and (metric, f"type{t}", "mean") in got
    for r in table.to_pylist():
        assert r["model"] == "tiny-bert" and r["method"] == "pretrained"
        assert r["model_id"] == "resources/models/tiny-bert" and r["model_revision"] == "local"
        assert len(r["config_hash"]) == 64 and r["lmbias_version"]
        # downloaded data carries its checksum; generated benchmarks are pinned by lmbias_version
        generated = r["benchmark"] in ("da_gender", "logprob", "occupations", "seat_v1", "seat_v2")
        assert (r["data_sha256"] == "") if generated else (len(r["data_sha256"]) == 64), r["benchmark"]
    # what computed the numbers: this environment's libraries, one scoring process, no training (pretrained)
    from lmbias.metrics.summary import library_versions

    versions = library_versions()
    for r in table.to_pylist():
        assert {k: r[k] for k in versions} == versions and r["torch_version"], r
        assert r["score_world_size"] == 1 and r["train_world_size"] is None
        assert (r["weights_dtype"], r["precision"]) == ("fp32", "fp32")  # dtype and precision auto, on CPU
        assert r["n_seeds"] == (1 if r["value"] is not None else 0) and r["std"] is None  # one seed
        assert (r["interval"] is None) == (r["ci_low"] is None), r
        assert r["interval"] != "metric", f"{r['benchmark']}/{r['metric']}: an interval without a name"
    # each metric names its own interval (one seed: the mean row keeps it)
    named = {(r["benchmark"], r["metric"]): r["interval"] for r in table.to_pylist() if r["interval"]}
    assert named[("winobias", "f1_male")] == "bootstrap_lines"
    assert named[("da_gender", "da_score")] == "wilson"
    assert named[("crows_pairs-subset", "metric_score")] == "clopper_pearson"  # tiny-bert's stand-in
    assert named[("bec_pro_en", "association_mean")] == "t_items"
    assert named[("occupations", "aob")] == "bootstrap_occupations"
    # every line of pro/anti for both types of the dev split (the files the run read: their first lines, DATA_HEADS)
    kept = [r for r in rows if r["metric"] == "kept_fraction" and r["seed"] == "0"]
    folder = Path(yaml.safe_load((workdir / "config.yaml").read_text())["data"]["winobias"]["path"])
    lines = [
        len((folder / f"{k}_stereotyped_type{t}.txt.dev").read_text().splitlines())
        for k in ("pro", "anti")
        for t in (1, 2)
    ]
    assert sorted(r["n"] for r in kept) == sorted(lines) == [100] * 4
    for name in (
        "logs/tiny-bert/pretrained/seed0/scores.log",
        "benchmarks/tiny-bert/pretrained/seed0/scores.tsv",
        "results/tiny-bert/pretrained/seed0/scores/winobias.parquet",
    ):
        assert (workdir / name).exists(), name


def test_planted_he_bias_turns_skew_male(tiny_run):
    workdir, _ = tiny_run

    def value(model, metric, subset):
        rows = [
            r
            for r in _summary(workdir, model).to_pylist()
            if r["metric"] == metric
            and r["subset"] == subset
            and r["seed"] == "mean"
            and r["benchmark"] == "winobias"
            and r["variant"] == PLAIN_WINOBIAS
        ]
        assert len(rows) == 1, (model, metric, subset)
        return rows[0]["value"]

    for t in (1, 2):
        # saying "he" everywhere is the ceiling: F1 male 66.7 (precision 1/2, recall 1), F1 female 0 -> 66.7
        assert value("tiny-bert-he", "skew_signed", f"type{t}") == pytest.approx(200 / 3, abs=1.0), (
            "male-planted model must be skewed male"
        )
        assert value("tiny-bert-he", "skew_signed", f"type{t}") > value("tiny-bert", "skew_signed", f"type{t}") + 10
        # it says "he" everywhere: female F1 collapses on both sets
        assert (value("tiny-bert-he", "f1_female", f"type{t}/pro") or 0.0) < 10


def test_paired_comparison_table_from_cached_scores(tiny_run):
    """The pre/post table pairs the two models' BEC-Pro sentences one by one (5,400: 2,700 per gender)."""
    workdir, _ = tiny_run
    rows = pq.read_table(workdir / PAIRED).to_pylist()
    assert {(r["before_model"], r["after_model"], r["benchmark"]) for r in rows} == {
        ("tiny-bert", "tiny-bert-he", "bec_pro_en")
    }
    change = {r["subset"]: r for r in rows if r["metric"] == "association_change"}
    assert set(change) == {
        f"prof={g}/person={p}" for g in ("male", "female", "balanced", "all") for p in ("male", "female")
    }
    assert change["prof=all/person=male"]["n"] == 2700 and change["prof=male/person=female"]["n"] == 900
    assert all(r["variant"] == "test=wilcoxon" and r["before_seeds"] == r["after_seeds"] == 1 for r in rows)
    # a constant output bias on "he" nearly cancels in log(p(TM)/p(TAM)) (see test_bec_pro): tiny changes
    assert all(abs(r["value"]) < 0.01 for r in change.values())


def test_paper_table_shows_our_perplexity_from_the_cached_summaries(tiny_run):
    """A table that shows methods gets our language-modelling column (the GAP stand-in here: ../shared/data has
    no WikiText-2) read from the summaries already built: the table job is the only job."""
    workdir, data = tiny_run
    edited = write_config(
        workdir,
        lambda c: c.update(papers={"lu2018": {"models": ["tiny-gpt2", "tiny-bert"], "methods": ["pretrained"]}}),
    )
    table = "results/papers/lu2018/table4"
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", f"{table}.md")
    assert [o.rstrip(",") for o in scheduled_outputs(proc)] == [f"{table}.parquet"]  # (its first output)
    assert re.search(r"^paper_table\s+1$", proc.stdout + proc.stderr, re.M)
    run_snakemake(workdir, "--configfile", str(edited), "--config", f"data_dir={data}", f"{table}.md")
    cells = {(r["row"], r["column"]): r for r in pq.read_table(workdir / f"{table}.parquet").to_pylist()}
    summary = {
        r["metric"]: r["value"]
        for r in _summary(workdir, "tiny-gpt2").to_pylist()
        if r["benchmark"] == "perplexity_gap" and r["seed"] == "mean"
    }
    ours = cells[("tiny-gpt2 / pretrained", "ours_perplexity_gap")]
    assert ours["ours"] == pytest.approx(summary["perplexity"]) and ours["source"] == "ours"
    assert cells[("tiny-bert / pretrained", "ours_perplexity_gap")]["ours"] > 1  # pseudo-perplexity
    md = (workdir / f"{table}.md").read_text()
    assert "| PPL (ours, gap test stand-in) |" in md and "not WikiText-2" in md


def test_paired_test_edit_reruns_only_the_comparison(tiny_run):
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: c["comparisons"]["tiny-bert-vs-planted"].update(test="t"))
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", PAIRED)
    assert scheduled_outputs(proc) == [PAIRED]


def test_unknown_or_misconfigured_comparison_is_named(tiny_run):
    workdir, data = tiny_run
    proc = run_snakemake(workdir, "-n", "results/tables/paired/nope.parquet", check=False)
    assert proc.returncode != 0
    assert "unknown comparison 'nope'" in proc.stdout + proc.stderr
    edited = write_config(
        workdir, lambda c: c["comparisons"]["tiny-bert-vs-planted"]["after"].update(model="tiny-gpt2")
    )
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), PAIRED, check=False)
    assert proc.returncode != 0
    assert (
        "comparisons.tiny-bert-vs-planted.after: benchmark 'bec_pro_en' does not apply to model 'tiny-gpt2'"
        in proc.stdout + proc.stderr
    )


def test_untouched_workflow_schedules_nothing(tiny_run):
    workdir, data = tiny_run
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS] + [PAIRED]
    proc = run_snakemake(workdir, "-n", "--config", f"data_dir={data}", *targets)
    assert scheduled_outputs(proc) == []
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_cutoff_edit_reruns_metrics_not_scoring(tiny_run):
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: c["benchmarks"]["winobias"]["metric"].update(confidence_cutoff=0.3))
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", *targets)
    outputs = scheduled_outputs(proc)
    assert sorted(outputs) == sorted(
        [f"results/{m}/pretrained/seed0/metrics.parquet" for m in MODELS]
        + [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    ), outputs
    assert not [o for o in outputs if "/scores" in o or o.startswith(("resources/", "results/data/"))]


def test_library_edit_reruns_only_the_benchmark_that_reads_it(tiny_run):
    """A benchmark's modules reach its jobs through one fingerprint file (results/library/<dataset>.sha256,
    one line per module): editing metrics/crows_pairs.py rewrites that fingerprint and reruns the scoring job
    of each model (which scores CrowS-Pairs again and keeps the other benchmarks' files by their score key,
    tests/jobs/test_model_scoring.py), the seeds' metric jobs (every benchmark's metrics, from cached scores)
    and the summaries."""
    workdir, data = tiny_run
    fingerprint = (workdir / "results/library/crows_pairs.sha256").read_text()
    assert "  src/lmbias/metrics/crows_pairs.py\n" in fingerprint and "winobias" not in fingerprint
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    with edited_module(workdir / "src/lmbias/metrics/crows_pairs.py"):
        outputs = scheduled_outputs(run_snakemake(workdir, "-n", "--config", f"data_dir={data}", *targets))
    assert sorted(outputs) == sorted(
        ["results/library/crows_pairs.sha256"]
        + [f"results/{m}/pretrained/seed0/scores.json" for m in MODELS]
        + [f"results/{m}/pretrained/seed0/metrics.parquet" for m in MODELS]
        + targets
    ), outputs


def test_aggregate_edit_resummarises_without_rescoring(tiny_run):
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: c["aggregate"].update(interval="bootstrap", bootstrap_samples=2000))
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", *targets)
    assert sorted(scheduled_outputs(proc)) == sorted(targets)
    bad = write_config(workdir, lambda c: c["aggregate"].update(confidence=1.5))
    proc = run_snakemake(workdir, "-n", "--configfile", str(bad), "--config", f"data_dir={data}", *targets, check=False)
    assert proc.returncode != 0 and "aggregate.confidence" in proc.stdout + proc.stderr


def test_model_edit_reruns_that_model_only(tiny_run):
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: c["models"]["tiny-bert-he"]["tiny"].update(planted_bias={"he": 4.0}))
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", *targets)
    outputs = scheduled_outputs(proc)
    assert outputs, "the edited model must be rebuilt and rescored"
    assert all("tiny-bert-he" in o for o in outputs), outputs
    assert "resources/models/tiny-bert-he" in outputs
    assert "results/tiny-bert-he/pretrained/seed0/scores.json" in outputs


def test_precision_edit_rescores_that_model_without_rebuilding_it(tiny_run):
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: c["models"]["tiny-bert-he"].update(precision="fp32"))
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    outputs = scheduled_outputs(
        run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", *targets)
    )
    assert "results/tiny-bert-he/pretrained/seed0/scores.json" in outputs
    assert all("tiny-bert-he" in o or o == PAIRED for o in outputs), outputs
    assert "resources/models/tiny-bert-he" not in outputs


def test_dtype_edit_rescores_that_model_without_rebuilding_it(tiny_run):
    """models.<name>.dtype and attn_implementation reach the scoring jobs through params: an edit rescores that
    model (its scores files record the new dtype), and builds nothing again."""
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: c["models"]["tiny-gpt2"].update(dtype="bf16", attn_implementation="eager"))
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    outputs = scheduled_outputs(
        run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", *targets)
    )
    assert "results/tiny-gpt2/pretrained/seed0/scores.json" in outputs
    assert all("tiny-gpt2" in o for o in outputs), outputs
    assert "resources/models/tiny-gpt2" not in outputs


def test_max_tokens_edit_reruns_nothing_and_jobs_record_peak_memory(tiny_run):
    """models.<name>.max_tokens changes no number (tests/engine/test_token_budget.py): a resource, not a param, so an
    edit schedules nothing. Every scoring job of the run wrote its timing file with its peak memory."""
    workdir, data = tiny_run
    edited = write_config(workdir, lambda c: [c["models"][m].update(max_tokens=512) for m in MODELS])
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS]
    assert (
        scheduled_outputs(
            run_snakemake(workdir, "-n", "--configfile", str(edited), "--config", f"data_dir={data}", *targets)
        )
        == []
    )
    from lmbias.engine.job_timing import LOAD_ROW, read_timing_rows

    # one scoring job per model: a row for loading it, one per benchmark
    rows = {
        r["benchmark"]: r for r in read_timing_rows(workdir / "benchmarks/tiny-gpt2/pretrained/seed0/scores.job.tsv")
    }
    row = rows["winobias"]
    assert row["status"] == "ok" and row["max_tokens"] == "8192" and float(row["peak_rss_mib"]) > 100, row
    assert float(rows[LOAD_ROW]["load_s"]) > 0
    timing = [read_timing_rows(p) for p in workdir.glob("benchmarks/*/pretrained/seed0/scores.job.tsv")]
    assert len(timing) == len(MODELS)
    assert sum(len(rows) - 1 for rows in timing) == len(
        list(workdir.glob("results/*/pretrained/seed0/scores/*.parquet"))
    )


def test_hub_model_dry_run_fetches_it_once(tiny_run):
    """A hub model's files come from one fetch_hub_model job (tests/engine/test_hub.py runs it over loopback)."""
    workdir, data = tiny_run
    proc = run_snakemake(workdir, "-n", "--config", f"data_dir={data}", "results/bert-large/pretrained/summary.parquet")
    outputs = scheduled_outputs(proc)
    assert "results/bert-large/pretrained/seed0/scores.json" in outputs
    assert [o for o in outputs if o.startswith("resources/models/")] == ["resources/models/bert-large"]


def test_unknown_model_or_method_in_target_is_named(tiny_run):
    workdir, data = tiny_run
    proc = run_snakemake(workdir, "-n", "results/bert-xxl/pretrained/summary.parquet", check=False)
    assert proc.returncode != 0
    assert "unknown model 'bert-xxl'" in proc.stdout + proc.stderr
    proc = run_snakemake(workdir, "-n", "results/tiny-bert/magic/summary.parquet", check=False)
    assert proc.returncode != 0
    assert "unknown method 'magic'" in proc.stdout + proc.stderr


def test_bad_config_key_fails_before_any_job_naming_the_key(tiny_run):
    workdir, _ = tiny_run
    edited = write_config(workdir, lambda c: c["models"]["tiny-bert"].update(famly="mlm"))
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), check=False)
    assert proc.returncode != 0
    assert "models.tiny-bert.famly: unknown key" in proc.stdout + proc.stderr
    edited = write_config(workdir, lambda c: c["targets"].update(models=["tiny-bert", "nope"]))
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), check=False)
    assert proc.returncode != 0
    assert "targets.models[1]: unknown model 'nope'" in proc.stdout + proc.stderr


def test_checksum_mismatch_stops_and_leaves_no_file(tmp_path, repo_root, shared_data):
    workdir = copy_workflow(repo_root, tmp_path / "wf")
    bad = tmp_path / "data"
    shutil.copytree(shared_data / "winobias", bad / "winobias")
    target = bad / "winobias" / "pro_stereotyped_type2.txt.dev"
    target.chmod(0o644)
    target.write_text(target.read_text().replace("[him]", "[them]", 1))
    proc = run_snakemake(workdir, "--config", f"data_dir={bad}", "results/data/winobias.parquet", check=False)
    assert proc.returncode != 0
    assert not (workdir / "resources/data/winobias/pro_stereotyped_type2.txt.dev").exists()
    assert not (workdir / "results/data/winobias.parquet").exists()
    log = (workdir / "logs/data/winobias/pro_stereotyped_type2.txt.dev.log").read_text()
    assert "pro_stereotyped_type2.txt.dev" in log and "sha256" in log.lower()
    # the job ran inside Snakemake's process (a run: block): its log holds its traceback all the same, and the
    # console names the job, its log and its error (the Snakefile's onerror, lmbias.job_runtime.job_log)
    assert (
        "rule data_winobias (logs/data/winobias/pro_stereotyped_type2.txt.dev.log):\n"
        "    DataError: resources/data/winobias/pro_stereotyped_type2.txt.dev: sha256 mismatch"
    ) in proc.stderr, proc.stderr[-3000:]


def _dry_run_resources(workdir: Path, data: Path, profile: str, target: str) -> dict[str, str]:
    """rule name -> its first job's `resources:` line in a dry run under the profile."""
    proc = run_snakemake(workdir, "-n", "--profile", profile, target, "--config", f"data_dir={data}")
    text = proc.stdout + proc.stderr
    assert "workflow specific profile" not in text, "a workflow profile (profiles/default) would override " + profile
    blocks = re.findall(r"^rule (\w+):\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    lines = {}
    for rule, block in blocks:
        found = re.search(r"^\s*resources: (.*)$", block, re.M)
        lines.setdefault(rule, found.group(1) if found else "")
    return lines


def test_slurm_profile_parses_and_gives_gpu_to_scoring(tiny_run):
    workdir, data = tiny_run
    proc = run_snakemake(
        workdir,
        "-n",
        "--profile",
        "profiles/slurm",
        "--config",
        f"data_dir={data}",
        "results/bert-large/pretrained/summary.parquet",
    )
    text = proc.stdout + proc.stderr
    block = text.split("output: results/bert-large/pretrained/seed0/scores.json", 1)[1].split("\n\n", 1)[0]
    assert "gpu=1" in block and "slurm_partition=gpu" in block, block
    assert "runtime=240" in block and "cpus_per_task=8" in block and "mem_mb=32000" in block, block


@pytest.mark.parametrize("profile", ["profiles/slurm", "profiles/slurm-cpu"])
def test_slurm_profiles_are_not_overridden_by_a_workflow_profile(tmp_path, repo_root, shared_data, profile):
    """Snakemake loads a workflow's profiles/default on every run and its keys win: a local profile by that
    name replaced the Slurm profile's whole default-resources (no time limit, 4 GB for every CPU job)."""
    workdir, data = copy_workflow(repo_root, tmp_path / "wf"), shared_data
    assert not (workdir / "profiles" / "default").exists()
    lines = _dry_run_resources(workdir, data, profile, "results/tiny-bert/pretrained/summary.parquet")
    for rule in ("parse_benchmark", "compute_seed_metrics", "summarise"):
        assert "slurm_partition=cpu" in lines[rule] and "runtime=60" in lines[rule], (rule, lines[rule])
        assert "mem_mb=8000" in lines[rule] and "cpus_per_task=2" in lines[rule], (rule, lines[rule])
    assert "runtime=10" in lines["build_tiny_model"] and "mem_mb=4000" in lines["build_tiny_model"]
    scoring = lines["score_model"]
    assert "cpus_per_task=8" in scoring and "runtime=240" in scoring and "mem_mb=32000" in scoring, scoring
    if profile == "profiles/slurm-cpu":  # no GPU gres: gpu=0 overrides the rule's gpu=1 (no --gpus)
        assert "gpu=0" in scoring and "slurm_partition=cpu" in scoring, scoring
    else:
        assert "gpu=1" in scoring and "slurm_partition=gpu" in scoring, scoring


def test_cpu_only_slurm_profile_is_the_gpu_profile_without_gpus(repo_root):
    """profiles/slurm-cpu differs from profiles/slurm only in the GPU rules' gpu (0) and partition."""
    gpu = yaml.safe_load((repo_root / "profiles/slurm/config.yaml").read_text())
    cpu = yaml.safe_load((repo_root / "profiles/slurm-cpu/config.yaml").read_text())
    gpu_rules = {rule for rule, res in gpu["set-resources"].items() if res.get("gpu")}
    assert gpu_rules == {
        "score_model",
        "score_benchmark",
        "finetune",
        "fit_sentence_debias",
        "fit_inlp",
        "classify_generations",
    }
    for rule in gpu_rules:
        assert cpu["set-resources"][rule] == {**gpu["set-resources"][rule], "gpu": 0, "slurm_partition": "cpu"}

    def without_gpu_rules(profile: dict) -> dict:
        return {**profile, "set-resources": {k: v for k, v in profile["set-resources"].items() if k not in gpu_rules}}

    assert without_gpu_rules(cpu) == without_gpu_rules(gpu)
    # every rule that asks for a GPU is one the CPU profile overrides
    declared = set()
    for smk in (repo_root / "rules").glob("*.smk"):
        declared |= set(re.findall(r"^rule (\w+):(?:(?!^rule ).)*?^\s+gpu=\d", smk.read_text(), re.M | re.S))
    assert declared == gpu_rules
    assert "slurm_account" not in gpu["default-resources"]  # unset = the user's default account
