# Shared helpers: cross-checks of the config that a schema cannot express, wildcard constraints,
# and input functions. Every config value a job uses reaches it through `params:` as the slice for
# its wildcards, so an edit reruns only the jobs that read the edited slice.

import inspect
import re
from functools import lru_cache
from pathlib import Path

from lmbias.config import hub_model_folder as _hub_model_folder
from lmbias.engine.scoring import DEFAULT_MAX_TOKENS
from lmbias.corpora.jobs import LEXICON_INPUTS as _TRAIN_LEXICON, NAMES_INPUT as _TRAIN_NAMES
from lmbias.metrics import comparison as paired_comparison
from lmbias.metrics.summary import AggregateSettings
from lmbias import registry
from lmbias.parsers import is_generated as is_generated_dataset
from lmbias.parsers import required_files as required_benchmark_files
from lmbias.parsers.sources import resolve_source as resolve_data_source
from snakemake.logging import logger
from lmbias.errors import ConfigError
from lmbias.config import check_papers
from lmbias.papers import grid as _readings_grid
from lmbias.workflow import write_source_fingerprint

RESERVED_MODEL_NAMES = {"data", "corpora", "tables", "plots", "papers", "report.html"}


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names))


def _check_config():
    models, methods, benchmarks = config["models"], config["methods"], config["benchmarks"]
    for name in models:
        if name in RESERVED_MODEL_NAMES:
            raise ConfigError(f"models.{name}: this name is reserved for a results/ folder; choose another")
    for name, entry in models.items():
        if "tiny" in entry and entry.get("path") != f"resources/models/{name}":
            raise ConfigError(f"models.{name}.path: a tiny model is built into resources/models/{name}; set path to that")
    for i, name in enumerate(config["targets"]["models"]):
        if name not in models:
            raise ConfigError(f"targets.models[{i}]: unknown model {name!r}; configured: {', '.join(sorted(models))}")
    for i, name in enumerate(config["targets"]["methods"]):
        if name not in methods:
            raise ConfigError(f"targets.methods[{i}]: unknown method {name!r}; configured: {', '.join(sorted(methods))}")
    for name, bench in benchmarks.items():
        if bench["dataset"] not in config["data"] and not is_generated_dataset(bench["dataset"]):
            raise ConfigError(f"benchmarks.{name}.dataset: {bench['dataset']!r} is not a key of `data`")
        registry.measure_of(bench, name)  # a misspelt `measure` fails here, naming the entry
    for i, name in enumerate(config.get("only_benchmarks") or []):
        if name not in benchmarks:
            raise ConfigError(f"only_benchmarks[{i}]: unknown benchmark {name!r}; configured: {', '.join(sorted(benchmarks))}")
    for i, name in enumerate(config.get("optional_benchmarks") or []):
        if name not in benchmarks:
            raise ConfigError(f"optional_benchmarks[{i}]: unknown benchmark {name!r}; configured: {', '.join(sorted(benchmarks))}")
    for name, entry in config.get("comparisons", {}).items():
        paired_comparison.check_comparison(name, entry, config)
    for name, entry in methods.items():
        registry.check_method_entry(name, entry)
        for i, bench in enumerate(entry.get("benchmarks") or []):
            if bench not in benchmarks:
                raise ConfigError(f"methods.{name}.benchmarks[{i}]: unknown benchmark {bench!r}; configured: "
                                  f"{', '.join(sorted(benchmarks))}")
    for name, entry in models.items():
        registry.check_training_block(entry.get("training") or {}, f"models.{name}.training", registry.MODEL_METHOD_DEFAULTS)
    AggregateSettings.from_config(config.get("aggregate"))
    check_papers(config)
    for i, name in enumerate(config["targets"].get("comparisons", [])):
        if name not in config.get("comparisons", {}):
            raise ConfigError(f"targets.comparisons[{i}]: unknown comparison {name!r}; configured: {', '.join(sorted(config.get('comparisons', {}))) or 'none'}")


try:
    _check_config()
except ConfigError as error:  # name the file (config.yaml, a --configfile overlay, --config) that set the key
    from lmbias.config import name_source

    raise name_source(error, CONFIG_SOURCES) from None


wildcard_constraints:
    model=_alternatives(config["models"]),
    method=_alternatives(config["methods"]),
    benchmark=_alternatives(config["benchmarks"]),
    seed=r"\d+",
    library=_alternatives({registry.measure_of(entry) for entry in config["benchmarks"].values()} | {"finetune", "sentence_debias", "inlp", "self_debias"}),
    comparison=_alternatives(config.get("comparisons", {})) or "(?!)",


def hub_model_folder(name):
    """Where hub model `name` is fetched to (by fetch_hub_model); lmbias.config.hub_model_folder."""
    return _hub_model_folder(config, name)


