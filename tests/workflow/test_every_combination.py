"""Every method on every benchmark the shipped config allows, on every tiny model, so that no combination a
user can ask for fails at run time (issue 21: Self-Debias crashed on the perplexity benchmark because the
methods run scores each method only on the benchmarks its tests read).

What runs is what Snakemake would run: the shipped config.yaml on a copy of the workflow, its DAG built by
Snakemake's API for one summary per (tiny model, method), and every job of that DAG executed *in this
process* by its own script (scripts/*.py with the job's `snakemake` object: its input, output, params,
wildcards, log) or its rule's `run:` block (the cheap jobs, which Snakemake runs in its own process too), in
dependency order. The params are Snakemake's own, so each job gets the config slices the
workflow passes; running the scripts in process saves each job's Python start (measured: a Snakemake job
costs about 6 s of CPU in process start and imports, so the ~1,000 jobs here would take over an hour and a
half of CPU as a Snakemake run; in process they take about 2 minutes).

Derived, not listed: the models are the config's tiny models (a `tiny:` entry without planted bias; a tiny
Llama added to config.yaml is covered as it is); the methods are the config's entries, one per way of
scoring (`scoring_signature`: a kind, and an entry's options that change how its model is scored; the
trained kinds all leave a model folder scored alike, so one of them stands for all, and every other trained
kind runs on the first benchmark of its summary); the benchmarks are whatever each summary holds (the
registry's families, Self-Debias' embedding exclusion, online's WinoBias), and every peer reading (an entry
with `reading:`, held by the summaries of the paper grids that select it) is scored and measured too.
Nothing may be left out for missing data: files ../shared/data lacks get stand-ins (STAND_INS), and a
benchmark without data or a stand-in fails here, naming it.

Cheap by construction, with the code paths unchanged: every parsed benchmark is cut to a few items that keep
its structure (FEW_ITEMS), GAP to a few contexts, every training to one step on a few examples, every fit to
a few sentences (CHEAP_*). The numbers mean nothing; that every job ends, and every summary holds every
benchmark its model and method allow, does.
"""

from __future__ import annotations

import contextlib
import shutil
import time
import traceback
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.executor_plugins.snakemake_executor_plugin_in_process import job_sandbox, run_script
from helpers.paths import FIXTURES
from helpers.workflow_runs import copy_workflow
from lmbias.benchmarks import catalog
from lmbias.methods import resolution
from lmbias.methods.kinds import TRAINED_METHOD_KINDS
from lmbias.metrics.summary import left_out as summary_left_out
from lmbias.papers.grid import is_reading

pytestmark = pytest.mark.workflow

# ------------------------------------------------------------------------------------------ what is covered


def tiny_models(config: dict) -> list[str]:
    """The config's tiny models, one per architecture: built here, no hub needed (planted-bias twins score
    like their base and are left out)."""
    return [
        name for name, entry in config["models"].items() if "tiny" in entry and not entry["tiny"].get("planted_bias")
    ]


#: Options of a method entry that change how its model is *scored* (the rest change only what is trained or
#: fitted, which tests/workflow/test_workflow_methods.py covers): SentenceDebias is applied as its fitted `application`
#: says; Self-Debias' options are its scoring job's params.
SCORING_OPTIONS = {"sd": ("application",), "self_debias": ("prefix", "decay_constant", "epsilon")}
#: Kinds whose models are scored alike: every trained kind leaves a model folder that is loaded and scored the
#: same way whatever trained it, as a fine-tuned model or, with `training.adapter`, as the base with an adapter.
SCORED_AS = {kind: "trained model folder" for kind in TRAINED_METHOD_KINDS}


def scoring_signature(config: dict, model: str, method: str) -> tuple:
    entry = config["methods"][method]
    kind = entry["kind"]
    options = tuple((key, repr(entry.get(key))) for key in SCORING_OPTIONS.get(kind, ()))
    if kind in TRAINED_METHOD_KINDS:  # the adapter (its kind) as this model resolves the entry's training
        settings = resolution.resolve_method(model, config["models"][model], method, entry, config["models"])[
            "settings"
        ]
        options += (("adapter", (settings.get("adapter") or {}).get("kind")),)
    return (SCORED_AS.get(kind, kind),) + options


