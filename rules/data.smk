# Data layer: raw files (downloaded from pinned URLs or copied from a local folder, sha256-verified)
# and their parsed benchmark tables. Included by the Snakefile after rules/common.smk.
#
# One rule per dataset (data_<dataset>), so each dataset's files can only come from its own rule and
# a job's params are that file's config slice: editing data.gap reruns GAP files only.

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


for _data_dataset, _data_entry in config["data"].items():

    rule:
        name:
            f"data_{_data_dataset}"
        output:
            f"resources/data/{_data_dataset}/{{file}}",
        wildcard_constraints:
            file=_data_alternatives(_data_entry["files"]),
        params:
            source=_data_file_params(_data_dataset),
        conda:
            "../envs/lmbias.yaml"
        log:
            f"logs/data/{_data_dataset}/{{file}}.log",
        message:
            f"{_data_dataset}: fetch and verify {{wildcards.file}}"
        script:
            "../scripts/fetch_data.py"


def _data_benchmark_cfg(wildcards):
    return config["benchmarks"][wildcards.benchmark]


def _data_benchmark_files(wildcards):
    """Raw file names (keys of data.<dataset>.files) the benchmark needs, in parser order."""
    return _data_parsers.required_files(_data_benchmark_cfg(wildcards), config["data"], wildcards.benchmark)


def _data_benchmark_inputs(wildcards):
    dataset = _data_benchmark_cfg(wildcards)["dataset"]
    return {
        "raw": [f"resources/data/{dataset}/{f}" for f in _data_benchmark_files(wildcards)],
        # Snakemake does not track imported modules: the parser's source is an input, so editing it re-parses.
        "code": _data_parsers.module_files(dataset),
    }


rule parse_benchmark:
    input:
        unpack(_data_benchmark_inputs),
    output:
        "results/data/{benchmark}.parquet",
    params:
        # The benchmark's config slice minus `scoring` and `metric`: editing those does not re-parse.
        benchmark=lambda wildcards: _data_parsers.parse_slice(_data_benchmark_cfg(wildcards)),
        files=_data_benchmark_files,
    conda:
        "../envs/lmbias.yaml"
    log:
        "logs/data/{benchmark}.log",
    wildcard_constraints:
        benchmark=_data_alternatives(config.get("benchmarks") or {}),
    script:
        "../scripts/parse_benchmark.py"
