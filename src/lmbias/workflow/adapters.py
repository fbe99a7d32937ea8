"""This package's decisions as the rules' input functions and params (rules/common.smk).

Snakemake calls an input, params or resources function with the job's wildcards, and inspects its signature a few
times per job to see which other arguments it asks for. `of_wildcards` makes such a function of a decision of this
package: it passes what the workflow holds (the config, the benchmark selection) first, then the wildcards the
decision takes, by name; its signature is built once, so Snakemake's inspection is a lookup. `LibrarySets` and
`ScoringSpecs` hold what one workflow parse computes once and several functions read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from lmbias.workflow import inputs
from lmbias.workflow.params import Unrecorded, model_scoring_spec, scoring_spec
from lmbias.workflow.scoring_specs import spec_digest

#: The signature of every adapter: the job's wildcards, and nothing else Snakemake could pass.
WILDCARDS_ONLY = inspect.Signature([inspect.Parameter("wildcards", inspect.Parameter.POSITIONAL_OR_KEYWORD)])


def of_wildcards(decision: Callable, *leading, names: str = "") -> Callable:
    """A function of a job's wildcards that returns `decision(*leading, *values)`, the values being the
    wildcards `names` (space-separated, in the decision's order of arguments)."""
    fields = tuple(names.split())

    def adapter(wildcards):
        return decision(*leading, *(getattr(wildcards, field) for field in fields))

    adapter.__signature__ = WILDCARDS_ONLY
    adapter.__name__ = adapter.__qualname__ = getattr(decision, "__name__", "adapter")
    return adapter


class LibrarySets:
    """The library fingerprints' source files (inputs.library_sets), listed when a fingerprint job first asks."""

    def __init__(self, config: dict, base: str | Path):
        self._config, self._base, self._sets = config, base, None

    def sources(self, library: str) -> list[str]:
        if self._sets is None:
            self._sets = inputs.library_sets(self._config, self._base)
        return self._sets[library]


class ScoringSpecs:
    """The scoring specs of a parse (lmbias.workflow.scoring_specs), each built once: a spec job's content (kept
    out of Snakemake's records) and its digest (its rerun trigger, and the reason `snakemake -n` prints for an
    edit) read the same one."""

    def __init__(self, config: dict):
        self._config = config
        self._benchmark_specs: dict[tuple[str, str], dict] = {}
        self._model_specs: dict[str, dict] = {}

    def benchmark_spec(self, variant: str, benchmark: str) -> dict:
        key = (variant, benchmark)
        if key not in self._benchmark_specs:
            self._benchmark_specs[key] = scoring_spec(self._config, variant, benchmark)
        return self._benchmark_specs[key]

    def benchmark_content(self, variant: str, benchmark: str) -> Unrecorded:
        return Unrecorded(self.benchmark_spec(variant, benchmark))

    def benchmark_digest(self, variant: str, benchmark: str) -> str:
        return spec_digest(benchmark, self.benchmark_spec(variant, benchmark))

    def model_spec(self, model: str) -> dict:
        if model not in self._model_specs:
            self._model_specs[model] = model_scoring_spec(self._config, model)
        return self._model_specs[model]

    def model_content(self, model: str) -> Unrecorded:
        return Unrecorded(self.model_spec(model))

    def model_digest(self, model: str) -> str:
        return spec_digest(model, self.model_spec(model))
