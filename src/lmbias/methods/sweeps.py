"""Method sweeps: `methods.<name>.sweep: {setting: [values]}` (the over-debiasing paper's Table 11) expanded
into one method per value (one per combination when several settings are swept), named
`<name>@<setting>=<value>`, e.g. cds@swap_rate=0.7.

expand_sweeps runs once when the Snakefile loads the config, so every rule, wildcard constraint and error
message sees plain method names; each instance's entry holds only its own value, so editing one value adds
or removes that instance's jobs only.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

from lmbias.errors import ConfigError
from lmbias.methods.kinds import method_kind
from lmbias.training.settings import ER_LAMBDA_RANGE, er_lambda_ok


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


def base_method(method: str) -> str:
    """The config entry a method name comes from: `cds` for the sweep instance `cds@swap_rate=0.7`."""
    return method.split("@")[0]


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
        raise ConfigError(
            f"methods.{base}.sweep: kind {kind!r} has no settings to sweep (it trains nothing); "
            f"sweeps apply to kinds {', '.join(sorted(set().union(*(s.kinds for s in SWEEP_SETTINGS.values()))))}"
        )
    axes, named = {}, {}
    for key, values in sweep.items():
        setting = SWEEP_ALIASES.get(key, key)
        if setting not in SWEEP_SETTINGS or kind not in SWEEP_SETTINGS[setting].kinds:
            aliases = [a for a, s in SWEEP_ALIASES.items() if s in sweepable]
            raise ConfigError(
                f"methods.{base}.sweep.{key}: not a sweepable setting of kind {kind!r} "
                f"(sweepable: {', '.join(sweepable + aliases)})"
            )
        if setting in named:
            raise ConfigError(
                f"methods.{base}.sweep.{key}: names the same setting as sweep.{named[setting]} ({setting}); keep one"
            )
        named[setting] = key
        axes[setting] = _sweep_values(base, key, setting, values)
    if "swap_rate" in axes and "{swap_rate}" not in str(entry.get("corpus", "")):
        raise ConfigError(
            f"methods.{base}.sweep.{named['swap_rate']}: the corpus {entry.get('corpus')!r} has no "
            '"{swap_rate}" placeholder, so the swap rate would not reach the job '
            "(e.g. corpus: results/corpora/gap/cds-{swap_rate}.parquet)"
        )
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
                raise ConfigError(
                    f"methods.{name}.sweep: its instance {instance!r} collides with an existing "
                    f"method of that name (methods.{instance}); rename one"
                )
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
                raise ConfigError(
                    f"{key}[{i}]: {name!r} names unknown method {base!r}; configured: {', '.join(sorted(methods))}"
                )
            if not isinstance(methods[base], dict) or "sweep" not in methods[base]:
                raise ConfigError(
                    f"{key}[{i}]: {name!r}: methods.{base} declares no sweep (add `sweep:` to it, or target {base!r})"
                )
            new = sweep_instances(base, expanded)
        elif name not in expanded:
            swept = sorted(n for n, e in methods.items() if isinstance(e, dict) and "sweep" in e)
            hint = (
                f" (sweep instances: {', '.join(n + SWEEP_WILDCARD for n in swept)} or one instance by name)"
                if swept
                else ""
            )
            raise ConfigError(f"{key}[{i}]: unknown method {name!r}; configured: {', '.join(sorted(methods))}{hint}")
        else:
            new = [name]
        out += [n for n in new if n not in out]
    return out
