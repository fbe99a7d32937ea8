"""How a configured method resolves for a model, checked when the DAG is built: a method a model's family
cannot run, an unknown kind or a misspelt key fails before any job, with a ConfigError naming the key. The kinds
and the keys each takes are lmbias.methods.kinds; the sweeps that multiply a method lmbias.methods.sweeps.
"""

from __future__ import annotations

from lmbias.benchmarks import catalog
from lmbias.engine.embeddings import check_poolings
from lmbias.engine.model_spec import FAMILIES, check_trainable
from lmbias.engine.self_debias import NOT_APPLICABLE_REASON, SelfDebiasSettings
from lmbias.errors import ConfigError
from lmbias.methods.kinds import (
    DETERMINISTIC_METHOD_KINDS,
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
from lmbias.methods.sweeps import base_method
from lmbias.training.inlp import INLPSettings
from lmbias.training.settings import FAMILY_OBJECTIVE, TrainingSettings

# config.yaml `methods.<name>: {kind: ...}`. The workflow resolves a (model, method) pair at DAG-build
# time, so a method a model's family cannot run, an unknown kind or a misspelt key fails before any job.
# The kinds and the keys each takes are lmbias.methods.kinds.


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
        SelfDebiasSettings.from_entry(entry, f"methods.{name}")


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
    if method_kind(method, entry) != "self_debias" or not catalog.is_measurable(benchmark_cfg):
        return None
    reads = catalog.definition_of(benchmark_cfg).reads
    if reads == "embeddings":  # Self-Debias rescales output distributions; hidden states stay as they are
        return NOT_APPLICABLE_REASON
    if reads == "generations":
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
        TrainingSettings.from_dict(settings, f"methods.{method}.training", origins)
        resolved["settings"] = dict(sorted(settings.items()))
    if kind == "self_debias":
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
            per_family = sd.pop("fit_pooling")
            unknown = sorted(set(per_family) - set(FAMILIES))
            if unknown:
                raise ConfigError(
                    f"methods.{method}.fit_pooling.{unknown[0]}: not a model family ({', '.join(FAMILIES)})"
                )
            if per_family.get(model_entry["family"]) is not None:
                sd["fit_pooling"] = per_family[model_entry["family"]]
        if sd.get("fit_pooling") is not None:
            check_poolings(model_entry["family"], [sd["fit_pooling"]], key=f"methods.{method}.fit_pooling")
        resolved["sd_settings"] = dict(sorted({**sd, "ratio_of_pairs": float(ratio)}.items()))
    if kind == "inlp":
        inlp = {k: entry[k] for k in INLP_KEYS if k in entry}
        # a per-family (or per-model) value, e.g. bias-bench's n_iterations: {mlm: 80, clm: 10}
        inlp = per_family_values(inlp, model_entry["family"], f"methods.{method}", model, model_names)
        INLPSettings.from_dict(inlp, f"methods.{method}")
        resolved["inlp_settings"] = dict(sorted(inlp.items()))
    return resolved


def seeds_for(method_entry: dict, seeds: list[int]) -> list[int]:
    return [0] if method_entry["kind"] in DETERMINISTIC_METHOD_KINDS else list(seeds)