def methods_for(config: dict, model: str) -> tuple[list[str], list[str]]:
    """(methods crossed with every benchmark: the first entry, in config order, of each scoring signature the
    model's family can run; methods scored on one benchmark: the first entry of each other kind, whose model
    is loaded and scored as its signature's is)."""
    family = config["models"][model]["family"]
    full: dict[tuple, str] = {}
    kinds = {}
    for name, entry in config["methods"].items():
        try:
            resolution.check_method_family(model, family, name, entry)
        except Exception:  # ConfigError: the family cannot run it (e.g. gpr on a causal model)
            continue
        full.setdefault(scoring_signature(config, model, name), name)
        kinds.setdefault(entry["kind"], name)
    covered = {config["methods"][m]["kind"] for m in full.values()}
    return list(full.values()), [name for kind, name in kinds.items() if kind not in covered]


def applicable_benchmarks(config: dict, model: str, method: str) -> set[str]:
    """Every configured benchmark that applies to the model's family, less the ones the method does not apply to
    (Self-Debias: embeddings); online changes WinoBias only. Peer readings (entries with `reading:`) included."""
    family = config["models"][model]["family"]
    entry = config["methods"][method]
    names = catalog.benchmarks_for(family, config["benchmarks"])
    names = [b for b in names if not resolution.method_benchmark_exclusion(method, entry, config["benchmarks"][b])]
    if entry["kind"] == "online":
        names = [b for b in names if config["benchmarks"][b]["dataset"] == "winobias"]
    return set(names)


def expected_benchmarks(config: dict, model: str, method: str) -> set[str]:
    """What the pair's summary holds: the applicable benchmarks but the peer readings, which only the summaries
    of pairs in a paper's grid hold (this test builds their metrics files instead)."""
    return {b for b in applicable_benchmarks(config, model, method) if not is_reading(config["benchmarks"][b])}


def targets_for(config: dict, model: str, method: str, full: bool = True) -> list[str]:
    """full: the pair's summary, and one metrics file per peer reading that applies to it (scored and measured
    as a paper's grid would); else the score file of its summary's first benchmark (config order), asked for
    on its own (rule score_benchmark: one benchmark, where its metrics file would score the whole summary)."""
    seed = resolution.seeds_for(config["methods"][method], config["seeds"])[0]
    if not full:
        first = next(b for b in config["benchmarks"] if b in expected_benchmarks(config, model, method))
        return [f"results/{model}/{method}/seed{seed}/scores/{first}.parquet"]
    readings = sorted(applicable_benchmarks(config, model, method) - expected_benchmarks(config, model, method))
    return [f"results/{model}/{method}/summary.parquet"] + [
        f"results/{model}/{method}/seed{seed}/metrics/{b}.parquet" for b in readings
    ]


# ------------------------------------------------------------------------------------------- cheap settings

#: Trainer settings capped in every `training` block (models' and methods'; a per-family mapping becomes the
#: cap): one optimiser step on a few short examples.
CHEAP_TRAINING = {
    "max_steps": 1,
    "epochs": 1,
    "batch_size": 2,
    "gradient_accumulation_steps": 1,
    "limit_examples": 8,
    "max_length": 64,
    "warmup_steps": 0,
}
#: Fitted methods: a few sentences, a few INLP classifiers.
CHEAP_FIT = {
    "sd": {"limit_sentences": 400, "batch_size": 16},
    "inlp": {"limit_sentences": 600, "n_iterations": 2, "sentences_per_class": 40},
}
#: Metric options capped wherever a benchmark's metric takes them (set, or at their default): resamples (the same
#: code, fewer draws).
CHEAP_METRIC = {"bootstrap": 10, "n_samples": 200}
#: Perplexity windows (scoring.max_length of a `measure: perplexity` entry): short, so texts span several.
CHEAP_WINDOW = 16
#: New tokens of every generating benchmark, and HONEST's completions per template.
CHEAP_NEW_TOKENS = 8
CHEAP_TOP_K = 5
#: GAP contexts kept for the corpora (sentences, interventions), from each split.
GAP_CONTEXTS = 60
#: Raw corpus files read as they are (not through a parsed benchmark), cut to their first lines after their
#: data job has checked them: Bartl et al.'s flipped GAP.
FEW_LINES = {"bartl2020_gap_flipped": 120}
#: Rows kept of a benchmark's items when FEW_ITEMS has no rule for its dataset: evenly spaced over the file.
DEFAULT_ITEMS = 12


