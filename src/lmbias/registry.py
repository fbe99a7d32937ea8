"""Which benchmarks can be scored and measured, and which model families each applies to.

Each module in `lmbias.benchmarks` declares ``BENCHMARKS``: a list of `BenchmarkDef`, one per dataset,
holding its scorer (the expensive forward passes) and its metric function (cheap, from cached scores).
This module collects them. The workflow asks it at DAG-build time, so a benchmark asked of a family it
does not apply to fails before any job runs, with a message saying why.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import math
import numbers
import pkgutil
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from lmbias.er_lambda import ER_LAMBDA_RANGE, er_lambda_ok  # noqa: F401  (re-exported for the sweeps)
from lmbias.errors import ConfigError




@dataclass(frozen=True)
class BenchmarkDef:
    """How one dataset's items become scores, and scores become metric rows.

    score(items, model, tokenizer, family, scoring_cfg, stats) -> pyarrow.Table      (per-item scores)
    parse_options(metric_cfg, key) -> options                                         (ConfigError naming key)
    rows(scores, options) -> list[dict]                                               (summary-schema rows)
    paired(before, after, test, options) -> list[dict]   (optional: pre/post test of two score tables,
                                                           item by item; see lmbias.metrics.comparison)
    """

    dataset: str
    families: tuple[str, ...]
    score: Callable[..., Any]
    parse_options: Callable[[dict, str], Any]
    rows: Callable[[Any, Any], list[dict]]
    description: str = ""
    paired: Callable[[Any, Any, str, Any], list[dict]] | None = None


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
        raise ConfigError(f"benchmarks.{benchmark}.measure: {measure!r} is not a measure; known: {', '.join(sorted(definitions()))}")
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
    return sorted(b for b, cfg in benchmarks.items() if is_measurable(cfg) and family in definitions()[measure_of(cfg)].families)


# ------------------------------------------------------------------------------------------- methods
# config.yaml `methods.<name>: {kind: ...}`. The workflow resolves a (model, method) pair at DAG-build
# time, so a method a model's family cannot run, an unknown kind or a misspelt key fails before any job.

#: Methods whose result does not depend on a random seed: they run once, in seed0/.
DETERMINISTIC_METHOD_KINDS = frozenset({"pretrained", "online", "sd", "inlp", "self_debias"})
#: Kinds that fine-tune the model (rule finetune), and the kinds that fit a projection of the final hidden
#: states (rules fit_sentence_debias and fit_inlp).
TRAINED_METHOD_KINDS = frozenset({"cds", "cda", "er", "gpr", "dropout"})
FITTED_METHOD_KINDS = frozenset({"sd", "inlp"})

#: Keys each kind accepts (the schema's enum of kinds is closed; this closes each kind's keys).
METHOD_KEYS = {
    "pretrained": ("kind",),
    "online": ("kind",),
    # Self-Debias (lmbias.engine.self_debias): decoding-time, nothing trained; options with bias-bench's defaults
    "self_debias": ("kind", "prefix", "decay_constant", "epsilon"),
    "cds": ("kind", "corpus", "training"),
    "cda": ("kind", "corpus", "training"),
    "er": ("kind", "corpus", "training"),
    "gpr": ("kind", "corpus", "training"),
    # Webster et al.'s Dropout: continued pre-training with raised dropout (training.hidden_dropout/attention_dropout)
    "dropout": ("kind", "corpus", "training"),
    # INLP (Ravfogel et al. 2020, as bias-bench): lmbias.training.inlp.INLPSettings
    "inlp": ("kind", "corpus") + ("n_iterations", "classifier", "sentences_per_class", "dev_fraction", "seed",
                                  "batch_size", "max_length", "limit_sentences", "text_column", "precision",
                                  "test_fraction", "dropout_rate"),
    "sd": ("kind", "corpus") + ("ratio_of_pairs", "k", "batch_size", "max_length", "limit_sentences", "text_column",
                                "application", "pair_list", "pair_selection", "pair_matching", "fit_pooling", "pad_to",
                                "precision"),
}
#: SentenceDebias settings (lmbias.training.sentence_debias.SDSettings) a method entry of kind sd may set.
SD_KEYS = METHOD_KEYS["sd"][2:]
#: INLP settings (lmbias.training.inlp.INLPSettings) a method entry of kind inlp may set.
INLP_KEYS = METHOD_KEYS["inlp"][2:]

#: The pre-training objective each family fine-tunes with (cds, cda, er).
FAMILY_OBJECTIVE = {"mlm": "mlm", "clm": "clm", "seq2seq": "infilling"}

#: lmbias.training.settings.TrainingSettings fields a config may set (`objective` is implied by family and kind).
TRAINING_KEYS = frozenset({
    "learning_rate", "batch_size", "gradient_accumulation_steps", "epochs", "max_steps", "warmup_ratio",
    "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "max_length",
    "mlm_probability", "whole_word_masking", "infilling_mask_ratio", "infilling_poisson_lambda", "er_lambda",
    "dropout", "hidden_dropout", "attention_dropout", "select_epoch", "group_by_length", "checkpoint_every_steps", "precision",
    "eval_bias_every_steps", "eval_bias_metric", "limit_examples", "text_column",
    # the DA-Gender authors' recipes (settings.TrainingSettings documents each; null/default = the paper's)
    "warmup_steps", "text_template", "pad_to_length", "padding_in_loss", "infilling_mode", "infilling_layout",
    "er_lm_side", "er_pooling",
    # bias-bench's run_mlm/run_clm data (lmbias.training.packing): packed blocks, CDA on the blocks
    "pack_texts", "block_augmentation", "block_augmentation_words",
    # a LoRA adapter over the frozen base instead of full fine-tuning (lmbias.training.adapters)
    "adapter",
    # activations recomputed in the backward pass (any training method; trainer.enable_gradient_checkpointing)
    "gradient_checkpointing",
    # FSDP2: weights, gradients and optimizer state sharded over the job's processes (lmbias.training.fsdp)
    "distributed",
})
#: Training settings whose value is itself a mapping: its own values may be per-family (per_family_values).
MAPPING_TRAINING_KEYS = frozenset({"adapter"})
#: Per-model defaults (over-debiasing paper, Table 12) that are not trainer settings: the CDS swap rate
#: (fills `{swap_rate}` in a method's corpus path) and SentenceDebias' ratio of word pairs.
MODEL_METHOD_DEFAULTS = frozenset({"swap_rate", "ratio_of_pairs"})


def method_kind(name: str, entry: dict) -> str:
    kind = entry.get("kind") if isinstance(entry, dict) else None
    if kind not in METHOD_KEYS:
        raise ConfigError(f"methods.{name}.kind: {kind!r} is not a method kind; known kinds: {', '.join(sorted(METHOD_KEYS))}")
    return kind


def check_method_entry(name: str, entry: dict) -> None:
    """Unknown kind, a key the kind does not take (misspelt), or an unknown training key: ConfigError naming it."""
    kind = method_kind(name, entry)
    for key in entry:
        if key == "sweep":  # the grid of instances (expand_sweeps checks it); the entry itself is the base
            continue
        if key == "recipe":  # whose code the entry reproduces (README, "Reproducing the authors' mitigation")
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ConfigError(f"methods.{name}.recipe: expected a short text naming the code the entry "
                                  f"reproduces, got {entry[key]!r}")
            continue
        if key == "benchmarks":  # the benchmarks its summaries hold (names checked against config.yaml's)
            value = entry[key]
            if value is not None and (not isinstance(value, list) or not value
                                      or not all(isinstance(b, str) and b for b in value)):
                raise ConfigError(f"methods.{name}.benchmarks: expected a non-empty list of benchmark names (or null "
                                  f"for all of them), got {value!r}")
            continue
        if key not in METHOD_KEYS[kind]:
            raise ConfigError(f"methods.{name}.{key}: unknown key for kind {kind!r} (allowed: {', '.join(METHOD_KEYS[kind])})")
    if kind in TRAINED_METHOD_KINDS | FITTED_METHOD_KINDS and not entry.get("corpus"):
        raise ConfigError(f"methods.{name}.corpus: kind {kind!r} needs a corpus file (results/corpora/...)")
    check_training_block(entry.get("training") or {}, f"methods.{name}.training", MODEL_METHOD_DEFAULTS)
    if kind == "self_debias":
        from lmbias.engine.self_debias import SelfDebiasSettings

        SelfDebiasSettings.from_entry(entry, f"methods.{name}")


#: Datasets whose scores are embeddings (hidden states), not output probabilities: a method that only
#: rescales the output distribution (Self-Debias) does not change them.
EMBEDDING_DATASETS = frozenset({"seat", "seat_templates"})


def base_method(method: str) -> str:
    """The config entry a method name comes from: `cds` for the sweep instance `cds@swap_rate=0.7`."""
    return method.split("@")[0]


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
    return None


def check_method_benchmark(method: str, entry: dict, benchmark: str, benchmark_cfg: dict) -> None:
    """ConfigError naming both when `method` does not apply to the benchmark (asked for by path)."""
    reason = method_benchmark_exclusion(method, entry, benchmark_cfg)
    if reason:
        raise ConfigError(f"benchmark {benchmark!r} does not apply to method {method!r}: {reason}")


def check_training_block(block: dict, key: str, extra=frozenset()) -> None:
    if not isinstance(block, dict):
        raise ConfigError(f"{key}: expected a mapping of training settings, got {block!r}")
    for name in block:
        if name == "objective":
            raise ConfigError(f"{key}.objective: not settable; it follows from the model's family and the method's kind")
        if name not in TRAINING_KEYS and name not in extra:
            raise ConfigError(f"{key}.{name}: unknown training setting (allowed: {', '.join(sorted(TRAINING_KEYS | set(extra)))})")


def check_method_family(model: str, family: str, method: str, entry: dict) -> None:
    kind = method_kind(method, entry)
    if family == "encoder" and kind != "pretrained":
        raise ConfigError(f"method {method!r} (kind {kind}) cannot run on model {model!r}: a headless encoder "
                          "(family encoder) has no LM head to fine-tune or debias; only `pretrained` applies")
    if kind == "gpr" and family != "mlm":
        raise ConfigError(f"method {method!r} (kind gpr) cannot run on model {model!r} of family {family!r}: "
                          "GPR fine-tunes pronoun prediction at a [MASK] position (family mlm only)")
    if kind == "self_debias" and family not in ("mlm", "clm"):
        raise ConfigError(f"method {method!r} (kind self_debias) cannot run on model {model!r} of family {family!r}: "
                          "Self-Debias is defined for masked (mlm) and causal (clm) LMs, as in bias-bench; for an "
                          "encoder-decoder (BART) it is not defined here (the prefix would have to enter both the "
                          "encoder and the decoder input)")
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
    own = per_family_values(entry.get("training") or {}, model_entry["family"], f"methods.{method}.training",
                            model, model_names)
    merged = {**defaults, **own}
    resolved = {"kind": kind}
    if kind in TRAINED_METHOD_KINDS | FITTED_METHOD_KINDS:
        corpus = entry["corpus"]
        if "{swap_rate}" in corpus:
            if merged.get("swap_rate") is None:
                raise ConfigError(f"methods.{method}.corpus: {corpus!r} needs a swap rate; set "
                                  f"models.{model}.training.swap_rate or methods.{method}.training.swap_rate")
            corpus = corpus.replace("{swap_rate}", _format_swap_rate(merged["swap_rate"]))
        resolved["corpus"] = corpus
    if kind in TRAINED_METHOD_KINDS:
        from lmbias.engine.model_spec import check_trainable  # lazily, as below

        check_trainable(model, model_entry, method)  # a dispatched model (device_map) is for scoring only
        settings = {k: v for k, v in merged.items() if k not in MODEL_METHOD_DEFAULTS}
        if kind == "er":
            if settings.get("er_lambda") is None:
                raise ConfigError(f"methods.{method}: kind er needs a lambda; set models.{model}.training.er_lambda "
                                  f"or methods.{method}.training.er_lambda")
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
            raise ConfigError(f"methods.{method}.ratio_of_pairs: {ratio!r}; need a fraction in (0, 1] "
                              f"(or models.{model}.training.ratio_of_pairs)")
        sd = {k: entry[k] for k in SD_KEYS if k in entry}
        if isinstance(sd.get("fit_pooling"), dict):  # {family: pooling}: this model's, or the family default
            from lmbias.engine.model_spec import FAMILIES

            per_family = sd.pop("fit_pooling")
            unknown = sorted(set(per_family) - set(FAMILIES))
            if unknown:
                raise ConfigError(f"methods.{method}.fit_pooling.{unknown[0]}: not a model family ({', '.join(FAMILIES)})")
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


#: The model families a per-family training value may name (lmbias.engine.model_spec.FAMILIES).
PER_FAMILY_KEYS = ("mlm", "clm", "seq2seq", "encoder")


def per_family_values(block: dict, family: str, key: str, model: str | None = None, model_names=()) -> dict:
    """A method's `training` block with each per-family value resolved for `family` (and `model`).

    A value written as a mapping of family -> value (`warmup_steps: {mlm: 0, clm: 100, seq2seq: 100}`) is the
    value of this model's family; a family it does not name leaves the setting at the model's default (the
    key is dropped). One recipe entry can so carry what an authors' code does differently per model family.
    A key may also be a configured model's name (one of `model_names`), whose value wins over its family's:
    bias-bench raises ALBERT's dropout less than BERT's, both masked LMs (`{mlm: 0.2, albert-base: 0.05}`).
    A mapping with a key that is neither is a ConfigError naming it."""
    out = {}
    for name, value in block.items():
        if name in MAPPING_TRAINING_KEYS and isinstance(value, dict):  # {kind: lora, r: {clm: 16, mlm: 8}, ...}
            out[name] = per_family_values(value, family, f"{key}.{name}", model, model_names)
            continue
        if isinstance(value, dict):
            if name in MODEL_METHOD_DEFAULTS:
                raise ConfigError(f"{key}.{name}: one value for every family (a per-family mapping is for trainer "
                                  "settings; the corpus a swap rate names is shared by all models)")
            unknown = sorted(set(value) - set(PER_FAMILY_KEYS) - set(model_names))
            if unknown:
                raise ConfigError(f"{key}.{name}.{unknown[0]}: not a model family or a configured model; a per-family "
                                  f"value maps families ({', '.join(PER_FAMILY_KEYS)}) or model names to values")
            if model is not None and model in value:
                out[name] = value[model]
            elif family in value:
                out[name] = value[family]
            continue
        out[name] = value
    return out


def seeds_for(method_entry: dict, seeds: list[int]) -> list[int]:
    return [0] if method_entry["kind"] in DETERMINISTIC_METHOD_KINDS else list(seeds)


# -------------------------------------------------------------------------------------------- sweeps
# `methods.<name>.sweep: {setting: [values]}` (the over-debiasing paper's Table 11) becomes one method per
# value (one per combination when several settings are swept), named `<name>@<setting>=<value>`, e.g.
# cds@swap_rate=0.7. expand_sweeps runs once when the Snakefile loads the config, so every rule, wildcard
# constraint and error message sees plain method names; each instance's entry holds only its own value,
# so editing one value adds or removes that instance's jobs only.


@dataclass(frozen=True)
class SweepSetting:
    """A setting a sweep may vary: the kinds that take it, where the value goes in the method entry
    (`training` block, or the entry itself for SentenceDebias options), its type and range."""

    kinds: frozenset
    where: str  # "training" | "entry"
    integer: bool
    check: Callable[[float], bool]
    range_text: str


_TRAINED_OR_TUNED = frozenset({"cds", "cda", "er", "gpr", "dropout"})
#: Settings a sweep may vary. swap_rate fills "{swap_rate}" in a cds corpus path (the corpus is rebuilt per
#: rate); er_lambda (alias `lambda`, the paper's name) weighs ER's regulariser; ratio_of_pairs and k are
#: SentenceDebias options; learning_rate and epochs are trainer settings of every fine-tuning kind.
SWEEP_SETTINGS = {
    "swap_rate": SweepSetting(frozenset({"cds"}), "training", False, lambda v: 0 < v <= 1, "in (0, 1]"),
    "er_lambda": SweepSetting(frozenset({"er"}), "training", False, er_lambda_ok, ER_LAMBDA_RANGE),
    "ratio_of_pairs": SweepSetting(frozenset({"sd"}), "entry", False, lambda v: 0 < v <= 1, "in (0, 1]"),
    "k": SweepSetting(frozenset({"sd"}), "entry", True, lambda v: v >= 1, ">= 1"),
    "learning_rate": SweepSetting(_TRAINED_OR_TUNED, "training", False, lambda v: v > 0, "> 0"),
    "epochs": SweepSetting(_TRAINED_OR_TUNED, "training", True, lambda v: v >= 1, ">= 1"),
}
SWEEP_ALIASES = {"lambda": "er_lambda"}
#: Separates a sweep instance's base name from its settings; the schema keeps it out of configured names.
SWEEP_MARK = "@"
#: targets.methods entry `<name>@*`: every instance of methods.<name>'s sweep (the plain name is the base only).
SWEEP_WILDCARD = "@*"


def format_sweep_value(value) -> str:
    """How a value appears in an instance name (and in a `{swap_rate}` corpus path): integers as
    written (epochs=3), floats in Python's shortest round-trip form (0.7, 1.0, 2e-05)."""
    return str(value) if isinstance(value, int) else repr(float(value))


