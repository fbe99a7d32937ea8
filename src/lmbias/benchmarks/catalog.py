"""Which benchmarks exist, found from their definitions: every module of `lmbias.benchmarks` that declares
``BENCHMARKS`` (a list of `BenchmarkDef`), plus the modules of the folders named by the environment variable
``LMBIAS_BENCHMARK_PATH`` (os.pathsep-separated; a benchmark kept outside the package, e.g. a researcher's own
or a test's toy). The workflow asks this module when the DAG is built, so a benchmark asked of a family it does
not apply to fails before any job runs, with a message saying why.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
from pathlib import Path

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.errors import ConfigError

#: The environment variable naming extra folders of benchmark modules.
BENCHMARK_PATH_VARIABLE = "LMBIAS_BENCHMARK_PATH"
REPOSITORY = Path(__file__).resolve().parents[3]
#: The scoring engine every benchmark's scores pass through (the model interface, batching, token budgets, the
#: model's window). A request of lmbias.engine.lm reaches a module beyond these (pll, prefix_cache, embeddings,
#: generation, chat): the benchmarks asking for it import it or name it in their definition's `library`.
SCORING_ENGINE_MODULES = (
    "lmbias.engine.lm",
    "lmbias.engine.scoring",
    "lmbias.engine.scored_logits",
    "lmbias.engine.batching",
    "lmbias.engine.context_window",
)


def _lmbias_modules(module) -> set[str]:
    """The module's file and the files of the lmbias modules it imports (names bound at module level)."""
    found = {inspect.getsourcefile(module)}
    for value in vars(module).values():
        home = value if inspect.ismodule(value) else inspect.getmodule(value)
        if home is not None and home.__name__.startswith("lmbias.") and inspect.getsourcefile(home):
            found.add(inspect.getsourcefile(home))
    return found


def _source_files(module, d: BenchmarkDef) -> list[str]:
    files = _lmbias_modules(module)
    files |= {inspect.getsourcefile(m) for m in d.library}
    files |= {inspect.getsourcefile(importlib.import_module(m)) for m in SCORING_ENGINE_MODULES}
    files |= {str(REPOSITORY / r) for r in d.resources}
    return sorted(files)


def _package_modules():
    from lmbias import benchmarks

    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda i: i.name):
        yield importlib.import_module(f"{benchmarks.__name__}.{info.name}")


def _extra_modules(path_value: str):
    """The `*.py` modules of each folder in `path_value`, imported under `lmbias_benchmark_path.<stem>`."""
    for folder in filter(None, path_value.split(os.pathsep)):
        if not Path(folder).is_dir():
            raise ConfigError(f"{BENCHMARK_PATH_VARIABLE}: {folder} is not a folder of benchmark modules")
        for file in sorted(Path(folder).glob("*.py")):
            if file.name.startswith("_"):
                continue
            name = f"lmbias_benchmark_path.{file.stem}"
            if name not in sys.modules:
                spec = importlib.util.spec_from_file_location(name, file)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
            yield sys.modules[name]


def _discover(path_value: str):
    defs: dict[str, BenchmarkDef] = {}
    sources: dict[str, list[str]] = {}
    for module in [*_package_modules(), *_extra_modules(path_value)]:
        for d in getattr(module, "BENCHMARKS", []):
            if d.name in defs:
                raise RuntimeError(f"two benchmark definitions named {d.name!r} ({module.__name__})")
            defs[d.name] = d
            sources[d.name] = _source_files(module, d)
    return defs, sources


#: {LMBIAS_BENCHMARK_PATH value: (definitions, sources)}
_CACHE: dict[str, tuple] = {}


def _loaded():
    """Discover lazily: a benchmark module imported first must be complete before its BENCHMARKS list is read.
    Keyed by the path variable, so a process that sets it later (a test) sees its benchmarks."""
    path_value = os.environ.get(BENCHMARK_PATH_VARIABLE, "")
    if path_value not in _CACHE:
        _CACHE[path_value] = _discover(path_value)
    return _CACHE[path_value]


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


def measure_of(benchmark_cfg: dict, benchmark: str = "?") -> str:
    """The definition that scores a benchmark entry: its `measure` key when set (a measure that applies to
    any text, e.g. `perplexity` over GAP's texts), else its dataset's own (e.g. `crows_pairs`)."""
    measure = benchmark_cfg.get("measure")
    if measure is None:
        return benchmark_cfg["dataset"]
    if measure not in definitions():
        raise ConfigError(
            f"benchmarks.{benchmark}.measure: {measure!r} is not a measure; known: {', '.join(sorted(definitions()))}"
        )
    return measure


def definition_of(benchmark_cfg: dict, benchmark: str = "?") -> BenchmarkDef:
    """The definition that scores and measures a configured benchmark entry."""
    return definition(measure_of(benchmark_cfg, benchmark), benchmark)


def is_measurable(benchmark_cfg: dict) -> bool:
    return measure_of(benchmark_cfg) in definitions()


def source_files(dataset: str) -> list[str]:
    """Library source files a benchmark's jobs read (Snakemake inputs through its fingerprint: editing one
    reruns the jobs): its module, the lmbias modules that module imports, its definition's `library` modules
    and `resources`, and the scoring engine's."""
    return list(_loaded()[1].get(dataset, []))


def check_family(benchmark: str, benchmark_cfg: dict, family: str, model: str) -> None:
    d = definition_of(benchmark_cfg, benchmark)
    if family not in d.families:
        raise ConfigError(
            f"benchmark {benchmark!r} does not apply to model {model!r} of family {family!r} "
            f"(it applies to: {', '.join(d.families)})"
        )


def benchmarks_for(family: str, benchmarks: dict) -> list[str]:
    """Configured, measurable benchmarks that apply to `family`."""
    return sorted(
        b for b, cfg in benchmarks.items() if is_measurable(cfg) and family in definitions()[measure_of(cfg)].families
    )
