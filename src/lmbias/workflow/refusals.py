"""The errors of the reject_* rules (rules/aggregate.smk): a requested path that names a model, method,
benchmark, seed or comparison the config does not define fails before any job runs, naming what is not
configured and listing what is, instead of Snakemake's generic "no rule to produce"."""

from __future__ import annotations

from typing import NoReturn

from lmbias.errors import ConfigError
from lmbias.workflow.selection import seeds_for


def _configured(names) -> str:
    return ", ".join(sorted(names))


def reject_unknown_comparison(config: dict, comparison: str) -> NoReturn:
    configured = _configured(config.get("comparisons", {})) or "none"
    raise ConfigError(
        f"unknown comparison {comparison!r} in the target path; comparisons configured in config.yaml: {configured}"
    )


def reject_unknown_target(config: dict, model: str, method: str) -> NoReturn:
    """A summary path: its unknown model, else its unknown method, else no rule can build it."""
    if model not in config["models"]:
        raise ConfigError(
            f"unknown model {model!r} in the target path; models configured in config.yaml: "
            f"{_configured(config['models'])}"
        )
    if method not in config["methods"]:
        raise ConfigError(
            f"unknown method {method!r} in the target path; methods configured in config.yaml: "
            f"{_configured(config['methods'])}"
        )
    raise ConfigError(f"results/{model}/{method}/summary.parquet: no rule can build it")


def check_model_and_method(config: dict, path: str, model: str, method: str) -> None:
    """ConfigError naming `path` and its unknown model or method."""
    if model not in config["models"]:
        raise ConfigError(
            f"{path}: unknown model {model!r} in the target path; models configured in config.yaml: "
            f"{_configured(config['models'])}"
        )
    if method not in config["methods"]:
        raise ConfigError(
            f"{path}: unknown method {method!r} in the target path; methods configured in "
            f"config.yaml: {_configured(config['methods'])}"
        )


def check_seed(config: dict, path: str, method: str, seed: str) -> None:
    """ConfigError naming `path` when its seed (the path's text) is not one the method runs."""
    seeds = seeds_for(config, method)
    if not seed.isdigit() or int(seed) not in seeds:
        raise ConfigError(
            f"{path}: method {method!r} runs seed(s) {', '.join(map(str, seeds))}, not {seed!r} (config key `seeds`)"
        )


def reject_unknown_result(config: dict, model: str, method: str, seed: str, kind: str, benchmark: str) -> NoReturn:
    """A scores/ or metrics/ path: names what in it is not configured."""
    path = f"results/{model}/{method}/seed{seed}/{kind}/{benchmark}.parquet"
    check_model_and_method(config, path, model, method)
    if benchmark not in config["benchmarks"]:
        raise ConfigError(
            f"{path}: unknown benchmark {benchmark!r} in the target path; benchmarks configured in "
            f"config.yaml: {_configured(config['benchmarks'])}"
        )
    check_seed(config, path, method, seed)
    raise ConfigError(f"{path}: no rule can build it")


def reject_unknown_seed_metrics(
    config: dict, model: str, method: str, seed: str, name: str = "metrics.parquet"
) -> NoReturn:
    """The same for a seed's metrics.parquet (or, `name`, its scores.json)."""
    path = f"results/{model}/{method}/seed{seed}/{name}"
    check_model_and_method(config, path, model, method)
    check_seed(config, path, method, seed)
    raise ConfigError(f"{path}: no rule can build it")


def reject_unknown_model_folder(config: dict, model: str) -> NoReturn:
    built = sorted(n for n, e in config["models"].items() if "tiny" in e or "gguf" in e)
    raise ConfigError(
        f"resources/models/{model}: unknown model {model!r}; only models with a "
        f"`tiny:` or `gguf:` entry are built here (configured: {', '.join(built) or 'none'})"
    )
