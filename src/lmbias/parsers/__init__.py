"""Dataset parsers: raw upstream files -> pyarrow tables with an explicit schema per dataset.

A benchmark entry in config.yaml (`benchmarks.<name>`) names its `dataset` (a key of `data:`) plus
parser options (split, types, language, tests, ...). `required_files` says which raw files a
benchmark needs (the input function of rule parse_benchmark), `parse_benchmark` turns them into
the table written to results/data/{benchmark}.parquet. Each parser module declares DATASET (the dataset it
parses; `PARSERS` is found from them) and exposes SCHEMA, required_files(options, available, key) and
parse(files, options, key); most also parse_<dataset>(...).

Files of other datasets: a parser that also reads files of another configured dataset (HONEST's templates are
scored against the HurtLex lexicon, `data.hurtlex`) declares OTHER_DATA = {entry key: (default dataset, (file,
...))}; the benchmark entry's key (HONEST's `lexicon`) names the `data:` entry, its default when absent. Those files
are inputs of parse_benchmark like the benchmark's own (`parse_inputs`: fetched and verified by their dataset's own
data_<dataset> rule into resources/data/<dataset>/<file>), reach `parse` under the key "<dataset>/<file>"
(`other_file_key`), so they never clash with the benchmark's own file names, and their sha256 goes into the parsed
table's metadata beside the others'. A missing local copy stops the run naming the file and its config key
(data.<dataset>.files.<file>), as any missing data does (lmbias.workflow.selection.missing_benchmark_data).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pyarrow as pa

from lmbias.errors import ConfigError
from lmbias.io import file_sha256
from lmbias.parsers import sources
from lmbias.parsers.bec_pro import parse_bec_pro
from lmbias.parsers.cds import parse_cds
from lmbias.parsers.crows_pairs import parse_crows_pairs
from lmbias.parsers.gap import parse_gap
from lmbias.parsers.seat import parse_seat
from lmbias.parsers.stereoset import parse_stereoset
from lmbias.parsers.winobias import parse_winobias


def _discover_parsers() -> dict[str, ModuleType]:
    """{dataset: its parser module}: every module of this package that declares `DATASET`."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        dataset = getattr(module, "DATASET", None)
        if dataset is None:
            continue
        if dataset in found:
            raise RuntimeError(f"two parsers for dataset {dataset!r}: {found[dataset].__name__}, {module.__name__}")
        found[dataset] = module
    return found


_PARSERS: dict[str, ModuleType] = {}


def parser_modules() -> dict[str, ModuleType]:
    """{dataset: parser module}, found from the modules' DATASET on first use (not at import: a module of
    this package, e.g. jobs, imports the package itself)."""
    if not _PARSERS:
        _PARSERS.update(_discover_parsers())
    return _PARSERS


def __getattr__(name: str):
    if name == "PARSERS":  # the same mapping under its table-like name
        return parser_modules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Keys of a benchmark entry that belong to later stages: they never reach the parser, so editing
# them does not re-parse (rule parse_benchmark drops them from its params). `reading`: a peer reading's
# text (config.yaml, papers.<paper>.readings), printed under the paper tables only.
NON_PARSE_KEYS = ("scoring", "metric", "reading")


def parser_for(benchmark_cfg: Mapping, name: str) -> ModuleType:
    dataset = benchmark_cfg.get("dataset")
    if dataset not in parser_modules():
        raise ConfigError(
            f"benchmarks.{name}.dataset: no parser for {dataset!r}; known datasets: {sorted(parser_modules())}"
        )
    return parser_modules()[dataset]


def parse_slice(benchmark_cfg: Mapping) -> dict:
    """The part of a benchmark entry the parser reads (everything but `scoring`, `metric` and `reading`)."""
    return {k: v for k, v in benchmark_cfg.items() if k not in NON_PARSE_KEYS}


def is_generated(dataset: str) -> bool:
    """Generated datasets (e.g. DA-Gender) are built from project-authored templates, not downloaded."""
    return bool(getattr(parser_modules().get(dataset), "GENERATED", False))


def required_files(
    benchmark_cfg: Mapping, data_cfg: Mapping, name: str, data_dir: str | os.PathLike | None = None
) -> list[str]:
    """Names (keys of data.<dataset>.files) of the raw files benchmark `name` needs.

    A parser's ALTERNATIVES ({file: (stand-ins, ...)}) name configured files that can replace a required
    one: where the required file would be read from a local folder (`data.<dataset>.path`, or `data_dir`
    when given) and is not there, the first stand-in that is there is read instead (StereoSet's flat copy
    for dev.json). Otherwise the required file stays, so downloads and missing-data errors name it.
    """
    module = parser_for(benchmark_cfg, name)
    dataset = benchmark_cfg["dataset"]
    if is_generated(dataset):
        return []
    entry = data_cfg.get(dataset)
    if not isinstance(entry, Mapping) or not isinstance(entry.get("files"), Mapping):
        raise ConfigError(f"data.{dataset}: benchmark {name!r} needs this dataset, but it is not configured")
    available = list(entry["files"])
    files = module.required_files(parse_slice(benchmark_cfg), available, f"benchmarks.{name}")
    files = [_stand_in(file, getattr(module, "ALTERNATIVES", {}), dataset, data_cfg, data_dir) for file in files]
    for file in files:
        if file not in entry["files"]:
            raise ConfigError(
                f"data.{dataset}.files.{file}: benchmark {name!r} needs this file, but it is not configured"
            )
    return files