#: Model-entry keys no number depends on (the padded tokens of a forward pass): kept out of every params slice,
#: so editing them reruns nothing. Scoring and fitting jobs get max_tokens as a resource (scoring_max_tokens).
RUN_ONLY_MODEL_KEYS = ("max_tokens",)


def _with_snapshot(name, entry):
    """What a job reads of a model entry: a hub entry gains `snapshot`, the folder its job loads offline
    (lmbias.engine.models); RUN_ONLY_MODEL_KEYS are left out."""
    entry = {k: v for k, v in entry.items() if k not in RUN_ONLY_MODEL_KEYS}
    return {**entry, "snapshot": hub_model_folder(name)} if "hub_id" in entry else entry


def scoring_max_tokens(wildcards):
    """models.<model>.max_tokens, the padded tokens a forward pass of a scoring or fitting job may hold
    (lmbias.engine.scoring.scoring_budget). A resource, not a param: scores are the same whatever the budget
    (to float rounding, docs/llms.md, "Scoring by token budget"), so editing it reruns nothing; a profile's
    set-resources may override it per rule."""
    return config["models"][wildcards.model].get("max_tokens", DEFAULT_MAX_TOKENS)


def model_entry(wildcards):
    """The model's entry for scoring: without its `training` defaults, so editing those rescores nothing
    that did not retrain; a hub model's with the folder it was fetched into."""
    entry = {k: v for k, v in config["models"][wildcards.model].items() if k != "training"}
    return _with_snapshot(wildcards.model, entry)


def method_entry(wildcards):
    """What scoring needs of the method: its kind (the weights come in as the method's model folder), and
    Self-Debias' options (prefix, decay_constant, epsilon, defaults filled in): editing them rescores."""
    check_model_method(wildcards.model, wildcards.method)
    kind = config["methods"][wildcards.method]["kind"]
    if kind == "self_debias":
        return {"kind": kind, **resolved_method(wildcards.model, wildcards.method)["self_debias"]}
    return {"kind": kind}


def benchmark_scoring_slice(wildcards):
    """What scoring depends on: the benchmark entry without its `metric` options (nor a peer reading's
    `reading` text, which only the paper tables' notes print)."""
    bench = config["benchmarks"][wildcards.benchmark]
    return {k: v for k, v in bench.items() if k not in ("metric", _readings_grid.READING_KEY)}


def seeds_for(method):
    return registry.seeds_for(config["methods"][method], config["seeds"])


def model_weights_input(wildcards):
    """The weights a job reads: a locally built or local model dir, or a hub id's fetched folder (rule
    fetch_hub_model)."""
    entry = config["models"][wildcards.model]
    if "tiny" in entry:
        return f"resources/models/{wildcards.model}"
    if "path" in entry:
        if not Path(entry["path"]).exists():
            raise ConfigError(f"models.{wildcards.model}.path: model folder {entry['path']} does not exist "
                              "(put the downloaded model there, or fix the path)")
        return entry["path"]
    return hub_model_folder(wildcards.model)


def checked_seed(wildcards):
    """The path's seed, after checking that it is one the method runs."""
    _reject_unknown_seed(f"results/{wildcards.model}/{wildcards.method}/seed{wildcards.seed}", wildcards.method, wildcards.seed)
    return int(wildcards.seed)


def checked_benchmark(wildcards):
    """The benchmark's config entry, after checking that it applies to this model's family (and that the
    path's seed is one the method runs)."""
    checked_seed(wildcards)
    entry = config["benchmarks"][wildcards.benchmark]
    registry.check_family(wildcards.benchmark, entry, config["models"][wildcards.model]["family"], wildcards.model)
    registry.check_method_benchmark(wildcards.method, config["methods"][wildcards.method], wildcards.benchmark, entry)
    return entry


def scoring_inputs(wildcards):
    """Every input of a scoring job but its script, from one input function (Snakemake's cost per
    input-function call dominates a large DAG's build): the parsed items, the library, the base weights and
    the method's model folder."""
    bench = checked_benchmark(wildcards)
    return {
        "benchmark_items": f"results/data/{wildcards.benchmark}.parquet",
        "library": library_fingerprint_file(registry.measure_of(bench)),
        "weights": model_weights_input(wildcards),
        # The method's fine-tuned or fitted model folder (none for pretrained, online and self_debias).
        "method_model": method_model_dir(wildcards),
        # Self-Debias' module (the wrapper scoring loads): editing it rescores that method only.
        "method_library": (library_fingerprint_file("self_debias")
                           if config["methods"][wildcards.method]["kind"] == "self_debias" else []),
    }


