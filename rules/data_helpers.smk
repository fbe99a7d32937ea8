# Input functions and params of rules/data.smk, kept out of that file so it holds rules only
# (`snakemake --lint`) and still stands alone: rules/data.smk includes this file itself.

import re as _data_re

from lmbias import parsers as _data_parsers
from lmbias.parsers import sources as _data_sources


def _data_alternatives(names):
    """A regex matching exactly the given names (never matches when there are none)."""
    names = list(names)
    return "|".join(_data_re.escape(n) for n in names) if names else "(?!x)x"


def _data_file_params(dataset):
    def params(wildcards):
        return _data_sources.content_params(dataset, wildcards.file, config["data"])

    return params


def _data_benchmark_cfg(wildcards):
    return config["benchmarks"][wildcards.benchmark]


def _data_benchmark_raw(wildcards):
    """(key, dataset, file) of the raw files the benchmark's parser reads: its own dataset's, in parser order (with
    data_dir: a parser's stand-in where only it is in the local folder, e.g. StereoSet's flat copy for dev.json),
    then other datasets' files the parser declares (HONEST's lexicon: lmbias.parsers.parse_inputs)."""
    return _data_parsers.parse_inputs(
        _data_benchmark_cfg(wildcards), config["data"], wildcards.benchmark, config.get("data_dir")
    )


def _data_benchmark_files(wildcards):
    """The keys under which the parser gets its raw files: a file name of its own dataset, <dataset>/<file> of
    another's."""
    return [key for key, _, _ in _data_benchmark_raw(wildcards)]


def _data_benchmark_inputs(wildcards):
    dataset = _data_benchmark_cfg(wildcards)["dataset"]
    return {
        "raw": [f"resources/data/{d}/{f}" for _, d, f in _data_benchmark_raw(wildcards)],
        # Snakemake does not track imported modules: the parser's source is an input, so editing it re-parses.
        "code": _data_parsers.module_files(dataset),
    }