def sweep_instance_name(base: str, values: dict) -> str:
    """`cds@swap_rate=0.7`; several settings in alphabetical order, comma-separated."""
    return base + SWEEP_MARK + ",".join(f"{k}={format_sweep_value(values[k])}" for k in sorted(values))


def _sweep_values(base: str, key: str, setting: str, values) -> list:
    where = f"methods.{base}.sweep.{key}"
    spec = SWEEP_SETTINGS[setting]
    if not isinstance(values, (list, tuple)):
        raise ConfigError(f"{where}: expected a list of values, got {values!r}")
    if not values:
        raise ConfigError(f"{where}: empty list; give at least one value (or drop the key)")
    out, seen = [], {}
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{where}[{i}]: {value!r} is not a number")
        if spec.integer:
            if not isinstance(value, numbers.Integral):
                raise ConfigError(f"{where}[{i}]: {value!r} is not an integer ({setting} takes whole numbers)")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"{where}[{i}]: {value!r} is not a finite number")
        if not spec.check(value):
            raise ConfigError(f"{where}[{i}]: {value!r} is out of range; {setting} must be {spec.range_text}")
        if value in seen:
            raise ConfigError(f"{where}[{i}]: {value!r} repeats {where}[{seen[value]}]")
        seen[value] = i
        out.append(value)
    return out


