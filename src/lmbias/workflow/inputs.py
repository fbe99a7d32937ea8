"""Which inputs a job reads (rules/evaluate.smk, train.smk, aggregate.smk): data, weights, model folders,
scores, and the library fingerprint files that stand for the modules a job imports (Snakemake does not track
imports; results/library/{name}.sha256 is rewritten when one of them is edited)."""

from __future__ import annotations

from pathlib import Path

from lmbias.benchmarks import catalog
from lmbias.config import gguf_file_folder, hub_model_folder
from lmbias.corpora.jobs import LEXICON_INPUTS, NAMES_INPUT
from lmbias.errors import ConfigError
from lmbias.methods import resolution
from lmbias.workflow.methods import has_model_folder, resolved_method
from lmbias.workflow.refusals import check_seed
from lmbias.workflow.scorers import classified_files, scorer_weights_input
from lmbias.workflow.scoring_specs import method_spec_file, model_spec_file
from lmbias.workflow.selection import BenchmarkSelection, seeds_for

#: The dataset cds files (rules/data.smk) a SentenceDebias fit with `pair_list: dagender` reads.
SD_DAGENDER_PAIR_FILES = {"sd_word_pairs": LEXICON_INPUTS["cds_pairs"], "sd_name_pairs": NAMES_INPUT["name_pairs"]}


def library_fingerprint_file(name: str) -> str:
    """The one input standing for a set of library modules and resource files (written by the
    library_fingerprint rule): a benchmark dataset's (its scoring and metric jobs), `finetune` (the
    trainer's) or `sentence_debias`. Editing one of them reruns the jobs that read the set."""
    return f"results/library/{name}.sha256"


def training_modules(base: str | Path) -> tuple[str, ...]:
    """The trainer package's modules, relative to the checkout `base`."""
    return tuple(sorted(f"src/lmbias/training/{p.name}" for p in Path(base, "src/lmbias/training").glob("*.py")))


def library_sets(config: dict, base: str | Path) -> dict[str, list[str]]:
    """{name: source files} of every fingerprint: each benchmark's library files (its definition's, with the
    scoring engine's); the trainer's modules (fine-tuning); SentenceDebias' module (fitting); INLP's; Self-Debias'."""
    base = Path(base)
    # a benchmark's: found from its definition (lmbias.benchmarks.catalog.source_files), the engine's included
    sets = {
        catalog.measure_of(entry): catalog.source_files(catalog.measure_of(entry))
        for entry in config["benchmarks"].values()
    }
    # loading a model: its spec, the weights, what a fetched folder records, a method's folder or adapter
    models = [str(base / f"src/lmbias/engine/{m}.py") for m in ("models", "model_spec", "hub", "method_folders")]
    sd = str(base / "src/lmbias/training/sentence_debias.py")
    inlp = str(base / "src/lmbias/training/inlp.py")
    fit_settings = str(base / "src/lmbias/training/fit_settings.py")  # read by the SentenceDebias and INLP fits
    sets["finetune"] = [
        str(base / f) for f in training_modules(base) if str(base / f) not in (sd, inlp, fit_settings)
    ] + models
    # SentenceDebias reads its word lists through the swap lexicon
    lexicon = str(base / "src/lmbias/corpora/swap_lexicon.py")
    sets["sentence_debias"] = [sd, fit_settings, *models, str(base / "src/lmbias/engine/debias_projection.py"), lexicon]
    # INLP: its module, the word lists it picks gendered sentences with (through sentence_debias) and the hook
    sets["inlp"] = (
        [inlp] + sets["sentence_debias"] + sorted(str(p) for p in (base / "resources/wordlists").glob("*.tsv"))
    )
    sets["self_debias"] = [str(base / "src/lmbias/engine/self_debias.py")]
    # the scorers block: classifying generations and their metric rows (lmbias.workflow.scorers)
    sets["classifiers"] = [
        str(base / f"src/lmbias/{m}.py")
        for m in ("engine/classifiers", "engine/batching", "metrics/classifier_scores", "jobs/classification")
    ] + models
    return sets


