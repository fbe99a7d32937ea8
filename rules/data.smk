# Data layer: raw files (downloaded from pinned URLs or copied from a local folder, sha256-verified; data_*
# are localrules) and their parsed benchmark tables. Included by the Snakefile after rules/common.smk.
#
# One rule per dataset (data_<dataset>), so each dataset's files can only come from its own rule and
# a job's params are that file's config slice: editing data.gap reruns GAP files only.
#
# Both rules are cheap (a copy, a parse): they run inside Snakemake's process (`run:`, lmbias.parsers.jobs,
# imported when the first job runs), logging through lmbias.job_runtime.job_log, and on a cluster on the
# submit host (localrule). See docs/development/index.md, "Jobs in Snakemake's process".

from lmbias import parsers as _data_parsers
from lmbias.job_runtime import job_log


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
        params:
            source=_data_file_params(_data_dataset),
        message:
            f"{_data_dataset}: fetch and verify {{wildcards.file}}"
        run:
            from lmbias.parsers.jobs import fetch_data_job

            with job_log(log[0]):
                fetch_data_job(params.source, config, output[0])


rule parse_benchmark:
    input:
        unpack(_data_benchmark_inputs),
    output:
        "results/data/{benchmark}.parquet",
    log:
        "logs/data/{benchmark}.log",
    wildcard_constraints:
        benchmark=_data_alternatives(config.get("benchmarks") or {}),
    localrule: True
    params:
        # The benchmark's config slice minus `scoring` and `metric`: editing those does not re-parse.
        benchmark=lambda wildcards: _data_parsers.parse_slice(_data_benchmark_cfg(wildcards)),
        files=_data_benchmark_files,
    run:
        from lmbias.parsers.jobs import parse_benchmark_job

        with job_log(log[0]):
            parse_benchmark_job(wildcards.benchmark, params.benchmark, params.files, input.raw, output[0])
