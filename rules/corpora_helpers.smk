# Input functions and params of rules/corpora.smk, kept out of that file so it holds rules only
# (`snakemake --lint`); rules/corpora.smk includes this file itself. The decisions are lmbias.workflow.corpora's.

import inspect as _corpora_inspect

from lmbias.workflow import corpora as _corpora_plan


def _corpora_lib(*modules):
    return _corpora_plan.library(*modules)


def _corpora_pattern(names):
    return _corpora_plan.pattern(names)


def _corpora_gap():
    return _corpora_plan.gap_options(config)


def _corpora_ontonotes():
    return _corpora_plan.ontonotes_options(config)


def _corpora_intervention_entry(wildcards):
    return _corpora_plan.intervention(config, wildcards.corpus, wildcards.intervention)[1]


def _corpora_intervention_key(wildcards):
    return _corpora_plan.intervention(config, wildcards.corpus, wildcards.intervention)[0]


def _corpora_intervention_inputs(wildcards):
    return _corpora_plan.intervention_inputs(config, wildcards.corpus, wildcards.intervention, _CORPORA_WORDLISTS)


def _corpora_gpr_options(wildcards):
    return _corpora_plan.gpr_variant_options(config, wildcards.gpr)


def _corpora_gpr_inputs(wildcards):
    return _corpora_plan.gpr_inputs(config, wildcards.gpr, _CORPORA_WORDLISTS)


def _corpora_conll_files(wildcards):
    # Raises a ConfigError naming corpora.ontonotes.path when it is unset: only when a GPR file is asked for.
    return _corpora_plan.conll_files(config)


def corpora_targets():
    return targets.corpora_targets(config)


# Snakemake inspects the signature of an input function on every call; a precomputed __signature__ makes that a
# lookup (as lmbias.workflow.adapters.of_wildcards gives rules/common.smk's).
for _corpora_function in (
    _corpora_intervention_inputs,
    _corpora_intervention_entry,
    _corpora_intervention_key,
    _corpora_conll_files,
):
    _corpora_function.__signature__ = _corpora_inspect.signature(_corpora_function)