def library_fingerprint_file(name):
    """The one input standing for a set of library modules and resource files (written by the
    library_fingerprint rule): a benchmark dataset's (its scoring and metric jobs), `finetune` (the
    trainer's) or `sentence_debias`. Editing one of them reruns the jobs that read the set."""
    return f"results/library/{name}.sha256"


@lru_cache(maxsize=None)
def _library_sets():
    """{name: source files} of every fingerprint: each benchmark dataset's modules and resource files plus
    the scoring engine; the trainer's modules (fine-tuning); SentenceDebias' module (fitting)."""
    base = Path(workflow.basedir)
    sets = {registry.measure_of(entry): sorted(set(registry.source_files(registry.measure_of(entry))) | {str(base / "src/lmbias/engine/scoring.py")})
            for entry in config["benchmarks"].values()}
    models, sd = str(base / "src/lmbias/engine/models.py"), str(base / "src/lmbias/training/sentence_debias.py")
    inlp = str(base / "src/lmbias/training/inlp.py")
    fit_settings = str(base / "src/lmbias/training/fit_settings.py")  # read by the SentenceDebias and INLP fits
    sets["finetune"] = [str(base / f) for f in _training_modules() if str(base / f) not in (sd, inlp, fit_settings)] + [models]
    sets["sentence_debias"] = [sd, fit_settings, models, str(base / "src/lmbias/engine/debias_projection.py")]
    # INLP: its module, the word lists it picks gendered sentences with (through sentence_debias) and the hook
    sets["inlp"] = [inlp] + sets["sentence_debias"] + sorted(str(p) for p in (base / "resources/wordlists").glob("*.tsv"))
    sets["self_debias"] = [str(base / "src/lmbias/engine/self_debias.py")]
    return sets


def library_fingerprint_sources(wildcards):
    return _library_sets()[wildcards.library]


def _metric_inputs_of(benchmark, wildcards):
    """What one benchmark's metric rows are computed from: its scores, its library and any file the metric
    reads (a file's contents, not only its path, must trigger a rerun)."""
    bench = config["benchmarks"][benchmark]
    labels = (bench.get("metric") or {}).get("competency_labels")
    return (f"results/{wildcards.model}/{wildcards.method}/seed{wildcards.seed}/scores/{benchmark}.parquet",
            library_fingerprint_file(registry.measure_of(bench)), [labels] if labels else [])


def metric_inputs(wildcards):
    checked_benchmark(wildcards)
    scores, library, files = _metric_inputs_of(wildcards.benchmark, wildcards)
    inputs = {"scores": scores, "library": library}
    if files:
        inputs["labels"] = files
    return inputs


def seed_metric_inputs(wildcards):
    """Inputs of a seed's metrics.parquet: the scores, libraries and files of every benchmark its summary
    holds (one input function: Snakemake's cost per call dominates a large DAG's build)."""
    checked_seed(wildcards)
    scores, libraries, files = [], set(), set()
    for benchmark in _summary_benchmarks(wildcards):
        path, library, extra = _metric_inputs_of(benchmark, wildcards)
        scores.append(path)
        libraries.add(library)
        files.update(extra)
    inputs = {"scores": scores, "library": sorted(libraries)}
    if files:
        inputs["labels"] = sorted(files)
    return inputs


def seed_metric_benchmark_slices(wildcards):
    """{benchmark: what its metric reads} for every benchmark of a seed's metrics.parquet."""
    return {b: _metric_slice(wildcards.method, b) for b in _summary_benchmarks(wildcards)}


@lru_cache(maxsize=None)
def missing_benchmark_data(name):
    """(missing path, config key of the file, where it was looked for) of benchmark `name`'s first local
    file that is not there, or None (generated benchmarks and downloads are never missing here)."""
    bench = config["benchmarks"][name]
    if is_generated_dataset(bench["dataset"]):
        return None
    for file in required_benchmark_files(bench, config["data"], name, config.get("data_dir")):
        kind, location = resolve_data_source(bench["dataset"], file, config["data"], config.get("data_dir"))
        if kind == "local" and not Path(location).exists():
            folder_key = f"data.{bench['dataset']}.path" if config["data"][bench["dataset"]].get("path") else "data_dir"
            return location, f"data.{bench['dataset']}.files.{file}", folder_key
    return None


_WARNED = set()


def _warn_once(message):
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(f"WARNING: {message}")


@lru_cache(maxsize=None)
def _readings_stand_for():
    """{peer reading entry: the benchmarks it stands for in papers.<paper>.readings}."""
    return _readings_grid.readings_stand_for(config)


@lru_cache(maxsize=None)
def _pair_readings():
    """{(model, method): the peer readings its summary holds}: those its papers' grids select."""
    return _readings_grid.pair_readings(config)