def _evenly(table: pa.Table, n: int) -> pa.Table:
    if table.num_rows <= n:
        return table
    return table.take(np.unique(np.linspace(0, table.num_rows - 1, n).round().astype(int)))


def _first_per_group(table: pa.Table, columns: tuple[str, ...], n: int) -> pa.Table:
    """The first n rows of every group of `columns` (every group survives, so do per-group metrics)."""
    frame = table.select(list(columns)).to_pandas()
    keep = frame.groupby(list(columns), sort=False, dropna=False).cumcount().to_numpy() < n
    return table.filter(pa.array(keep))


def _first_units(table: pa.Table, per: tuple[str, ...], unit: str, n: int) -> pa.Table:
    """Every row of the first n values of `unit` within each group of `per` (a unit stays whole)."""
    frame = table.select(list(per) + [unit]).to_pandas()
    firsts = frame.drop_duplicates().groupby(list(per), sort=False, dropna=False).head(n)
    keep = frame.merge(firsts.assign(_keep=True), how="left", on=list(per) + [unit])["_keep"].fillna(False)
    return table.filter(pa.array(keep.to_numpy(dtype=bool)))


#: How to take a few items of a dataset (by its scoring definition, `measure` or dataset) so that its metric
#: still computes: a dataset whose metric needs every group (SEAT's target and attribute sets, logprob's
#: professions per target, StereoSet's examples) keeps a few rows of each. Anything else: DEFAULT_ITEMS
#: rows, evenly spaced. A new benchmark whose metric fails on those gets its rule here.
FEW_ITEMS = {
    "seat": lambda t: _first_per_group(t, ("test", "role"), 2),
    "seat_templates": lambda t: _first_per_group(
        _first_units(t, ("test", "target_role"), "unit", 2), ("test", "unit", "attribute_role"), 3
    ),
    "logprob": lambda t: _first_per_group(t, ("target", "attribute_group", "split"), 1),
    "stereoset": lambda t: (
        _first_units(t, ("task", "bias_type"), "example_id", 2)
        if "example_id" in t.column_names
        else _evenly(t, DEFAULT_ITEMS)
    ),
    "perplexity": lambda t: t.take([int(np.argmin([len(x) for x in t.column("text").to_pylist()]))]),
    "gap": lambda t: _first_per_group(t, ("split",), GAP_CONTEXTS),
}


def few_items(benchmark_cfg: dict, table: pa.Table) -> pa.Table:
    rule = FEW_ITEMS.get(catalog.measure_of(benchmark_cfg)) or FEW_ITEMS.get(benchmark_cfg["dataset"])
    return rule(table) if rule else _evenly(table, DEFAULT_ITEMS)


def _cap_training(block: dict) -> dict:
    return {**block, **{k: v for k, v in CHEAP_TRAINING.items() if k in block or k in ("max_steps", "limit_examples")}}


def shrink(job, config: dict) -> None:
    """After a job: a parsed benchmark cut to a few items (its structure kept), a raw corpus to its first lines."""
    path = Path(job.output[0])
    if job.rule.name == "parse_benchmark":
        pq.write_table(few_items(config["benchmarks"][job.wildcards.benchmark], pq.read_table(path)), path)
    elif job.rule.name.startswith("data_") and job.rule.name[5:] in FEW_LINES:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(lines[: FEW_LINES[job.rule.name[5:]]]), encoding="utf-8")