def model_weights_input(config: dict, model: str) -> str:
    """The weights a job reads: a locally built or local model dir, or a hub id's fetched folder (rule
    fetch_hub_model). A local `path` must exist (relative to the working directory)."""
    entry = config["models"][model]
    if "tiny" in entry or "gguf" in entry:  # built by build_tiny_model / dequantize_gguf
        return f"resources/models/{model}"
    if "path" in entry:
        if not Path(entry["path"]).exists():
            raise ConfigError(
                f"models.{model}.path: model folder {entry['path']} does not exist "
                "(put the downloaded model there, or fix the path)"
            )
        return entry["path"]
    return hub_model_folder(config, model)


def gguf_inputs(config: dict, model: str) -> dict:
    """What dequantize_gguf reads: the GGUF file's local pieces (a path, or members of installed distributions:
    ConfigError naming the key and the install command when one is not installed), or the folder fetch_gguf_file
    downloads a hub file into; and the library that reads it."""
    from lmbias.engine.gguf import gguf_source, local_files

    source = gguf_source(model, config["models"][model])
    files = [gguf_file_folder(model)] if source.hub_id else local_files(source)
    base = Path(__file__).resolve().parents[3]
    return {
        "gguf": files,
        "script": str(base / "scripts/dequantize_gguf.py"),
        "library": [str(base / "src/lmbias/engine/gguf.py")],
    }


def checked_seed(config: dict, model: str, method: str, seed: str) -> int:
    """The path's seed, after checking that it is one the method runs."""
    check_seed(config, f"results/{model}/{method}/seed{seed}", method, seed)
    return int(seed)


def checked_benchmark(config: dict, model: str, method: str, seed: str, benchmark: str) -> dict:
    """The benchmark's config entry, after checking that it applies to this model's family and method (and
    that the path's seed is one the method runs)."""
    checked_seed(config, model, method, seed)
    entry = config["benchmarks"][benchmark]
    catalog.check_family(benchmark, entry, config["models"][model]["family"], model)
    resolution.check_method_benchmark(method, config["methods"][method], benchmark, entry)
    return entry


def method_model_dir(config: dict, model: str, method: str, seed: str) -> str | list:
    """The method's model folder a scoring job loads (none, [], for pretrained and online: the base model)."""
    if has_model_folder(config, method):
        return f"results/{model}/{method}/seed{seed}/model"
    return []


def scoring_inputs(config: dict, model: str, method: str, seed: str, benchmark: str) -> dict:
    """Every input of a scoring job but its script, from one input function (Snakemake's cost per
    input-function call dominates a large DAG's build): the parsed items, the library, the base weights and
    the method's model folder."""
    bench = checked_benchmark(config, model, method, seed, benchmark)
    return {
        # what its scores depend on from the config (rules scoring_model_spec, scoring_spec)
        "model_spec": model_spec_file(model),
        "spec": method_spec_file(config, method, benchmark),
        "benchmark_items": benchmark_items_file(benchmark),
        "library": library_fingerprint_file(catalog.measure_of(bench)),
        "weights": model_weights_input(config, model),
        # The method's fine-tuned or fitted model folder (none for pretrained, online and self_debias).
        "method_model": method_model_dir(config, model, method, seed),
        # Self-Debias' module (the wrapper scoring loads): editing it rescores that method only.
        "method_library": (
            library_fingerprint_file("self_debias") if config["methods"][method]["kind"] == "self_debias" else []
        ),
    }


def benchmark_items_file(benchmark: str) -> str:
    """A benchmark's parsed items (rule parse_benchmark)."""
    return f"results/data/{benchmark}.parquet"


def score_file(model: str, method: str, seed, benchmark: str) -> str:
    """A benchmark's score file (rule score_benchmark's output; score_model writes those of a summary's
    benchmarks beside its manifest, and score_benchmark then keeps them by their score key)."""
    return f"results/{model}/{method}/seed{seed}/scores/{benchmark}.parquet"


def scores_manifest(model: str, method: str, seed) -> str:
    """The score_model job's output: which score files it wrote or kept, with their score keys."""
    return f"results/{model}/{method}/seed{seed}/scores.json"


def scoring_libraries(config: dict, method: str, benchmark_entry: dict) -> list[str]:
    """The library fingerprint files one benchmark's scores depend on: its dataset's, and Self-Debias' for
    that method kind (lmbias.metrics.score_keys puts their contents in the score key)."""
    libraries = [library_fingerprint_file(catalog.measure_of(benchmark_entry))]
    if config["methods"][method]["kind"] == "self_debias":
        libraries.append(library_fingerprint_file("self_debias"))
    return libraries