def _names_of(name):
    """The benchmark and, for a peer reading, the benchmarks it stands for: a list (only_benchmarks,
    optional_benchmarks, methods.<name>.benchmarks) that names one of them names the reading too."""
    return [name, *_readings_stand_for().get(name, ())]


@lru_cache(maxsize=None)
def _selection_verdict(name):
    """None when benchmark `name` is kept, else {benchmark, reason, config_key} of why it is left out.

    No silent shrinking: a configured benchmark whose data is missing stops the run, naming the file and
    its config key, unless the user opted out: `only_benchmarks` (this run's list), `missing_data: skip`,
    or `optional_benchmarks` (left out when their data is missing; config.yaml lists StereoSet and
    WikiText-2). A peer reading counts as listed where a benchmark it stands for is. Reasons name no folder, so moving the data does not rerun summaries.
    """
    only = config.get("only_benchmarks")
    if only is not None and not set(_names_of(name)) & set(only):
        return {"benchmark": name, "reason": "not in this run's only_benchmarks", "config_key": "only_benchmarks"}
    missing = missing_benchmark_data(name)
    if missing is None:
        return None
    location, file_key, folder_key = missing
    if config.get("missing_data", "error") == "skip":
        opt_out = "missing_data"
    elif set(_names_of(name)) & set(config.get("optional_benchmarks") or []):
        opt_out = "optional_benchmarks"
    else:
        raise ConfigError(
            f"benchmark {name!r}: its data file {location} is missing ({file_key}, looked for through {folder_key}). "
            f"Add the file, fix {folder_key}, or leave the benchmark out explicitly: --config only_benchmarks=[...] "
            f"for this run, optional_benchmarks: [{name}], or missing_data: skip"
        )
    _warn_once(f"benchmark {name!r} left out of summaries ({opt_out}): {location} is missing ({file_key})")
    return {"benchmark": name, "reason": f"data missing: {file_key} is not in the {folder_key} folder", "config_key": opt_out}


@lru_cache(maxsize=None)
def _summary_selection(model):
    """(benchmarks a summary of `model` holds, [{benchmark, reason, config_key}] of those it leaves out), the
    peer readings (entries with `reading:`) aside: a pair's summary holds those its papers select
    (`_reading_selection`)."""
    kept, left_out = [], []
    for name in registry.benchmarks_for(config["models"][model]["family"], config["benchmarks"]):
        if _readings_grid.is_reading(config["benchmarks"][name]):
            continue
        verdict = _selection_verdict(name)
        if verdict is None:
            kept.append(name)
        else:
            left_out.append(verdict)
    return kept, left_out


def _reading_selection(model, method):
    """(kept, left out) of the peer readings that the papers whose grids hold (model, method) select
    (papers.<paper>.readings) and that apply to the model's family; none for a pair in no paper's grid."""
    wanted = _pair_readings().get((model, method))
    if not wanted:
        return [], []
    applicable = set(registry.benchmarks_for(config["models"][model]["family"], config["benchmarks"]))
    kept, left_out = [], []
    for name in (w for w in wanted if w in applicable):
        verdict = _selection_verdict(name)
        if verdict is None:
            kept.append(name)
        else:
            left_out.append(verdict)
    return kept, left_out


def _summary_benchmarks(wildcards):
    check_model_method(wildcards.model, wildcards.method)
    benches = list(_summary_selection(wildcards.model)[0]) + _reading_selection(wildcards.model, wildcards.method)[0]
    if config["methods"][wildcards.method]["kind"] == "online":  # Online Skewness Mitigation changes WinoBias only
        benches = [b for b in benches if config["benchmarks"][b]["dataset"] == "winobias"]
    benches = [b for b in benches if not _method_exclusion(wildcards.method, b)]
    benches = [b for b in benches if not _method_choice(wildcards.method, b)]
    if not benches:
        raise ConfigError(f"model {wildcards.model!r}: no configured benchmark applies to family "
                          f"{config['models'][wildcards.model]['family']!r} (or only_benchmarks, or "
                          f"methods.{registry.base_method(wildcards.method)}.benchmarks, leaves none)")
    return benches


def _method_choice(method, benchmark):
    """Why the method's `benchmarks:` list leaves `benchmark` out of its summaries, or None (a peer reading
    is kept when the list names it or a benchmark it stands for)."""
    reasons = [registry.method_benchmark_choice(method, config["methods"][method], name) for name in _names_of(benchmark)]
    return None if None in reasons else reasons[0]


def _method_exclusion(method, benchmark):
    """Why `method` does not apply to `benchmark` (Self-Debias: embedding benchmarks), or None."""
    return registry.method_benchmark_exclusion(method, config["methods"][method], config["benchmarks"][benchmark])


