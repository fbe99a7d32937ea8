"""Wildcard constraints: the values {model}, {method}, {benchmark}, {seed}, {library} and {comparison} may
take (the configured names only), and the patterns of the reject_* rules, which match exactly the paths that
name something the config does not define (rules/aggregate.smk; the errors are lmbias.workflow.refusals')."""

from __future__ import annotations

import re

from lmbias.benchmarks import catalog
from lmbias.workflow import scoring_specs
from lmbias.workflow.selection import method_names_of_kinds, seeds_for

#: Fingerprinted library sets that are not a benchmark's measure (rules/evaluate.smk, library_fingerprint).
NON_BENCHMARK_LIBRARIES = {"finetune", "sentence_debias", "inlp", "self_debias", "classifiers"}

#: A pattern no value matches (a wildcard with no configured value).
NOTHING = "(?!)"


def alternatives(names) -> str:
    """A regex of exactly the given names, sorted ("" for none)."""
    return "|".join(re.escape(n) for n in sorted(names))


def global_constraints(config: dict) -> dict[str, str]:
    """The workflow's global wildcard_constraints (rules/common.smk)."""
    libraries = {catalog.measure_of(entry) for entry in config["benchmarks"].values()} | NON_BENCHMARK_LIBRARIES
    return {
        "model": alternatives(config["models"]),
        "method": alternatives(config["methods"]),
        "benchmark": alternatives(config["benchmarks"]),
        "seed": r"\d+",
        "library": alternatives(libraries),
        "comparison": alternatives(config.get("comparisons", {})) or NOTHING,
        "scorer": alternatives(config.get("scorers") or {}) or NOTHING,
    }


def scoring_variants(config: dict) -> str:
    """The {variant} of rule scoring_spec (lmbias.workflow.scoring_specs.scoring_variant)."""
    return alternatives(scoring_specs.scoring_variants(config)) or NOTHING


def methods_of_kinds(config: dict, kinds) -> str:
    """The {method} constraint of a rule that runs only methods of the given kinds (finetune, the fits)."""
    return alternatives(method_names_of_kinds(config, kinds)) or NOTHING


def valid_seed_paths(config: dict) -> str:
    """Regex (from just after `results/`) of every {model}/{method}/seed{k} folder the config defines."""
    by_method = "|".join(
        f"{re.escape(m)}/seed(?:{'|'.join(str(s) for s in seeds_for(config, m))})" for m in sorted(config["methods"])
    )
    return f"(?:{alternatives(config['models'])})/(?:{by_method})"


def valid_result_paths(config: dict) -> str:
    """Regex (from just after `results/`) of every scores/metrics path the config defines."""
    return f"{valid_seed_paths(config)}/(?:scores|metrics)/(?:{alternatives(config['benchmarks'])})\\.parquet$"


# --- the reject_* rules' {model} (or {method}, {comparison}) constraint: anything but a configured path


def unknown_comparison(config: dict) -> str:
    # ".parquet": the path goes on after the name, so the lookahead anchors there (not at "$")
    comparisons = config.get("comparisons")
    return f"(?!(?:{alternatives(comparisons)})\\.parquet$)[^/]+" if comparisons else "[^/]+"


def unknown_model(config: dict) -> str:
    return f"(?!(?:{alternatives(config['models'])})/)[^/]+"  # "/": the path goes on after the name


def unknown_method(config: dict) -> str:
    return f"(?!(?:{alternatives(config['methods'])})/)[^/]+"


def unknown_result_model(config: dict) -> str:
    """One lookahead over the rest of a scores/metrics path admits only the configured combinations."""
    return f"(?!{valid_result_paths(config)})[^/]+"


def unknown_seed_metrics_model(config: dict) -> str:
    return f"(?!{valid_seed_paths(config)}/metrics\\.parquet$)[^/]+"


def unknown_seed_scores_model(config: dict) -> str:
    """The same for a seed's scores.json (the score_model job's manifest)."""
    return f"(?!{valid_seed_paths(config)}/scores\\.json$)[^/]+"


def unknown_model_folder(config: dict) -> str:
    return f"(?!(?:{alternatives(config['models'])})$)[^/]+"