def model_scoring_inputs(config: dict, selection: BenchmarkSelection, model: str, method: str, seed: str) -> dict:
    """Inputs of a score_model job: the items and library fingerprints of every benchmark the (model, method)
    summary holds (one input function: Snakemake's cost per call dominates a large DAG's build), the base
    weights and the method's model folder."""
    checked_seed(config, model, method, seed)
    benchmarks = selection.summary_benchmarks(model, method)
    libraries = sorted({lib for b in benchmarks for lib in scoring_libraries(config, method, config["benchmarks"][b])})
    return {
        "model_spec": model_spec_file(model),
        "spec": [method_spec_file(config, method, b) for b in benchmarks],
        "benchmark_items": [benchmark_items_file(b) for b in benchmarks],
        "library": libraries,
        "weights": model_weights_input(config, model),
        "method_model": method_model_dir(config, model, method, seed),
    }


def summary_scores(selection: BenchmarkSelection, model: str, method: str, seed, benchmark: str) -> str:
    """What a metric or comparison job reads one benchmark's scores through: the score_model manifest when the
    (model, method) summary holds the benchmark (its one scoring job per seed writes and keys the file),
    else the score file itself (rule score_benchmark)."""
    if benchmark in selection.summary_benchmarks(model, method):
        return scores_manifest(model, method, seed)
    return score_file(model, method, seed, benchmark)


def metric_inputs_of(config: dict, benchmark: str, model: str, method: str, seed: str) -> tuple[str, str, list]:
    """What one benchmark's metric rows are computed from: its scores, its library and any file the metric
    reads (a file's contents, not only its path, must trigger a rerun)."""
    bench = config["benchmarks"][benchmark]
    labels = (bench.get("metric") or {}).get("competency_labels")
    return (
        f"results/{model}/{method}/seed{seed}/scores/{benchmark}.parquet",
        library_fingerprint_file(catalog.measure_of(bench)),
        [labels] if labels else [],
    )


def metric_inputs(config: dict, model: str, method: str, seed: str, benchmark: str) -> dict:
    """Inputs of one benchmark's metrics/{benchmark}.parquet: its own score file (rule score_benchmark, so that
    such a target costs that benchmark's scoring alone, and a missing score file is scored again), its
    library and the files its metric reads."""
    checked_benchmark(config, model, method, seed, benchmark)
    scores, library, files = metric_inputs_of(config, benchmark, model, method, seed)
    inputs = {"scores": scores, "library": library}
    if files:
        inputs["labels"] = files
    classified = classified_files(config, model, method, seed, [benchmark])
    if classified:  # the scorers' classifications of its generations (lmbias.workflow.scorers), their metric's code
        inputs["classified"] = classified
        inputs["library"] = [library, library_fingerprint_file("classifiers")]
    return inputs


def seed_metric_inputs(config: dict, selection: BenchmarkSelection, model: str, method: str, seed: str) -> dict:
    """Inputs of a seed's metrics.parquet: the scores, libraries and files of every benchmark its summary
    holds (one input function: Snakemake's cost per call dominates a large DAG's build)."""
    checked_seed(config, model, method, seed)
    libraries, files = set(), set()
    for benchmark in selection.summary_benchmarks(model, method):
        _, library, extra = metric_inputs_of(config, benchmark, model, method, seed)
        libraries.add(library)
        files.update(extra)
    # the scores of all of them: the manifest of the seed's one scoring job (rule score_model)
    inputs = {"scores": [scores_manifest(model, method, seed)], "library": sorted(libraries)}
    missing = missing_score_files(selection, model, method, seed)
    if missing:
        inputs["rescored"] = missing
    if files:
        inputs["labels"] = sorted(files)
    classified = classified_files(config, model, method, seed, selection.summary_benchmarks(model, method))
    if classified:  # the scorers' classifications of the generating benchmarks (lmbias.workflow.scorers)
        inputs["classified"] = classified
        inputs["library"] = sorted(libraries | {library_fingerprint_file("classifiers")})
    return inputs