def _cheap_metric(name: str, entry: dict) -> dict:
    """The entry's metric block with each CHEAP_METRIC option its metric accepts (asked of its option parser)."""
    metric = dict(entry.get("metric") or {})
    parse = catalog.definition(catalog.measure_of(entry), name).parse_options
    for key, value in CHEAP_METRIC.items():
        try:
            parse({**metric, key: value}, f"benchmarks.{name}.metric")
        except Exception:  # ConfigError: not an option of this metric
            continue
        metric[key] = value
    return metric


def _cheap_generation(entry: dict) -> None:
    """A generating benchmark's entry with CHEAP_NEW_TOKENS new tokens (BOLD's and the pairs' own keys, HONEST's
    `generation` block) and HONEST's top_k cut to CHEAP_TOP_K (its metric's k with it)."""
    scoring = entry.get("scoring") or {}
    if "max_new_tokens" in scoring:
        scoring["max_new_tokens"] = CHEAP_NEW_TOKENS
    if isinstance(scoring.get("generation"), dict):
        scoring["generation"]["max_new_tokens"] = CHEAP_NEW_TOKENS
    if "top_k" in scoring:
        scoring["top_k"] = CHEAP_TOP_K
        metric = entry.setdefault("metric", {})
        metric["k"] = [k for k in metric.get("k", [1, 5, 10, 20]) if k <= CHEAP_TOP_K]


def cheap_config(config: dict, data_dir: Path, shared_data: Path) -> dict:
    """The shipped config with its cost knobs turned down; nothing left out for missing data."""
    config["data_dir"] = str(data_dir)
    config["missing_data"] = "error"
    config["optional_benchmarks"] = []
    config["only_benchmarks"] = None
    # The tiny models' stand-ins (models.<tiny>.stand_ins) are subsets of the same dataset and measure: with
    # FEW_ITEMS cutting every parsed table, the whole entry covers the same code; it runs on every tiny model.
    subsets = {e for m in config["models"].values() for e in (m.get("stand_ins") or {}).values()}
    config["benchmarks"] = {n: e for n, e in config["benchmarks"].items() if n not in subsets}
    for entry in config["models"].values():
        entry.pop("stand_ins", None)
        if "training" in entry:
            entry["training"] = _cap_training(entry["training"])
    for name, entry in config["benchmarks"].items():
        if catalog.is_measurable(entry):
            entry["metric"] = _cheap_metric(name, entry)
        if entry.get("measure") == "perplexity":
            entry.setdefault("scoring", {})["max_length"] = CHEAP_WINDOW
        _cheap_generation(entry)
    for entry in config["methods"].values():
        if entry.get("training"):
            entry["training"] = _cap_training(entry["training"])
        entry.update(CHEAP_FIT.get(entry["kind"], {}))
    # Manela et al.'s GPR task needs OntoNotes (licensed): WinoBias' CoNLL files stand in, as in the methods run
    config["corpora"]["ontonotes"].update(
        path=str(shared_data / "winobias" / "conll_format"), pattern="dev_type1_pro_stereotype.v4_auto_conll"
    )
    return config


# ------------------------------------------------------------------------------------ data the checkout lacks


def _wikitext_stand_in(path: Path) -> None:
    """WikiText-2 raw's test split as the HF parquet holds it (one `text` column of lines)."""
    lines = [
        "",
        " = Robert Boulter = \n",
        "",
        " Robert Boulter is an English actor . He had a guest role in 2000 . \n",
        " She was a doctor and he was a nurse in the play . \n",
        "",
    ]
    pq.write_table(pa.table({"text": lines}), path)


def _stereoset_stand_in(path: Path) -> None:
    shutil.copy(FIXTURES / "stereoset_dev_small.json", path)


#: Stand-ins for configured files that ../shared/data does not hold (their checksums are unpinned upstream).
STAND_INS = {
    ("wikitext2", "wikitext-2-raw-v1-test.parquet"): _wikitext_stand_in,
    ("stereoset", "dev.json"): _stereoset_stand_in,
}


