"""What a target expands to: the default target (`snakemake` with no target) and `corpora`."""

from __future__ import annotations

from lmbias.corpora import jobs as corpus_jobs
from lmbias.workflow import corpora


def target_methods(config: dict, model: str) -> list[str]:
    """The methods of `model`'s row of the default target: targets.methods_of.<model> where set (e.g. a base model
    measured before mitigation only), else targets.methods."""
    return list((config["targets"].get("methods_of") or {}).get(model) or config["targets"]["methods"])


def default_target_summaries(config: dict) -> list[str]:
    """The summaries of `targets:`, models outer, methods in the order written (pretrained first = before)."""
    return [
        f"results/{model}/{method}/summary.parquet"
        for model in config["targets"]["models"]
        for method in target_methods(config, model)
    ]


def default_target_comparisons(config: dict) -> list[str]:
    return [f"results/tables/paired/{name}.parquet" for name in config["targets"].get("comparisons", [])]


def all_targets(config: dict) -> list[str]:
    """What `snakemake` with no target builds: the `targets:` summaries and comparisons, and the page of their
    headline numbers (results/summary.md, .html)."""
    return default_target_summaries(config) + default_target_comparisons(config) + ["results/summary.md"]


def corpora_targets(config: dict) -> list[str]:
    """Every corpus file the config defines (GPR only when corpora.ontonotes.path is set); a `{swap_rate}`
    template for every swap rate a training block names. The `corpora` rule adds Bartl et al.'s files."""
    out = []
    if corpora.gap_options(config):
        out.append("results/corpora/gap/sentences.parquet")
    for corpus in corpora.corpora_with_interventions(config):
        out += corpora.intervention_files(config, corpus)
    if corpora.ontonotes_options(config).get("path"):
        out += corpus_jobs.gpr_files(corpora.ontonotes_options(config).get("gpr"))
    return out