def classify_inputs(config: dict, model: str, method: str, seed: str, benchmark: str, scorer: str) -> dict:
    """Inputs of one scorer's classification of one benchmark's generations: the benchmark's score file (rule
    score_benchmark, which keeps a file the model's job wrote), the classifier's folder and the scorer's code."""
    checked_benchmark(config, model, method, seed, benchmark)
    if scorer not in (config.get("scorers") or {}) or not classified_files(config, model, method, seed, [benchmark]):
        raise ConfigError(
            f"results/{model}/{method}/seed{seed}/classified/{benchmark}/{scorer}.parquet: no configured scorer "
            f"{scorer!r} classifies {benchmark!r} for model {model!r} (scorers: "
            f"{', '.join(config.get('scorers') or {}) or 'none'})"
        )
    return {
        "scores": score_file(model, method, seed, benchmark),
        "classifier": scorer_weights_input(config, scorer),
        "library": library_fingerprint_file("classifiers"),
    }


def missing_score_files(selection: BenchmarkSelection, model: str, method: str, seed, only=None) -> list[str]:
    """The score files of the pair's summary that are gone although its scoring job's manifest exists (deleted
    since): inputs, so that rule score_benchmark scores each of them again alone before the metrics read it (the
    manifest is not rewritten: the new file holds the same score key). Snakemake cannot see a file the model's
    job wrote without declaring it, so this looks at the disk while the DAG is built; once the file is back,
    the job's input set is the usual one again, which Snakemake reports as a changed set of input files and
    answers with one more run of the cheap metric and summary jobs (docs/scoring-jobs.md). `only`: of these
    benchmarks alone (a comparison's)."""
    if not Path(scores_manifest(model, method, seed)).exists():
        return []  # the scoring job has not run: it writes them all
    benchmarks = selection.summary_benchmarks(model, method)
    files = [score_file(model, method, seed, b) for b in benchmarks if only is None or b in only]
    return [f for f in files if not Path(f).exists()]


def summary_metric_files(config: dict, selection: BenchmarkSelection, model: str, method: str) -> list[str]:
    """One metrics.parquet per seed (every benchmark of the summary; see seed_metric_inputs)."""
    selection.summary_benchmarks(model, method)  # fails early, naming the model, when no benchmark applies
    return [f"results/{model}/{method}/seed{seed}/metrics.parquet" for seed in seeds_for(config, method)]


def comparison_inputs(config: dict, selection: BenchmarkSelection, comparison: str, base: str | Path) -> dict:
    """The before and after sides' scores of the compared benchmark (every seed; through the score_model
    manifests where the side's summary holds it, summary_scores), its library fingerprint and the paired-test
    modules (absolute, under the checkout `base`)."""
    entry = config["comparisons"][comparison]
    bench = entry["benchmark"]
    inputs = {
        side: [
            summary_scores(selection, entry[side]["model"], entry[side]["method"], seed, bench)
            for seed in seeds_for(config, entry[side]["method"])
        ]
        for side in ("before", "after")
    }
    # a compared score file deleted since its scoring job: scored again alone first (missing_score_files)
    rescored = [
        path
        for side in ("before", "after")
        for seed in seeds_for(config, entry[side]["method"])
        for path in missing_score_files(selection, entry[side]["model"], entry[side]["method"], seed, only=[bench])
    ]
    if rescored:
        inputs["rescored"] = rescored
    inputs["library"] = [library_fingerprint_file(catalog.measure_of(config["benchmarks"][bench]))] + [
        str(Path(base) / f"src/lmbias/metrics/{m}.py") for m in ("comparison", "summary")
    ]
    return inputs


def method_job_inputs(config: dict, model: str, method: str) -> dict:
    """Inputs of a fine-tuning or fitting job: its corpus, the base weights, its library fingerprint and
    bias-bench's CDA word list where the method's settings name it."""
    resolved = resolved_method(config, model, method)
    inputs = {
        "corpus": resolved["corpus"],
        "weights": model_weights_input(config, model),
        # the trainer's modules for fine-tuning, SentenceDebias' for fitting: editing one reruns only its jobs
        "library": library_fingerprint_file(
            {"sd": "sentence_debias", "inlp": "inlp"}.get(resolved["kind"], "finetune")
        ),
    }
    words = (resolved.get("settings") or {}).get("block_augmentation_words")
    if words:  # bias-bench's CDA word list (data.bias_bench), fetched and checked by its data rule
        inputs["augmentation_words"] = words
    return inputs


def sd_pair_files(config: dict, model: str, method: str) -> dict:
    """The DA-Gender pair list's files when the method selects it, else nothing (the default list is in
    resources/wordlists/, read through the library)."""
    settings = resolved_method(config, model, method)["sd_settings"]
    return SD_DAGENDER_PAIR_FILES if settings.get("pair_list") == "dagender" else {}