def data_folder(config: dict, shared_data: Path, dest: Path) -> Path:
    """../shared/data (linked) plus a stand-in for every file a benchmark needs that it lacks."""
    from lmbias.parsers import is_generated, required_files

    dest.mkdir(parents=True, exist_ok=True)
    for folder in shared_data.iterdir():
        (dest / folder.name).symlink_to(folder, target_is_directory=True)
    for name, bench in config["benchmarks"].items():
        if is_generated(bench["dataset"]):
            continue
        for file in required_files(bench, config["data"], name, dest):
            if (dest / bench["dataset"] / file).exists():
                continue
            make = STAND_INS.get((bench["dataset"], file))
            assert make, (
                f"benchmark {name!r}: {shared_data}/{bench['dataset']}/{file} is missing and this test has no "
                f"stand-in for it (STAND_INS)"
            )
            folder = dest / bench["dataset"]
            if folder.is_symlink():  # a real folder of links, so the stand-in can sit beside the real files
                folder.unlink()
                folder.mkdir()
                for real in (shared_data / bench["dataset"]).iterdir():
                    (folder / real.name).symlink_to(real)
            folder.mkdir(exist_ok=True)
            make(folder / file)
    return dest


# ------------------------------------------------------------------------------- Snakemake's jobs, in process


def build_dag(workdir: Path, targets: list[str]):
    """(jobs in dependency order, Snakemake's config) of a forced run of `targets`, from Snakemake's API."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import DAGSettings, OutputSettings, ResourceSettings

    with contextlib.chdir(workdir), SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        # one core: every job's threads (torch's, set by the scoring and training jobs) are capped at 1
        workflow_api = api.workflow(
            snakefile=Path("Snakefile"), workdir=Path("."), resource_settings=ResourceSettings(cores=1)
        )
        dag_api = workflow_api.dag(dag_settings=DAGSettings(targets=targets, forceall=True))
        dag_api.execute_workflow(executor="dryrun")
        workflow = workflow_api._workflow
        ordered = [job for level in workflow.dag.toposorted() for job in sorted(level, key=lambda j: str(j))]
        return ordered, workflow.config


def run_job(job, config: dict, workdir: Path) -> None:
    """One job as Snakemake runs it: its script with its `snakemake` object (as the tests' in-process executor
    runs it), or its rule's `run:` block."""
    rule = job.rule
    for path in list(job.output) + list(job.log):
        Path(workdir, path).parent.mkdir(parents=True, exist_ok=True)
    if rule.script is None:  # a `run:` rule (the cheap jobs): its block, called as Snakemake's run_wrapper does
        job_args = dict(input=job.input, output=job.output, params=job.params, wildcards=job.wildcards, log=job.log)
        job_args |= dict(threads=job.threads, resources=job.resources, rule=rule.name, basedir=rule.basedir, jobid=0)
        unused = ("conda_env", "container_img", "singularity_args", "env_modules", "bench_record", "bench_iteration")
        unused += ("shadow_dir", "edit_notebook", "conda_base_path", "sourcecache_path", "runtime_sourcecache_path")
        with job_sandbox():
            rule.run_func(
                **job_args,
                **dict.fromkeys((*unused, "runtime_paths")),
                use_singularity=False,
                is_shell=False,
                cleanup_scripts=False,
            )
        return
    run_script(job, config)


def _log_tail(workdir: Path, job) -> str:
    text = ""
    for path in job.log:
        with contextlib.suppress(OSError):
            text += Path(workdir, path).read_text()[-1500:]
    return text


# ------------------------------------------------------------------------------------------------- the run