def summary_left_out(wildcards):
    """The configured benchmarks this summary leaves out, and why (recorded in the summary's metadata):
    missing data or only_benchmarks (every method of the model), and benchmarks the method does not apply to."""
    readings = _reading_selection(wildcards.model, wildcards.method)
    left_out = [dict(entry) for entry in _summary_selection(wildcards.model)[1] + readings[1]]
    for name in _summary_selection(wildcards.model)[0] + readings[0]:
        reason = _method_exclusion(wildcards.method, name)
        if reason:
            left_out.append({"benchmark": name, "reason": reason, "config_key": f"methods.{wildcards.method}.kind"})
            continue
        reason = _method_choice(wildcards.method, name)
        if reason:
            left_out.append({"benchmark": name, "reason": reason,
                             "config_key": f"methods.{registry.base_method(wildcards.method)}.benchmarks"})
    return left_out


def summary_metric_files(wildcards):
    """One metrics.parquet per seed (every benchmark of the summary; see seed_metric_inputs)."""
    _summary_benchmarks(wildcards)  # fails early, naming the model, when no benchmark applies
    return [f"results/{wildcards.model}/{wildcards.method}/seed{seed}/metrics.parquet" for seed in seeds_for(wildcards.method)]


def summary_config_slices(wildcards):
    """Everything a summary's numbers depend on; its hash is recorded as provenance."""
    benches = _summary_benchmarks(wildcards)
    datasets = sorted({config["benchmarks"][b]["dataset"] for b in benches} & set(config["data"]))
    return {
        "model": {k: v for k, v in config["models"][wildcards.model].items() if k not in RUN_ONLY_MODEL_KEYS},
        "method": config["methods"][wildcards.method],
        "method_resolved": resolved_method(wildcards.model, wildcards.method),
        "benchmarks": {b: {k: v for k, v in config["benchmarks"][b].items() if k != _readings_grid.READING_KEY}
                       for b in benches},
        "data": {d: config["data"][d] for d in datasets},
        "seeds": seeds_for(wildcards.method),
    }


def aggregate_settings(wildcards):
    """config.yaml's `aggregate` block, checked and with its defaults filled in."""
    return AggregateSettings.from_config(config.get("aggregate")).to_dict()


def default_target_summaries():
    """The summaries of `targets:`, models outer, methods in the order written (pretrained first = before)."""
    return [
        f"results/{model}/{method}/summary.parquet"
        for model in config["targets"]["models"]
        for method in config["targets"]["methods"]
    ]


def default_target_comparisons():
    return [f"results/tables/paired/{name}.parquet" for name in config["targets"].get("comparisons", [])]


def all_targets():
    """What `snakemake` with no target builds: the `targets:` summaries and comparisons, and the page of their
    headline numbers (results/summary.md, .html)."""
    return default_target_summaries() + default_target_comparisons() + ["results/summary.md"]


def comparison_entry(wildcards):
    return config["comparisons"][wildcards.comparison]


def comparison_benchmark_slice(wildcards):
    """The compared benchmark's entry: its metric options (drop_artefacts) shape the test."""
    return config["benchmarks"][comparison_entry(wildcards)["benchmark"]]


def comparison_inputs(wildcards):
    entry = comparison_entry(wildcards)
    bench = entry["benchmark"]
    inputs = {
        side: [f"results/{entry[side]['model']}/{entry[side]['method']}/seed{seed}/scores/{bench}.parquet"
               for seed in seeds_for(entry[side]["method"])]
        for side in ("before", "after")
    }
    inputs["library"] = [library_fingerprint_file(registry.measure_of(config["benchmarks"][bench]))] + [
        str(Path(workflow.basedir) / f"src/lmbias/metrics/{m}.py") for m in ("comparison", "summary")]
    return inputs


def reject_unknown_comparison(wildcards):
    configured = ", ".join(sorted(config.get("comparisons", {}))) or "none"
    raise ConfigError(f"unknown comparison {wildcards.comparison!r} in the target path; comparisons configured in config.yaml: {configured}")


def reject_unknown_target(model, method):
    if model not in config["models"]:
        raise ConfigError(f"unknown model {model!r} in the target path; models configured in config.yaml: {', '.join(sorted(config['models']))}")
    if method not in config["methods"]:
        raise ConfigError(f"unknown method {method!r} in the target path; methods configured in config.yaml: {', '.join(sorted(config['methods']))}")
    raise ConfigError(f"results/{model}/{method}/summary.parquet: no rule can build it")


def valid_seed_paths_regex():
    """Regex (from just after `results/`) of every {model}/{method}/seed{k} folder the config defines."""
    by_method = "|".join(
        f"{re.escape(m)}/seed(?:{'|'.join(str(s) for s in seeds_for(m))})" for m in sorted(config["methods"])
    )
    return f"(?:{_alternatives(config['models'])})/(?:{by_method})"