def sweep_grid(base: str, entry: dict) -> list[dict]:
    """The {setting: value} of each instance of methods.<base>'s sweep, in the order written; ConfigError
    naming the key for an unknown or misplaced setting, an empty list, a non-number, a value out of range
    or a repeated value."""
    sweep = entry.get("sweep")
    kind = method_kind(base, entry)
    if not isinstance(sweep, dict):
        raise ConfigError(f"methods.{base}.sweep: expected a mapping of setting -> list of values, got {sweep!r}")
    if not sweep:
        raise ConfigError(f"methods.{base}.sweep: empty; name at least one setting and its values")
    sweepable = sorted(s for s, spec in SWEEP_SETTINGS.items() if kind in spec.kinds)
    if not sweepable:
        raise ConfigError(f"methods.{base}.sweep: kind {kind!r} has no settings to sweep (it trains nothing); "
                          f"sweeps apply to kinds {', '.join(sorted(set().union(*(s.kinds for s in SWEEP_SETTINGS.values()))))}")
    axes, named = {}, {}
    for key, values in sweep.items():
        setting = SWEEP_ALIASES.get(key, key)
        if setting not in SWEEP_SETTINGS or kind not in SWEEP_SETTINGS[setting].kinds:
            aliases = [a for a, s in SWEEP_ALIASES.items() if s in sweepable]
            raise ConfigError(f"methods.{base}.sweep.{key}: not a sweepable setting of kind {kind!r} "
                              f"(sweepable: {', '.join(sweepable + aliases)})")
        if setting in named:
            raise ConfigError(f"methods.{base}.sweep.{key}: names the same setting as sweep.{named[setting]} ({setting}); keep one")
        named[setting] = key
        axes[setting] = _sweep_values(base, key, setting, values)
    if "swap_rate" in axes and "{swap_rate}" not in str(entry.get("corpus", "")):
        raise ConfigError(f"methods.{base}.sweep.{named['swap_rate']}: the corpus {entry.get('corpus')!r} has no "
                          "\"{swap_rate}\" placeholder, so the swap rate would not reach the job "
                          "(e.g. corpus: results/corpora/gap/cds-{swap_rate}.parquet)")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def sweep_instance_entry(entry: dict, values: dict) -> dict:
    """The base entry without its sweep, with each swept value where that setting lives."""
    out = {k: v for k, v in entry.items() if k != "sweep"}
    training = dict(out.get("training") or {})
    for setting, value in values.items():
        if SWEEP_SETTINGS[setting].where == "training":
            training[setting] = value
        else:
            out[setting] = value
    if training:
        out["training"] = training
    return out