@pytest.fixture(scope="module")
def every_combination(tmp_path_factory, repo_root, shared_data):
    root = tmp_path_factory.mktemp("every")
    workdir = copy_workflow(repo_root, root / "wf")
    shipped = yaml.safe_load((workdir / "config.yaml").read_text())
    data = data_folder(shipped, shared_data, root / "data")
    config = cheap_config(shipped, data, shared_data)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    pairs, others = [], []
    for model in tiny_models(config):
        full, one = methods_for(config, model)
        pairs += [(model, method) for method in full]
        others += [(model, method) for method in one]
    targets = [target for model, method in pairs for target in targets_for(config, model, method)] + [
        target for model, method in others for target in targets_for(config, model, method, full=False)
    ]
    timings: dict[str, float] = {}
    start, cpu = time.perf_counter(), time.process_time()
    jobs, run_config = build_dag(workdir, targets)
    timings["dag"] = time.perf_counter() - start
    failed: dict[str, str] = {}
    with contextlib.chdir(workdir):
        for job in jobs:
            if any(str(f) in failed for f in job.input):  # downstream of a failure: not run, not reported again
                failed.update({str(f): "" for f in job.output})
                continue
            began = time.perf_counter()
            try:
                run_job(job, run_config, workdir)
                shrink(job, run_config)
            except BaseException as error:  # noqa: BLE001 (SystemExit of a script included)
                if isinstance(error, KeyboardInterrupt):
                    raise
                failed.update({str(f): "" for f in job.output})
                failed[str(job.output[0]) + " "] = (
                    f"{job.rule.name} {dict(job.wildcards.items())}: {type(error).__name__}: {error}\n"
                    f"{''.join(traceback.format_exception(error)[-3:])}\nlog: {_log_tail(workdir, job)}"
                )
            key = job.rule.name + (f":{job.wildcards.benchmark}" if job.rule.name == "score_benchmark" else "")
            timings[key] = timings.get(key, 0.0) + time.perf_counter() - began
    timings["total"] = time.perf_counter() - start
    timings["total cpu"] = time.process_time() - cpu
    errors = [text for text in failed.values() if text]
    return {
        "workdir": workdir,
        "config": config,
        "pairs": pairs,
        "others": others,
        "jobs": jobs,
        "errors": errors,
        "timings": timings,
    }


def test_every_job_of_every_combination_runs(every_combination):
    run = every_combination
    print(
        f"\n{len(run['pairs'])} (model, method) summaries and {len(run['others'])} pairs on one benchmark, "
        f"{len(run['jobs'])} jobs; seconds per rule: "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(run["timings"].items(), key=lambda kv: -kv[1]))
    )
    assert not run["errors"], f"{len(run['errors'])} job(s) failed:\n\n" + "\n\n".join(run["errors"])


def test_every_summary_holds_every_benchmark_its_model_and_method_allow(every_combination):
    run, config = every_combination, every_combination["config"]
    covered = set()
    for model, method in run["pairs"]:
        path = run["workdir"] / f"results/{model}/{method}/summary.parquet"
        assert path.exists(), f"{path} was not built"
        held = set(pq.read_table(path, columns=["benchmark"]).column("benchmark").to_pylist())
        assert held == expected_benchmarks(config, model, method), (model, method)
        left = {e["benchmark"] for e in summary_left_out(path)}
        assert not left - {
            b
            for b in config["benchmarks"]
            if resolution.method_benchmark_exclusion(method, config["methods"][method], config["benchmarks"][b])
        }, (model, method, left)
        covered |= {(config["models"][model]["family"], config["methods"][method]["kind"], b) for b in held}
    families = {config["models"][m]["family"] for m in tiny_models(config)}
    kinds = {e["kind"] for e in config["methods"].values()}
    checked = [(pair, targets_for(config, *pair)[1:]) for pair in run["pairs"]]  # the peer readings' metrics
    checked += [(pair, targets_for(config, *pair, full=False)) for pair in run["others"]]
    for (model, method), targets in checked:
        for target in targets:
            assert (run["workdir"] / target).exists(), f"{target} was not built"
            covered.add((config["models"][model]["family"], config["methods"][method]["kind"], Path(target).stem))
    measurable = {b for b in config["benchmarks"] if catalog.is_measurable(config["benchmarks"][b])}
    assert {f for f, _, _ in covered} == families and {k for _, k, _ in covered} == kinds
    assert {b for _, _, b in covered} == measurable
    runs = {
        (m, k, b)
        for (m, k) in run["pairs"] + run["others"]
        for b in applicable_benchmarks(config, m, k)
        if (run["workdir"] / f"results/{m}/{k}/seed0/scores/{b}.parquet").exists()
    }
    print(
        f"\n{len(run['pairs'])} (model, way of scoring) pairs crossed with every benchmark they allow; "
        f"{len(runs)} (model, method, benchmark) scorings; {len(covered)} (family, method kind, benchmark) combinations"
    )


