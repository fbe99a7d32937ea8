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


def _data_benchmark_files(wildcards):
    """Raw file names (keys of data.<dataset>.files) the benchmark needs, in parser order (with data_dir: a
    parser's stand-in where only it is in the local folder, e.g. StereoSet's flat copy for dev.json)."""
    return _data_parsers.required_files(
        _data_benchmark_cfg(wildcards), config["data"], wildcards.benchmark, config.get("data_dir")
    )


def _data_benchmark_inputs(wildcards):
    dataset = _data_benchmark_cfg(wildcards)["dataset"]
    return {
        "raw": [f"resources/data/{dataset}/{f}" for f in _data_benchmark_files(wildcards)],
        # Snakemake does not track imported modules: the parser's source is an input, so editing it re-parses.
        "code": _data_parsers.module_files(dataset),
    }
