# Data layer: raw files (downloaded from pinned URLs or copied from a local folder, sha256-verified; data_*
# are localrules) and their parsed benchmark tables. Included by the Snakefile after rules/common.smk.
#
# One rule per dataset (data_<dataset>), so each dataset's files can only come from its own rule and
# a job's params are that file's config slice: editing data.gap reruns GAP files only.

from lmbias import parsers as _data_parsers


include: "data_helpers.smk"


for _data_dataset, _data_entry in config["data"].items():

    rule:
        name:
            f"data_{_data_dataset}"
        output:
            f"resources/data/{_data_dataset}/{{file}}",
        log:
            f"logs/data/{_data_dataset}/{{file}}.log",
        wildcard_constraints:
            file=_data_alternatives(_data_entry["files"]),
        # Downloads run where snakemake runs (a cluster's compute nodes often have no internet); copying
        # from data_dir is as cheap there.
        localrule: True
        conda:
            "../envs/lmbias.yaml"
        params:
            source=_data_file_params(_data_dataset),
        message:
            f"{_data_dataset}: fetch and verify {{wildcards.file}}"
        script:
            "../scripts/fetch_data.py"


rule parse_benchmark:
    input:
        unpack(_data_benchmark_inputs),
    output:
        "results/data/{benchmark}.parquet",
    log:
        "logs/data/{benchmark}.log",
    wildcard_constraints:
        benchmark=_data_alternatives(config.get("benchmarks") or {}),
    conda:
        "../envs/lmbias.yaml"
    params:
        # The benchmark's config slice minus `scoring` and `metric`: editing those does not re-parse.
        benchmark=lambda wildcards: _data_parsers.parse_slice(_data_benchmark_cfg(wildcards)),
        files=_data_benchmark_files,
    script:
        "../scripts/parse_benchmark.py"