def _one_file(named) -> str | None:
    """A job's named input as one path (Snakemake gives a list for an empty or several-file input)."""
    if isinstance(named, str):
        return named
    return str(named[0]) if len(named) else None


def test_one_scoring_job_per_pair_writes_what_one_job_per_benchmark_would(every_combination, tmp_path):
    """Every (model, method, seed) is scored by one score_model job, loading its model once; its score files are
    byte for byte what a job of its own per benchmark (rule score_benchmark: the same function, one benchmark)
    writes: for every family and way of
    scoring (trained model folders, LoRA adapters, SentenceDebias and INLP projections, Self-Debias), one
    benchmark each, a different one from pair to pair."""
    from helpers.scoring import score_one
    from lmbias.metrics.score_keys import read_manifest, stored_key
    from lmbias.workflow.inputs import scoring_libraries
    from lmbias.workflow.scoring_specs import read_benchmark_spec, read_model_spec

    run = every_combination
    jobs = [job for job in run["jobs"] if job.rule.name == "score_model"]
    seeds = [(job.wildcards.model, job.wildcards.method, job.wildcards.seed) for job in jobs]
    assert len(seeds) == len(set(seeds)) and {(m, k) for m, k, _ in seeds} == set(run["pairs"])
    # score_benchmark scored the pairs on one benchmark and the peer readings outside a summary: never a file
    # a score_model job writes too
    singles = [job for job in run["jobs"] if job.rule.name == "score_benchmark"]
    assert set(run["others"]) <= {(j.wildcards.model, j.wildcards.method) for j in singles}
    by_seed = {tuple(job.wildcards[k] for k in ("model", "method", "seed")): job for job in jobs}
    for single in singles:
        job = by_seed.get(tuple(single.wildcards[k] for k in ("model", "method", "seed")))
        assert job is None or single.wildcards.benchmark not in [Path(p).stem for p in job.input.spec], single
    with contextlib.chdir(run["workdir"]):
        for i, job in enumerate(sorted(jobs, key=str)):
            manifest = read_manifest(job.output[0])
            name = sorted(manifest)[i % len(manifest)]
            alone = tmp_path / f"{job.wildcards.model}-{job.wildcards.method}" / "scores" / f"{name}.parquet"
            # what the job read of the config: its scoring specs (lmbias.workflow.scoring_specs)
            spec = read_benchmark_spec(next(p for p in job.input.spec if Path(p).stem == name))
            with job_sandbox():
                score_one(
                    f"results/data/{name}.parquet",
                    alone,
                    job.wildcards.model,
                    read_model_spec(job.input.model_spec)["model_entry"],
                    {**spec["method_entry"], "model_dir": _one_file(job.input.method_model)},
                    name,
                    spec["entry"],
                    weights_dir=_one_file(job.input.weights),
                    threads=1,
                    max_tokens=int(job.resources.max_tokens),
                    # what score_model's script gives its key (scripts/score_model.py)
                    library=scoring_libraries({"methods": {job.wildcards.method: spec["method_entry"]}},
                                              job.wildcards.method, spec["entry"]),
                    seed=int(job.wildcards.seed),
                )  # fmt: skip
            assert stored_key(alone) == manifest[name]["score_key"], (job.wildcards.model, job.wildcards.method, name)
            together = Path(manifest[name]["scores"]).read_bytes()
            assert together == alone.read_bytes(), (job.wildcards.model, job.wildcards.method, name)
