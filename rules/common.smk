# Shared helpers: the config's cross-checks, the wildcard constraints and the input functions and params of
# the rules. The decisions are lmbias.workflow's (plain functions of the config, unit-tested in
# tests/workflow/); here they are adapted to wildcards. Every config value a job uses reaches it through
# `params:` as the slice for its wildcards, so an edit reruns only the jobs that read the edited slice.

import inspect
import re  # noqa: F401  (rules/papers_helpers.smk's patterns use it)
from functools import lru_cache

from snakemake.logging import logger

from lmbias.benchmarks import catalog  # also rules/aggregate.smk's
from lmbias.methods import resolution  # rules/train.smk's and papers_helpers.smk's
from lmbias.config import name_source
from lmbias.errors import ConfigError
from lmbias.papers import grid as _readings_grid  # rules/aggregate.smk's summary_page
from lmbias.workflow import constraints, inputs, methods, params, refusals, scorers, selection, targets, validation
from lmbias.workflow.scoring_specs import spec_digest
from lmbias.job_runtime import job_log, write_source_fingerprint  # job_log: the in-process jobs' logs

try:
    validation.check_config(config)
except ConfigError as error:  # name the file (config.yaml, a --configfile overlay, --config) that set the key
    raise name_source(error, CONFIG_SOURCES) from None


wildcard_constraints:
    **constraints.global_constraints(config),


#: The benchmarks each summary holds; a benchmark left out for missing data is logged once per run.
SELECTION = selection.BenchmarkSelection(config, warn=lambda message: logger.warning(f"WARNING: {message}"))


def seeds_for(method):
    return selection.seeds_for(config, method)


def _summary_selection(model):
    return SELECTION.summary_selection(model)


def resolved_method(model, method):
    return methods.resolved_method(config, model, method)


# --- Targets (Snakefile, rules/aggregate.smk)


def default_target_summaries():
    return targets.default_target_summaries(config)


def default_target_comparisons():
    return targets.default_target_comparisons(config)


def all_targets():
    return targets.all_targets(config)


# --- Scoring and metrics (rules/evaluate.smk)


@lru_cache(maxsize=None)
def _library_sets():
    return inputs.library_sets(config, workflow.basedir)


def library_fingerprint_sources(wildcards):
    return _library_sets()[wildcards.library]


def scoring_max_tokens(wildcards):
    """A resource, not a param: no score depends on it (lmbias.workflow.params.scoring_max_tokens)."""
    return params.scoring_max_tokens(config, wildcards.model)


def scoring_inputs(wildcards):
    w = wildcards
    return inputs.scoring_inputs(config, w.model, w.method, w.seed, w.benchmark)


def model_scoring_inputs(wildcards):
    w = wildcards
    return inputs.model_scoring_inputs(config, SELECTION, w.model, w.method, w.seed)


@lru_cache(maxsize=None)
def _scoring_spec(variant, benchmark):
    return params.scoring_spec(config, variant, benchmark)


def scoring_spec_content(wildcards):
    """A benchmark's scoring spec (lmbias.workflow.scoring_specs), out of Snakemake's records."""
    return params.Unrecorded(_scoring_spec(wildcards.variant, wildcards.benchmark))


def scoring_spec_digest(wildcards):
    """The spec's short digest: its rerun trigger, and the reason `snakemake -n` prints for an edit."""
    return spec_digest(wildcards.benchmark, _scoring_spec(wildcards.variant, wildcards.benchmark))


@lru_cache(maxsize=None)
def _model_scoring_spec(model):
    return params.model_scoring_spec(config, model)


def scoring_model_spec_content(wildcards):
    return params.Unrecorded(_model_scoring_spec(wildcards.model))


def scoring_model_spec_digest(wildcards):
    return spec_digest(wildcards.model, _model_scoring_spec(wildcards.model))


def metric_inputs(wildcards):
    w = wildcards
    return inputs.metric_inputs(config, w.model, w.method, w.seed, w.benchmark)


def metric_benchmark_slice(wildcards):
    return params.metric_slice(config, wildcards.method, wildcards.benchmark)


def classify_inputs(wildcards):
    w = wildcards
    return inputs.classify_inputs(config, w.model, w.method, w.seed, w.benchmark, w.scorer)