def expand_sweeps(methods: dict) -> dict:
    """config `methods` with every sweep expanded: the base entry (without `sweep`) under its own name, then
    one entry per sweep value (or combination) under `<name>@<setting>=<value>`. ConfigError naming the
    key for a bad sweep, a sweep on a kind with nothing to sweep, or an instance name already taken."""
    out: dict = {}
    for name, entry in methods.items():
        if not isinstance(entry, dict) or "sweep" not in entry:
            out[name] = entry
            continue
        out[name] = {k: v for k, v in entry.items() if k != "sweep"}
    for name, entry in methods.items():
        if not isinstance(entry, dict) or "sweep" not in entry:
            continue
        for values in sweep_grid(name, entry):
            instance = sweep_instance_name(name, values)
            if instance in out:
                raise ConfigError(f"methods.{name}.sweep: its instance {instance!r} collides with an existing "
                                  f"method of that name (methods.{instance}); rename one")
            out[instance] = sweep_instance_entry(entry, values)
    return out


def sweep_instances(base: str, methods: dict) -> list[str]:
    """Names of methods.<base>'s sweep instances in an expanded `methods` mapping."""
    prefix = base + SWEEP_MARK
    return [name for name in methods if name.startswith(prefix)]


def expand_method_targets(names: list, methods: dict, key: str = "targets.methods") -> list[str]:
    """targets.methods with each `<name>@*` replaced by the instances of methods.<name>'s sweep (`methods`
    not yet expanded). A plain name is that method only: `cds` is the Table 12 default, not its sweep.
    ConfigError naming the entry for an unknown method or `@*` on a method without a sweep."""
    expanded = expand_sweeps(methods)
    out: list[str] = []
    for i, name in enumerate(names):
        if isinstance(name, str) and name.endswith(SWEEP_WILDCARD):
            base = name[: -len(SWEEP_WILDCARD)]
            if base not in methods:
                raise ConfigError(f"{key}[{i}]: {name!r} names unknown method {base!r}; configured: {', '.join(sorted(methods))}")
            if not isinstance(methods[base], dict) or "sweep" not in methods[base]:
                raise ConfigError(f"{key}[{i}]: {name!r}: methods.{base} declares no sweep (add `sweep:` to it, or target {base!r})")
            new = sweep_instances(base, expanded)
        elif name not in expanded:
            swept = sorted(n for n, e in methods.items() if isinstance(e, dict) and "sweep" in e)
            hint = f" (sweep instances: {', '.join(n + SWEEP_WILDCARD for n in swept)} or one instance by name)" if swept else ""
            raise ConfigError(f"{key}[{i}]: unknown method {name!r}; configured: {', '.join(sorted(methods))}{hint}")
        else:
            new = [name]
        out += [n for n in new if n not in out]
    return out