def valid_result_paths_regex():
    """Regex (from just after `results/`) of every scores/metrics path the config defines."""
    return f"{valid_seed_paths_regex()}/(?:scores|metrics)/(?:{_alternatives(config['benchmarks'])})\\.parquet$"


def _reject_unknown_model_or_method(path, model, method):
    if model not in config["models"]:
        raise ConfigError(f"{path}: unknown model {model!r} in the target path; models configured in config.yaml: {', '.join(sorted(config['models']))}")
    if method not in config["methods"]:
        raise ConfigError(f"{path}: unknown method {method!r} in the target path; methods configured in config.yaml: {', '.join(sorted(config['methods']))}")


def _reject_unknown_seed(path, method, seed):
    seeds = seeds_for(method)
    if not seed.isdigit() or int(seed) not in seeds:
        raise ConfigError(f"{path}: method {method!r} runs seed(s) {', '.join(map(str, seeds))}, not {seed!r} (config key `seeds`)")


def reject_unknown_result(wildcards):
    """Input function of the reject_unknown_result rule: names what in a scores/metrics path is not configured."""
    model, method, seed, benchmark = wildcards.model, wildcards.method, wildcards.seed, wildcards.benchmark
    path = f"results/{model}/{method}/seed{seed}/{wildcards.kind}/{benchmark}.parquet"
    _reject_unknown_model_or_method(path, model, method)
    if benchmark not in config["benchmarks"]:
        raise ConfigError(f"{path}: unknown benchmark {benchmark!r} in the target path; benchmarks configured in config.yaml: {', '.join(sorted(config['benchmarks']))}")
    _reject_unknown_seed(path, method, seed)
    raise ConfigError(f"{path}: no rule can build it")


def reject_unknown_seed_metrics(wildcards):
    """Input function of the reject_unknown_seed_metrics rule: the same for a seed's metrics.parquet."""
    path = f"results/{wildcards.model}/{wildcards.method}/seed{wildcards.seed}/metrics.parquet"
    _reject_unknown_model_or_method(path, wildcards.model, wildcards.method)
    _reject_unknown_seed(path, wildcards.method, wildcards.seed)
    raise ConfigError(f"{path}: no rule can build it")


def reject_unknown_model_folder(wildcards):
    tiny = sorted(n for n, e in config["models"].items() if "tiny" in e)
    raise ConfigError(f"resources/models/{wildcards.model}: unknown model {wildcards.model!r}; only models with a "
                      f"`tiny:` entry are built here (configured: {', '.join(tiny) or 'none'})")


# --- Corpus helpers (rules/corpora.smk); the _CORPORA* constants are set there ---
import re as _corpora_re

from lmbias.corpora import jobs as _corpora
from lmbias.errors import ConfigError as _CorporaConfigError


def _corpora_lib(*modules):
    return ["src/lmbias/corpora/jobs.py", "src/lmbias/corpora/nlp.py", "src/lmbias/io.py", "src/lmbias/errors.py"] + [f"src/lmbias/corpora/{m}.py" for m in modules]


def _corpora_pattern(names):
    names = sorted(names)
    return "|".join(_corpora_re.escape(n) for n in names) if names else "(?!x)x"


def _corpora_gap():
    return _CORPORA.get("gap") or {}


def _corpora_intervention(wildcards):
    """(config key, entry) of the intervention file: its own entry or a `{swap_rate}` template's, filled in."""
    entries = (_CORPORA.get(wildcards.corpus) or {}).get("interventions") or {}
    return _corpora.resolve_intervention(entries, wildcards.intervention, f"corpora.{wildcards.corpus}.interventions")


def _corpora_intervention_entry(wildcards):
    return _corpora_intervention(wildcards)[1]


def _corpora_intervention_key(wildcards):
    return _corpora_intervention(wildcards)[0]


def _corpora_intervention_inputs(wildcards):
    key, entry = _corpora_intervention(wildcards)
    entry = _corpora.check_intervention(entry, key)  # defaults filled in
    return {
        "sentences": f"results/corpora/{wildcards.corpus}/sentences.parquet",
        **_corpora.lexicon_inputs(entry["names"], entry["wordlist"]),
        "wordlists": _CORPORA_WORDLISTS,
        "library": _corpora_lib("augment", "counterfactual", "hall_maudslay"),
    }


def _corpora_ontonotes():
    return _CORPORA.get("ontonotes") or {}


