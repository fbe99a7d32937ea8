# Shared helpers: the config's cross-checks, the wildcard constraints and the input functions and params of
# the rules. The decisions are lmbias.workflow's (plain functions of the config, unit-tested in
# tests/workflow/); here each is adapted to a job's wildcards by lmbias.workflow.adapters.of_wildcards, which
# passes the config (and the benchmark selection) first, then the wildcards named, in that order. Every config
# value a job uses reaches it through `params:` as the slice for its wildcards, so an edit reruns only the jobs
# that read the edited slice.

import re  # noqa: F401  (rules/papers_helpers.smk's patterns use it)
from functools import partial

from snakemake.logging import logger

from lmbias.benchmarks import catalog  # also rules/aggregate.smk's
from lmbias.methods import resolution  # rules/train.smk's and papers_helpers.smk's
from lmbias.config import name_source
from lmbias.errors import ConfigError
from lmbias.papers import grid as _readings_grid  # rules/aggregate.smk's summary_page
from lmbias.workflow import constraints, inputs, methods, params, refusals, scorers, selection, targets, validation
from lmbias.workflow.adapters import LibrarySets, ScoringSpecs, of_wildcards
from lmbias.job_runtime import job_log, write_source_fingerprint  # job_log: the in-process jobs' logs

try:
    validation.check_config(config)
except ConfigError as error:  # name the file (config.yaml, a --configfile overlay, --config) that set the key
    raise name_source(error, CONFIG_SOURCES) from None


wildcard_constraints:
    **constraints.global_constraints(config),


#: The benchmarks each summary holds; a benchmark left out for missing data is logged once per run.
SELECTION = selection.BenchmarkSelection(config, warn=lambda message: logger.warning(f"WARNING: {message}"))
#: What the parse computes once: the library fingerprints' source files, the scoring specs.
LIBRARY_SETS = LibrarySets(config, workflow.basedir)
SCORING_SPECS = ScoringSpecs(config)

seeds_for = partial(selection.seeds_for, config)
_summary_selection = SELECTION.summary_selection
resolved_method = partial(methods.resolved_method, config)

# --- Targets (Snakefile, rules/aggregate.smk)

default_target_summaries = partial(targets.default_target_summaries, config)
default_target_comparisons = partial(targets.default_target_comparisons, config)
all_targets = partial(targets.all_targets, config)

# --- Scoring and metrics (rules/evaluate.smk)

library_fingerprint_sources = of_wildcards(LIBRARY_SETS.sources, names="library")
# A resource, not a param: no score depends on it (lmbias.workflow.params.scoring_max_tokens).
scoring_max_tokens = of_wildcards(params.scoring_max_tokens, config, names="model")
scoring_inputs = of_wildcards(inputs.scoring_inputs, config, names="model method seed benchmark")
model_scoring_inputs = of_wildcards(inputs.model_scoring_inputs, config, SELECTION, names="model method seed")
# A benchmark's scoring spec (lmbias.workflow.scoring_specs), out of Snakemake's records, and its short digest:
# its rerun trigger, and the reason `snakemake -n` prints for an edit. The same for the model's spec.
scoring_spec_content = of_wildcards(SCORING_SPECS.benchmark_content, names="variant benchmark")
scoring_spec_digest = of_wildcards(SCORING_SPECS.benchmark_digest, names="variant benchmark")
scoring_model_spec_content = of_wildcards(SCORING_SPECS.model_content, names="model")
scoring_model_spec_digest = of_wildcards(SCORING_SPECS.model_digest, names="model")
metric_inputs = of_wildcards(inputs.metric_inputs, config, names="model method seed benchmark")
metric_benchmark_slice = of_wildcards(params.metric_slice, config, names="method benchmark")
classify_inputs = of_wildcards(inputs.classify_inputs, config, names="model method seed benchmark scorer")
# What classifying reads of the scorer's entry (not its metric options: lmbias.workflow.scorers).
classification_entry = of_wildcards(scorers.classification_entry, config, names="scorer")
# Every scorer's kind and metric options: the metric jobs' rows of the classified generations.
scorer_metric_options = of_wildcards(scorers.scorer_metric_options, config)
# A resource, not a param (no probability depends on it).
scorer_max_tokens = of_wildcards(scorers.scorer_max_tokens, config, names="scorer")
seed_metric_inputs = of_wildcards(inputs.seed_metric_inputs, config, SELECTION, names="model method seed")
seed_metric_benchmark_slices = of_wildcards(
    params.seed_metric_benchmark_slices, config, SELECTION, names="model method"
)

# --- Summaries and comparisons (rules/aggregate.smk)

summary_metric_files = of_wildcards(inputs.summary_metric_files, config, SELECTION, names="model method")
summary_config_slices = of_wildcards(params.summary_config_slices, config, SELECTION, names="model method")
summary_left_out = of_wildcards(SELECTION.left_out, names="model method")
aggregate_settings = of_wildcards(params.aggregate_settings, config)
comparison_entry = of_wildcards(params.comparison_entry, config, names="comparison")
comparison_benchmark_slice = of_wildcards(params.comparison_benchmark_slice, config, names="comparison")
comparison_inputs = of_wildcards(
    partial(inputs.comparison_inputs, base=workflow.basedir), config, SELECTION, names="comparison"
)

# --- Paths naming what the config does not define (the reject_* rules of rules/aggregate.smk)

reject_unknown_comparison = of_wildcards(refusals.reject_unknown_comparison, config, names="comparison")
reject_unknown_target = partial(refusals.reject_unknown_target, config)  # (model, method)
reject_unknown_result = of_wildcards(refusals.reject_unknown_result, config, names="model method seed kind benchmark")
reject_unknown_seed_metrics = of_wildcards(refusals.reject_unknown_seed_metrics, config, names="model method seed")
reject_unknown_seed_scores = of_wildcards(
    partial(refusals.reject_unknown_seed_metrics, name="scores.json"), config, names="model method seed"
)
reject_unknown_model_folder = of_wildcards(refusals.reject_unknown_model_folder, config, names="model")

# --- Fine-tuning and fitting (rules/train.smk)

method_job_inputs = of_wildcards(inputs.method_job_inputs, config, names="model method")
sd_pair_files = of_wildcards(inputs.sd_pair_files, config, names="model method")
method_settings = of_wildcards(params.method_part, config, "settings", names="model method")
method_sd_settings = of_wildcards(params.method_part, config, "sd_settings", names="model method")
method_inlp_settings = of_wildcards(params.method_part, config, "inlp_settings", names="model method")
training_model_entry = of_wildcards(params.training_model_entry, config, names="model method")
fitting_model_entry = of_wildcards(params.fitting_model_entry, config, names="model")
