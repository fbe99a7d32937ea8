"""Which benchmarks can be scored and measured, and which model families each applies to.

Each module in `lmbias.benchmarks` declares ``BENCHMARKS``: a list of `BenchmarkDef`, one per dataset,
holding its scorer (the expensive forward passes) and its metric function (cheap, from cached scores).
This module collects them. The workflow asks it at DAG-build time, so a benchmark asked of a family it
does not apply to fails before any job runs, with a message saying why.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from lmbias.errors import ConfigError

#: Methods whose result does not depend on a random seed: they run once, in seed0/.
DETERMINISTIC_METHOD_KINDS = frozenset({"pretrained"})


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


def is_measurable(benchmark_cfg: dict) -> bool:
    return benchmark_cfg["dataset"] in definitions()


def source_files(dataset: str) -> list[str]:
    """Library source files (and the module's RESOURCE_FILES) a benchmark's jobs read (Snakemake inputs:
    editing them reruns the jobs)."""
    return list(_loaded()[1].get(dataset, []))


def check_family(benchmark: str, benchmark_cfg: dict, family: str, model: str) -> None:
    d = definition(benchmark_cfg["dataset"], benchmark)
    if family not in d.families:
        raise ConfigError(
            f"benchmark {benchmark!r} does not apply to model {model!r} of family {family!r} "
            f"(it applies to: {', '.join(d.families)})"
        )


def benchmarks_for(family: str, benchmarks: dict) -> list[str]:
    """Configured, measurable benchmarks that apply to `family`."""
    return sorted(b for b, cfg in benchmarks.items() if is_measurable(cfg) and family in definitions()[cfg["dataset"]].families)


def seeds_for(method_entry: dict, seeds: list[int]) -> list[int]:
    return [0] if method_entry["kind"] in DETERMINISTIC_METHOD_KINDS else list(seeds)