def _corpora_gpr_inputs(wildcards):
    """Sentences, the word lists of the GPR file's `wordlist` (GN-GloVe's through the data rules) and the library."""
    opts = _corpora.gpr_options(_corpora_ontonotes().get("gpr"), _corpora.gpr_stem_variant(wildcards.gpr))
    return {
        "sentences": "results/corpora/ontonotes/sentences.parquet",
        **_corpora.lexicon_inputs(False, opts["wordlist"]),
        "wordlists": _CORPORA_WORDLISTS,
        "library": _corpora_lib("gpr", "anonymise", "conll", "coref", "counterfactual"),
    }


def _corpora_conll_files(wildcards):
    # Raises a ConfigError naming corpora.ontonotes.path when it is unset: only when a GPR file is asked for.
    return [str(p) for p in _corpora.ontonotes_files(_corpora_ontonotes())]


def _swap_rates_in_use():
    """Every swap rate a models.*.training or methods.*.training block names (what a template builds for
    `snakemake corpora`)."""
    blocks = [e.get("training") or {} for e in list(config["models"].values()) + list(config["methods"].values())]
    return sorted({float(b["swap_rate"]) for b in blocks if b.get("swap_rate") is not None})


def _corpus_intervention_files(corpus):
    out = []
    for name in _CORPORA[corpus]["interventions"]:
        if _corpora.is_template(name):
            out += [f"results/corpora/{corpus}/{name.replace(_corpora.SWAP_RATE_FIELD, _corpora.format_swap_rate(r))}.parquet"
                    for r in _swap_rates_in_use()]
        else:
            out.append(f"results/corpora/{corpus}/{name}.parquet")
    return list(dict.fromkeys(out))


def corpora_targets():
    """Every corpus file the config defines (GPR only when corpora.ontonotes.path is set); a `{swap_rate}`
    template for every swap rate a training block names."""
    out = []
    if _corpora_gap():
        out.append("results/corpora/gap/sentences.parquet")
    for corpus in _CORPORA_WITH_INTERVENTIONS:
        out += _corpus_intervention_files(corpus)
    if _corpora_ontonotes().get("path"):
        out += _corpora.gpr_files(_corpora_ontonotes().get("gpr"))
    return out


# --- Methods (rules/train.smk, rules/evaluate.smk): lmbias.registry resolves a (model, method) pair ---


def resolved_method(model, method):
    """Kind, corpus, trainer settings (or SD options) of `method` for `model`; ConfigError naming both when
    the model's family cannot run it."""
    resolved = registry.resolve_method(model, config["models"][model], method, config["methods"][method], config["models"])
    if "corpus" in resolved:
        _check_method_corpus(method, resolved["corpus"])
    return resolved


def check_model_method(model, method):
    registry.check_method_family(model, config["models"][model]["family"], method, config["methods"][method])


def _method_corpus_files():
    files = ["results/corpora/gap/sentences.parquet"] if _CORPORA.get("gap") else []
    for corpus in _CORPORA_WITH_INTERVENTIONS:
        files += [f"results/corpora/{corpus}/{name}.parquet" for name in _CORPORA[corpus]["interventions"]]
    return files + _corpora.gpr_files(_corpora_ontonotes().get("gpr")) + _corpora.bartl_corpus_files(_CORPORA)


_CORPUS_PATH_CHECKED = set()


def _check_method_corpus(method, path):
    """`path` must be a corpus this config builds: a named file, or a `{swap_rate}` template's file."""
    if path in _CORPUS_PATH_CHECKED:
        return
    known = _method_corpus_files()
    if path not in known:
        match = re.fullmatch(r"results/corpora/([^/]+)/([^/]+)\.parquet", path)
        entries = (_CORPORA.get(match.group(1)) or {}).get("interventions") or {} if match else {}
        templated = [n for n in entries if _corpora.is_template(n)]
        if not templated:
            raise ConfigError(f"methods.{method}.corpus: {path!r} is not a corpus this config builds; "
                              f"configured: {', '.join(known)}")
        try:
            _corpora.resolve_intervention(entries, match.group(2), f"corpora.{match.group(1)}.interventions")
        except ConfigError as error:
            raise ConfigError(f"methods.{method}.corpus: {path!r} is not a corpus this config builds ({error}); "
                              f"configured: {', '.join(known)}") from None
    _CORPUS_PATH_CHECKED.add(path)


def method_model_dir(wildcards):
    """The method's model folder a scoring job loads (none for pretrained and online: the base model)."""
    kind = config["methods"][wildcards.method]["kind"]
    if kind in registry.TRAINED_METHOD_KINDS | registry.FITTED_METHOD_KINDS:
        return f"results/{wildcards.model}/{wildcards.method}/seed{wildcards.seed}/model"
    return []