def classification_entry(wildcards):
    """What classifying reads of the scorer's entry (not its metric options: lmbias.workflow.scorers)."""
    return scorers.classification_entry(config, wildcards.scorer)


def scorer_metric_options(wildcards):
    """Every scorer's kind and metric options: the metric jobs' rows of the classified generations."""
    return scorers.scorer_metric_options(config)


def scorer_max_tokens(wildcards):
    """A resource, not a param (no probability depends on it)."""
    return scorers.scorer_max_tokens(config, wildcards.scorer)


def seed_metric_inputs(wildcards):
    w = wildcards
    return inputs.seed_metric_inputs(config, SELECTION, w.model, w.method, w.seed)


def seed_metric_benchmark_slices(wildcards):
    return params.seed_metric_benchmark_slices(config, SELECTION, wildcards.model, wildcards.method)


# --- Summaries and comparisons (rules/aggregate.smk)


def summary_metric_files(wildcards):
    return inputs.summary_metric_files(config, SELECTION, wildcards.model, wildcards.method)


def summary_config_slices(wildcards):
    return params.summary_config_slices(config, SELECTION, wildcards.model, wildcards.method)


def summary_left_out(wildcards):
    return SELECTION.left_out(wildcards.model, wildcards.method)


def aggregate_settings(wildcards):
    return params.aggregate_settings(config)


def comparison_entry(wildcards):
    return config["comparisons"][wildcards.comparison]


def comparison_benchmark_slice(wildcards):
    return params.comparison_benchmark_slice(config, wildcards.comparison)


def comparison_inputs(wildcards):
    return inputs.comparison_inputs(config, SELECTION, wildcards.comparison, workflow.basedir)


# --- Paths naming what the config does not define (the reject_* rules of rules/aggregate.smk)


def reject_unknown_comparison(wildcards):
    refusals.reject_unknown_comparison(config, wildcards.comparison)


def reject_unknown_target(model, method):
    refusals.reject_unknown_target(config, model, method)


def reject_unknown_result(wildcards):
    w = wildcards
    refusals.reject_unknown_result(config, w.model, w.method, w.seed, w.kind, w.benchmark)


def reject_unknown_seed_metrics(wildcards):
    refusals.reject_unknown_seed_metrics(config, wildcards.model, wildcards.method, wildcards.seed)


def reject_unknown_seed_scores(wildcards):
    refusals.reject_unknown_seed_metrics(config, wildcards.model, wildcards.method, wildcards.seed, "scores.json")


def reject_unknown_model_folder(wildcards):
    refusals.reject_unknown_model_folder(config, wildcards.model)


# --- Fine-tuning and fitting (rules/train.smk)


def method_job_inputs(wildcards):
    return inputs.method_job_inputs(config, wildcards.model, wildcards.method)


def sd_pair_files(wildcards):
    return inputs.sd_pair_files(config, wildcards.model, wildcards.method)


def method_settings(wildcards):
    return resolved_method(wildcards.model, wildcards.method)["settings"]


def method_sd_settings(wildcards):
    return resolved_method(wildcards.model, wildcards.method)["sd_settings"]


def method_inlp_settings(wildcards):
    return resolved_method(wildcards.model, wildcards.method)["inlp_settings"]


def training_model_entry(wildcards):
    return params.training_model_entry(config, wildcards.model, wildcards.method)


def fitting_model_entry(wildcards):
    return params.fitting_model_entry(config, wildcards.model)


# Snakemake inspects the signature of an input function on every call (inspect.signature, a few times per
# job); a precomputed __signature__ makes that a lookup. Behaviour is unchanged.
for _input_function in (
    scoring_spec_content,
    scoring_spec_digest,
    scoring_model_spec_content,
    scoring_model_spec_digest,
    scoring_inputs,
    model_scoring_inputs,
    metric_inputs,
    seed_metric_inputs,
    seed_metric_benchmark_slices,
    summary_metric_files,
    summary_config_slices,
    summary_left_out,
    comparison_entry,
    comparison_benchmark_slice,
    comparison_inputs,
    method_job_inputs,
    method_settings,
    method_sd_settings,
    method_inlp_settings,
    training_model_entry,
    fitting_model_entry,
    metric_benchmark_slice,
    sd_pair_files,
):
    _input_function.__signature__ = inspect.signature(_input_function)