def other_file_key(dataset: str, file: str) -> str:
    """The key under which `parse` gets a file of another dataset (OTHER_DATA): "<dataset>/<file>", the file's
    path under resources/data/."""
    return f"{dataset}/{file}"


def other_data(benchmark_cfg: Mapping, data_cfg: Mapping, name: str) -> list[tuple[str, str]]:
    """(dataset, file) of every file of another configured dataset that benchmark `name`'s parser reads (its
    OTHER_DATA: {entry key: (default dataset, files)}; the entry's key, when set, names the dataset). A dataset or
    file that is not configured is a ConfigError naming the entry's key or the file's."""
    module = parser_for(benchmark_cfg, name)
    found = []
    for key, (default, files) in getattr(module, "OTHER_DATA", {}).items():
        dataset = benchmark_cfg.get(key, default)
        entry = data_cfg.get(dataset) if isinstance(dataset, str) else None
        if not isinstance(entry, Mapping) or not isinstance(entry.get("files"), Mapping):
            raise ConfigError(
                f"benchmarks.{name}.{key}: {dataset!r} is not a configured dataset (a key of data:); benchmark "
                f"{name!r} reads its files {', '.join(files)}"
            )
        for file in files:
            if file not in entry["files"]:
                raise ConfigError(
                    f"data.{dataset}.files.{file}: benchmark {name!r} reads this file (benchmarks.{name}.{key}), "
                    "but it is not configured"
                )
            found.append((dataset, file))
    return found


def parse_inputs(
    benchmark_cfg: Mapping, data_cfg: Mapping, name: str, data_dir: str | os.PathLike | None = None
) -> list[tuple[str, str, str]]:
    """(key in parse's `files`, dataset, file) of every raw file rule parse_benchmark reads for benchmark `name`:
    its own dataset's (`required_files`, keyed by file name) and then other datasets' (`other_data`, keyed by
    `other_file_key`). Each lies at resources/data/<dataset>/<file>."""
    own = [(file, benchmark_cfg["dataset"], file) for file in required_files(benchmark_cfg, data_cfg, name, data_dir)]
    return own + [(other_file_key(d, f), d, f) for d, f in other_data(benchmark_cfg, data_cfg, name)]


def _stand_in(file: str, alternatives: Mapping, dataset: str, data_cfg: Mapping, data_dir) -> str:
    if not alternatives.get(file) or file not in data_cfg[dataset]["files"]:
        return file
    kind, location = sources.resolve_source(dataset, file, data_cfg, data_dir)
    if kind != "local" or Path(location).exists():
        return file
    for alternative in alternatives[file]:
        if alternative in data_cfg[dataset]["files"]:
            _, other = sources.resolve_source(dataset, alternative, data_cfg, data_dir)
            if Path(other).exists():
                return alternative
    return file


def module_files(dataset: str) -> list[str]:
    """Source files of the parser for `dataset` (inputs of parse_benchmark: edits re-parse)."""
    module = parser_modules()[dataset]
    here = Path(__file__).resolve().parent
    repo = here.parents[2]
    resources = [str(repo / r) for r in getattr(module, "RESOURCE_FILES", ())]
    return [str(Path(module.__file__).resolve()), str(here / "common.py")] + resources


def parse_benchmark(benchmark_cfg: Mapping, files: Mapping[str, str | os.PathLike], name: str) -> pa.Table:
    """Parse benchmark `name` from `files` ({file name, or other_file_key for another dataset's file: path}, as
    `parse_inputs` lists them); the raw files' sha256 and the parse
    options are stored in the schema metadata (provenance for the summary tables), beside the keys a parser
    wrote itself (BBQ's lmbias.bbq_seed: the seed its items were drawn with, default or not)."""
    module = parser_for(benchmark_cfg, name)
    options = parse_slice(benchmark_cfg)
    result = module.parse(files, options, f"benchmarks.{name}")
    metadata = {
        b"lmbias.benchmark": name.encode(),
        b"lmbias.dataset": str(benchmark_cfg["dataset"]).encode(),
        b"lmbias.options": json.dumps(options, sort_keys=True, default=str).encode(),
        b"lmbias.sha256": json.dumps({f: file_sha256(p) for f, p in files.items()}, sort_keys=True).encode(),
    }
    return result.replace_schema_metadata({**(result.schema.metadata or {}), **metadata})


__all__ = [
    "PARSERS",
    "parser_modules",
    "NON_PARSE_KEYS",
    "parser_for",
    "parse_slice",
    "required_files",
    "other_file_key",
    "other_data",
    "parse_inputs",
    "module_files",
    "parse_benchmark",
    "parse_bec_pro",
    "parse_cds",
    "parse_crows_pairs",
    "parse_gap",
    "parse_seat",
    "parse_stereoset",
    "parse_winobias",
]
