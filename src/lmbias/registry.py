"""What the workflow may run, checked when the DAG is built: which benchmarks can be scored and measured and
which model families each applies to, and how a configured method resolves for a model.

Each module in `lmbias.benchmarks` declares ``BENCHMARKS``: a list of `BenchmarkDef`, one per dataset,
holding its scorer (the expensive forward passes) and its metric function (cheap, from cached scores).
This module collects them. The workflow asks it at DAG-build time, so a benchmark asked of a family it
does not apply to fails before any job runs, with a message saying why. The same holds for methods: the
method kinds and their keys are lmbias.method_kinds, the sweeps that multiply a method lmbias.sweeps.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmbias.errors import ConfigError
from lmbias.method_kinds import (
    DETERMINISTIC_METHOD_KINDS,
    FAMILY_OBJECTIVE,
    FITTED_METHOD_KINDS,
    INLP_KEYS,
    METHOD_KEYS,
    MODEL_METHOD_DEFAULTS,
    SD_KEYS,
    TRAINED_METHOD_KINDS,
    check_training_block,
    method_kind,
    per_family_values,
)
from lmbias.sweeps import base_method


@dataclass(frozen=True)
class BenchmarkDef:
    """How one dataset's items become scores, and scores become metric rows.

    score(items, model, tokenizer, family, scoring_cfg, stats) -> pyarrow.Table      (per-item scores)
    parse_options(metric_cfg, key) -> options                                         (ConfigError naming key)
    rows(scores, options) -> list[dict]                                               (summary-schema rows)
    paired(before, after, test, options) -> list[dict]   (optional: pre/post test of two score tables,
                                                           item by item; see lmbias.metrics.comparison)
    prompted: the scorer asks the model a prompt (WinoGender's multiple choice, BOLD's generation), so an
              instruct model's chat template applies: score also takes model_entry= and model_name= (keywords,
              score_keywords) and reads its prompts through lmbias.engine.chat. Sentence-likelihood benchmarks
              read raw text and never see them.
    """

    dataset: str
    families: tuple[str, ...]
    score: Callable[..., Any]
    parse_options: Callable[[dict, str], Any]
    rows: Callable[[Any, Any], list[dict]]
    description: str = ""
    paired: Callable[[Any, Any, str, Any], list[dict]] | None = None
    prompted: bool = False


def score_keywords(d: BenchmarkDef, model_name: str, model_entry: dict) -> dict:
    """The keyword arguments a scoring job passes to `d.score` beyond the common ones."""
    return {"model_entry": model_entry, "model_name": model_name} if d.prompted else {}


def _lmbias_modules(module) -> set[str]:
    found = {inspect.getsourcefile(module)}
    for value in vars(module).values():
        home = value if inspect.ismodule(value) else inspect.getmodule(value)
        if home is not None and home.__name__.startswith("lmbias.") and inspect.getsourcefile(home):
            found.add(inspect.getsourcefile(home))
    return found


def _discover():
    from lmbias import benchmarks

    defs: dict[str, BenchmarkDef] = {}
    sources: dict[str, list[str]] = {}
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{benchmarks.__name__}.{info.name}")
        for d in getattr(module, "BENCHMARKS", []):
            if d.dataset in defs:
                raise RuntimeError(f"two benchmark definitions for dataset {d.dataset!r}")
            defs[d.dataset] = d
            repo = Path(__file__).resolve().parents[2]
            resources = {str(repo / r) for r in getattr(module, "RESOURCE_FILES", ())}
            sources[d.dataset] = sorted(_lmbias_modules(module) | resources)
    return defs, sources


_CACHE: list = []


def _loaded():
    """Discover lazily: a benchmark module imported first (it imports this module) must be complete
    before its BENCHMARKS list is read."""
    if not _CACHE:
        _CACHE.extend(_discover())
    return _CACHE[0], _CACHE[1]


def definitions() -> dict[str, BenchmarkDef]:
    return _loaded()[0]


def definition(dataset: str, benchmark: str = "?") -> BenchmarkDef:
    try:
        return definitions()[dataset]
    except KeyError:
        raise ConfigError(
            f"benchmarks.{benchmark}.dataset: {dataset!r} has no scorer/metric; "
            f"measurable datasets: {', '.join(sorted(definitions()))}"
        ) from None


def measure_of(benchmark_cfg: dict, benchmark: str = "?") -> str:
    """The definition that scores a benchmark entry: its `measure` key when set (a measure that applies to
    any text, e.g. `perplexity` over GAP's texts), else its dataset's own (e.g. `crows_pairs`)."""
    measure = benchmark_cfg.get("measure")
    if measure is None:
        return benchmark_cfg["dataset"]
    if measure not in definitions():
        raise ConfigError(
            f"benchmarks.{benchmark}.measure: {measure!r} is not a measure; known: {', '.join(sorted(definitions()))}"
        )
    return measure


def is_measurable(benchmark_cfg: dict) -> bool:
    return measure_of(benchmark_cfg) in definitions()


def source_files(dataset: str) -> list[str]:
    """Library source files (and the module's RESOURCE_FILES) a benchmark's jobs read (Snakemake inputs:
    editing them reruns the jobs)."""
    return list(_loaded()[1].get(dataset, []))


def check_family(benchmark: str, benchmark_cfg: dict, family: str, model: str) -> None:
    d = definition(measure_of(benchmark_cfg), benchmark)
    if family not in d.families:
        raise ConfigError(
            f"benchmark {benchmark!r} does not apply to model {model!r} of family {family!r} "
            f"(it applies to: {', '.join(d.families)})"
        )


def benchmarks_for(family: str, benchmarks: dict) -> list[str]:
    """Configured, measurable benchmarks that apply to `family`."""
    return sorted(
        b for b, cfg in benchmarks.items() if is_measurable(cfg) and family in definitions()[measure_of(cfg)].families
    )


# ------------------------------------------------------------------------------------------- methods
# config.yaml `methods.<name>: {kind: ...}`. The workflow resolves a (model, method) pair at DAG-build
# time, so a method a model's family cannot run, an unknown kind or a misspelt key fails before any job.
# The kinds and the keys each takes are lmbias.method_kinds.


def check_method_entry(name: str, entry: dict) -> None:
    """Unknown kind, a key the kind does not take (misspelt), or an unknown training key: ConfigError naming it."""
    kind = method_kind(name, entry)
    for key in entry:
        if key == "sweep":  # the grid of instances (expand_sweeps checks it); the entry itself is the base
            continue
        if key == "recipe":  # whose code the entry reproduces (docs/methods/recipes.md)
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ConfigError(
                    f"methods.{name}.recipe: expected a short text naming the code the entry "
                    f"reproduces, got {entry[key]!r}"
                )
            continue
        if key == "benchmarks":  # the benchmarks its summaries hold (names checked against config.yaml's)
            value = entry[key]
            if value is not None and (
                not isinstance(value, list) or not value or not all(isinstance(b, str) and b for b in value)
            ):
                raise ConfigError(
                    f"methods.{name}.benchmarks: expected a non-empty list of benchmark names (or null "
                    f"for all of them), got {value!r}"
                )
            continue
        if key not in METHOD_KEYS[kind]:
            raise ConfigError(
                f"methods.{name}.{key}: unknown key for kind {kind!r} (allowed: {', '.join(METHOD_KEYS[kind])})"
            )
    if kind in TRAINED_METHOD_KINDS | FITTED_METHOD_KINDS and not entry.get("corpus"):
        raise ConfigError(f"methods.{name}.corpus: kind {kind!r} needs a corpus file (results/corpora/...)")
    check_training_block(entry.get("training") or {}, f"methods.{name}.training", MODEL_METHOD_DEFAULTS)
    if kind == "self_debias":
        from lmbias.engine.self_debias import SelfDebiasSettings

        SelfDebiasSettings.from_entry(entry, f"methods.{name}")


#: Datasets whose scores are embeddings (hidden states), not output probabilities: a method that only
#: rescales the output distribution (Self-Debias) does not change them.
EMBEDDING_DATASETS = frozenset({"seat", "seat_templates"})
#: Datasets whose scores are generated texts: Self-Debias rescales the distributions the engine reads, and
#: self-debiased decoding (its logits processor inside `generate`) is not implemented here.
GENERATION_DATASETS = frozenset({"bold"})
SELF_DEBIAS_GENERATION_REASON = (
    "Self-Debias rescales the distributions a benchmark scores; self-debiased generation (its logits "
    "processor inside generate) is not implemented here"
)


def method_benchmark_choice(method: str, entry: dict, benchmark: str) -> str | None:
    """Why a method's summaries leave out a benchmark its `benchmarks:` list does not name, or None (no list,
    or listed). A list keeps a sweep's many instances, or a grid's extra methods, to what their tables read."""
    chosen = entry.get("benchmarks")
    if chosen is None or benchmark in chosen:
        return None
    return f"not in methods.{base_method(method)}.benchmarks"


def method_benchmark_exclusion(method: str, entry: dict, benchmark_cfg: dict) -> str | None:
    """Why `method` does not apply to a benchmark (recorded in the summary's left_out), or None."""
    if method_kind(method, entry) == "self_debias" and benchmark_cfg.get("dataset") in EMBEDDING_DATASETS:
        from lmbias.engine.self_debias import NOT_APPLICABLE_REASON

        return NOT_APPLICABLE_REASON
    if method_kind(method, entry) == "self_debias" and benchmark_cfg.get("dataset") in GENERATION_DATASETS:
        return SELF_DEBIAS_GENERATION_REASON
    return None


def check_method_benchmark(method: str, entry: dict, benchmark: str, benchmark_cfg: dict) -> None:
    """ConfigError naming both when `method` does not apply to the benchmark (asked for by path)."""
    reason = method_benchmark_exclusion(method, entry, benchmark_cfg)
    if reason:
        raise ConfigError(f"benchmark {benchmark!r} does not apply to method {method!r}: {reason}")


def check_method_family(model: str, family: str, method: str, entry: dict) -> None:
    kind = method_kind(method, entry)
    if family == "encoder" and kind != "pretrained":
        raise ConfigError(
            f"method {method!r} (kind {kind}) cannot run on model {model!r}: a headless encoder "
            "(family encoder) has no LM head to fine-tune or debias; only `pretrained` applies"
        )
    if kind == "gpr" and family != "mlm":
        raise ConfigError(
            f"method {method!r} (kind gpr) cannot run on model {model!r} of family {family!r}: "
            "GPR fine-tunes pronoun prediction at a [MASK] position (family mlm only)"
        )
    if kind == "self_debias" and family not in ("mlm", "clm"):
        raise ConfigError(
            f"method {method!r} (kind self_debias) cannot run on model {model!r} of family {family!r}: "
            "Self-Debias is defined for masked (mlm) and causal (clm) LMs, as in bias-bench; for an "
            "encoder-decoder (BART) it is not defined here (the prefix would have to enter both the "
            "encoder and the decoder input)"
        )
    if family not in FAMILY_OBJECTIVE and kind in TRAINED_METHOD_KINDS | FITTED_METHOD_KINDS:
        raise ConfigError(f"method {method!r} (kind {kind}) cannot run on model {model!r} of family {family!r}")


def _format_swap_rate(value) -> str:
    return repr(float(value))


def resolve_method(model: str, model_entry: dict, method: str, entry: dict, model_names=()) -> dict:
    """What the method's job needs for this model: kind, corpus path, trainer settings or SD options.

    The method's `training` block is merged over `models.<model>.training` (Table 12 defaults);
    `er_lambda` applies to kind er only, `swap_rate` fills `{swap_rate}` in the corpus path, and the
    objective follows from family and kind. `model_names` (the configured models) may key a per-family
    value (`per_family_values`).
    """
    check_method_entry(method, entry)
    check_method_family(model, model_entry["family"], method, entry)
    kind = entry["kind"]
    defaults = model_entry.get("training") or {}
    check_training_block(defaults, f"models.{model}.training", MODEL_METHOD_DEFAULTS)
    own = per_family_values(
        entry.get("training") or {}, model_entry["family"], f"methods.{method}.training", model, model_names
    )
    merged = {**defaults, **own}
    resolved = {"kind": kind}
    if kind in TRAINED_METHOD_KINDS | FITTED_METHOD_KINDS:
        corpus = entry["corpus"]
        if "{swap_rate}" in corpus:
            if merged.get("swap_rate") is None:
                raise ConfigError(
                    f"methods.{method}.corpus: {corpus!r} needs a swap rate; set "
                    f"models.{model}.training.swap_rate or methods.{method}.training.swap_rate"
                )
            corpus = corpus.replace("{swap_rate}", _format_swap_rate(merged["swap_rate"]))
        resolved["corpus"] = corpus
    if kind in TRAINED_METHOD_KINDS:
        from lmbias.engine.model_spec import check_trainable  # lazily, as below

        check_trainable(model, model_entry, method)  # a dispatched model (device_map) is for scoring only
        settings = {k: v for k, v in merged.items() if k not in MODEL_METHOD_DEFAULTS}
        if kind == "er":
            if settings.get("er_lambda") is None:
                raise ConfigError(
                    f"methods.{method}: kind er needs a lambda; set models.{model}.training.er_lambda "
                    f"or methods.{method}.training.er_lambda"
                )
        else:
            settings.pop("er_lambda", None)  # the model's ER default must not turn CDS/CDA into ER
        settings["objective"] = "gpr" if kind == "gpr" else FAMILY_OBJECTIVE[model_entry["family"]]
        # values checked when the DAG is built (not first inside the job), each error naming its block
        origins = {k: f"methods.{method}.training" if k in own else f"models.{model}.training" for k in settings}
        from lmbias.training.settings import TrainingSettings  # lazily: the engine imports this module

        TrainingSettings.from_dict(settings, f"methods.{method}.training", origins)
        resolved["settings"] = dict(sorted(settings.items()))
    if kind == "self_debias":
        from lmbias.engine.self_debias import SelfDebiasSettings

        resolved["self_debias"] = SelfDebiasSettings.from_entry(entry, f"methods.{method}").to_dict()
    if kind == "sd":
        ratio = entry.get("ratio_of_pairs", merged.get("ratio_of_pairs"))
        if ratio is None or not (0 < float(ratio) <= 1):
            raise ConfigError(
                f"methods.{method}.ratio_of_pairs: {ratio!r}; need a fraction in (0, 1] "
                f"(or models.{model}.training.ratio_of_pairs)"
            )
        sd = {k: entry[k] for k in SD_KEYS if k in entry}
        if isinstance(sd.get("fit_pooling"), dict):  # {family: pooling}: this model's, or the family default
            from lmbias.engine.model_spec import FAMILIES

            per_family = sd.pop("fit_pooling")
            unknown = sorted(set(per_family) - set(FAMILIES))
            if unknown:
                raise ConfigError(
                    f"methods.{method}.fit_pooling.{unknown[0]}: not a model family ({', '.join(FAMILIES)})"
                )
            if per_family.get(model_entry["family"]) is not None:
                sd["fit_pooling"] = per_family[model_entry["family"]]
        if sd.get("fit_pooling") is not None:
            from lmbias.engine.embeddings import check_poolings  # only for entries that set it

            check_poolings(model_entry["family"], [sd["fit_pooling"]], key=f"methods.{method}.fit_pooling")
        resolved["sd_settings"] = dict(sorted({**sd, "ratio_of_pairs": float(ratio)}.items()))
    if kind == "inlp":
        from lmbias.training.inlp import INLPSettings  # checked when the DAG is built

        inlp = {k: entry[k] for k in INLP_KEYS if k in entry}
        # a per-family (or per-model) value, e.g. bias-bench's n_iterations: {mlm: 80, clm: 10}
        inlp = per_family_values(inlp, model_entry["family"], f"methods.{method}", model, model_names)
        INLPSettings.from_dict(inlp, f"methods.{method}")
        resolved["inlp_settings"] = dict(sorted(inlp.items()))
    return resolved


def seeds_for(method_entry: dict, seeds: list[int]) -> list[int]:
    return [0] if method_entry["kind"] in DETERMINISTIC_METHOD_KINDS else list(seeds)
