"""The data layer's jobs (rules/data.smk): one raw file fetched and verified (rule data_<dataset>), one benchmark
parsed into its table (rule parse_benchmark). Both run inside Snakemake's process (`run:`), logging into their
job's log through lmbias.job_runtime.job_log."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from lmbias.io import write_table_atomic
from lmbias.parsers import parse_benchmark
from lmbias.parsers.sources import fetch_params, obtain

log = logging.getLogger(__name__)


def fetch_data_job(content: Mapping, config: Mapping, output_path: str | os.PathLike) -> None:
    """Rule data_<dataset>: fetch (or copy from a local folder) one raw file and verify its sha256.

    `content` (the job's params.source) is the file's content slice (dataset, file, sha256); where to read it
    from (data_dir, the dataset's path or its URL) is resolved from the run's `config` here, so that moving the
    data folder reruns nothing."""
    params = fetch_params(content["dataset"], content["file"], config["data"], config.get("data_dir"))
    assert params["sha256"] == content["sha256"], (params, content)
    log.info("%s/%s from %s %s", params["dataset"], params["file"], params["source"], params["location"])
    obtain(params, output_path)


def parse_benchmark_job(
    name: str,
    benchmark_entry: Mapping,
    file_names: Sequence[str],
    raw_paths: Sequence[str | os.PathLike],
    output_path: str | os.PathLike,
) -> None:
    """Rule parse_benchmark: the raw files of benchmark `name` (file_names[i] read from raw_paths[i]) ->
    results/data/{benchmark}.parquet with its explicit schema."""
    table = parse_benchmark(benchmark_entry, dict(zip(file_names, raw_paths)), name)
    write_table_atomic(table, output_path)
    log.info("%s: %d rows, columns %s", name, table.num_rows, table.schema.names)