def training_model_entry(wildcards):
    """What fine-tuning reads of the model entry: not its scoring precision, nor its training defaults (those
    reach the job resolved, in `settings`), nor its `dtype` (full fine-tuning keeps float32 master weights,
    lmbias.training.jobs), so editing either rescores without retraining. A LoRA method (training.adapter)
    keeps `dtype`: its frozen base loads in it."""
    lora = resolved_method(wildcards.model, wildcards.method)["settings"].get("adapter") is not None
    drop = ("training", "precision") if lora else ("training", "precision", "dtype")
    entry = {k: v for k, v in config["models"][wildcards.model].items() if k not in drop}
    return _with_snapshot(wildcards.model, entry)


def fitting_model_entry(wildcards):
    """What SentenceDebias and INLP fits read of the model entry: as training_model_entry, but with `dtype`
    (their embeddings come from the model as scoring loads it)."""
    entry = {k: v for k, v in config["models"][wildcards.model].items() if k not in ("training", "precision")}
    return _with_snapshot(wildcards.model, entry)


def method_settings(wildcards):
    return resolved_method(wildcards.model, wildcards.method)["settings"]


def method_sd_settings(wildcards):
    return resolved_method(wildcards.model, wildcards.method)["sd_settings"]


def method_inlp_settings(wildcards):
    return resolved_method(wildcards.model, wildcards.method)["inlp_settings"]


@lru_cache(maxsize=None)
def _training_modules():
    return tuple(sorted(f"src/lmbias/training/{p.name}" for p in Path(workflow.basedir, "src/lmbias/training").glob("*.py")))


def method_job_inputs(wildcards):
    resolved = resolved_method(wildcards.model, wildcards.method)
    inputs = {
        "corpus": resolved["corpus"],
        "weights": model_weights_input(wildcards),
        # the trainer's modules for fine-tuning, SentenceDebias' for fitting: editing one reruns only its jobs
        "library": library_fingerprint_file({"sd": "sentence_debias", "inlp": "inlp"}.get(resolved["kind"], "finetune")),
    }
    words = (resolved.get("settings") or {}).get("block_augmentation_words")
    if words:  # bias-bench's CDA word list (data.bias_bench), fetched and checked by its data rule
        inputs["augmentation_words"] = words
    return inputs


def metric_benchmark_slice(wildcards):
    return _metric_slice(wildcards.method, wildcards.benchmark)


def _metric_slice(method, benchmark):
    """Only what the metric reads; for an `online` method WinoBias applies online skew (Manela et al.'s -O),
    never the plain variant (that is the pretrained row)."""
    bench = {k: v for k, v in config["benchmarks"][benchmark].items() if k in ("dataset", "measure", "metric")}
    if config["methods"][method]["kind"] == "online" and bench["dataset"] == "winobias":
        metric = dict(bench.get("metric") or {})
        skews = [v for v in (metric.get("online_skew") or []) if v != "none"] or ["all_professions"]
        bench = {**bench, "metric": {**metric, "online_skew": skews}}
    return bench


def method_names_of_kinds(kinds):
    return [name for name, entry in config["methods"].items() if entry["kind"] in kinds]


# Snakemake inspects the signature of an input function on every call (inspect.signature, a few times per
# job); a precomputed __signature__ makes that a lookup. Behaviour is unchanged.
for _input_function in (model_entry, method_entry, benchmark_scoring_slice, scoring_inputs, metric_inputs,
                        seed_metric_inputs, seed_metric_benchmark_slices,
                        summary_metric_files, summary_config_slices, summary_left_out, comparison_entry,
                        comparison_benchmark_slice, comparison_inputs, method_job_inputs, method_settings,
                        method_sd_settings, method_inlp_settings, training_model_entry, fitting_model_entry, metric_benchmark_slice, model_weights_input,
                        method_model_dir, _corpora_intervention_inputs, _corpora_intervention_entry,
                        _corpora_intervention_key, _corpora_conll_files):
    _input_function.__signature__ = inspect.signature(_input_function)


# --------------------------------------------------------------------------- SentenceDebias inputs

#: The dataset cds files (rules/data.smk) a SentenceDebias fit with `pair_list: dagender` reads.
SD_DAGENDER_PAIR_FILES = {"sd_word_pairs": _TRAIN_LEXICON["cds_pairs"], "sd_name_pairs": _TRAIN_NAMES["name_pairs"]}


def sd_pair_files(wildcards):
    """The DA-Gender pair list's files when the method selects it, else nothing (the default list is in
    resources/wordlists/, read through the library)."""
    settings = resolved_method(wildcards.model, wildcards.method)["sd_settings"]
    return SD_DAGENDER_PAIR_FILES if settings.get("pair_list") == "dagender" else {}


sd_pair_files.__signature__ = inspect.signature(sd_pair_files)
