"""The entry points of the cheap jobs that run inside Snakemake's process: what their scripts were, called from
their rules' `run:` blocks with the job's Snakemake input, output, params, wildcards and log.

Each one runs its job inside lmbias.job_runtime.job_log (the job's log, for its thread only) and imports its
job's module when it is called, so reading the Snakefile imports none of them. A `run:` block holds one call
(`snakemake --lint` wants a few lines there). docs/development/index.md, "Jobs in Snakemake's process".
"""

from __future__ import annotations

from lmbias.job_runtime import job_log


def write_scoring_spec(output, params, name, log) -> None:
    """Rules scoring_spec and scoring_model_spec: what scores depend on from the config
    (lmbias.workflow.scoring_specs); `name`: the benchmark or the model."""
    from lmbias.workflow.scoring_specs import write_spec

    with job_log(log[0]):
        write_spec(output[0], name, params.spec.value)


def _named_files(input, name: str) -> list[str]:
    """A named input as a list: none when absent, and Snakemake gives a one-file list as a string."""
    files = getattr(input, name, [])
    return [files] if isinstance(files, str) else list(files)


def compute_seed_metrics(input, output, params, wildcards, log) -> None:
    """Rule compute_seed_metrics: the metric rows of every benchmark of one model, method and seed."""
    from lmbias.jobs.metrics import compute_seed_metrics_job

    with job_log(log[0]):
        compute_seed_metrics_job(
            benchmarks=params.benchmarks,
            scores_paths=list(input.scores),
            output_path=output[0],
            model=wildcards.model,
            method=wildcards.method,
            seed=wildcards.seed,
            classified=_named_files(input, "classified"),
            scorers=dict(params.scorers),
        )


def compute_metric(input, output, params, wildcards, log) -> None:
    """Rule compute_metric: the metric rows of one benchmark from its cached scores."""
    from lmbias.jobs.metrics import compute_metric_job

    with job_log(log[0]):
        compute_metric_job(
            benchmark=wildcards.benchmark,
            benchmark_entry=params.benchmark,
            scores_path=input.scores,
            output_path=output[0],
            model=wildcards.model,
            method=wildcards.method,
            seed=wildcards.seed,
            classified=_named_files(input, "classified"),
            scorers=dict(params.scorers),
        )


def summarise(input, output, params, wildcards, log) -> None:
    """Rule summarise: summary.parquet of one model and method (every metric, every seed, provenance)."""
    from lmbias.jobs.metrics import summarise_job

    with job_log(log[0]):
        summarise_job(
            metric_paths=list(input.metrics),
            output_path=output[0],
            slices=params.slices,
            left_out=params.left_out,
            aggregate=params.aggregate,
        )


def summary_page(input, output, params, wildcards, log) -> None:
    """Rule summary_page: results/summary.md and .html of the default target."""
    from lmbias.benchmarks import catalog
    from lmbias.metrics.summary_page import write_summary_pages

    # a benchmark no definition measures (a dataset read by a corpus only, e.g. gap) has no headline
    definitions = catalog.definitions()
    headlines = {b: definitions[m].headlines for b, m in params.datasets.items() if m in definitions}
    with job_log(log[0]):
        write_summary_pages(list(input.summaries), headlines, list(input.paired), output.md, output.html)


def paired_comparison(input, output, params, wildcards, log) -> None:
    """Rule paired_comparison: the paired pre/post test of one benchmark between two (model, method) pairs."""
    from lmbias.jobs.comparisons import paired_comparison_job

    with job_log(log[0]):
        paired_comparison_job(
            name=wildcards.comparison,
            entry=params.comparison,
            benchmark_entry=params.benchmark,
            before_paths=list(input.before),
            after_paths=list(input.after),
            output_path=output[0],
        )


def paper_table(input, output, params, wildcards, log) -> None:
    """Rules paper_table and paper_settings_table (whose params have no lm_benchmarks or readings)."""
    from lmbias.papers.jobs import paper_table_job

    with job_log(log[0]):
        paper_table_job(
            wildcards.paper,
            wildcards.table,
            input.published,
            input.summaries,
            params.pairs,
            output,
            params.left_out,
            lm_benchmarks=params.get("lm_benchmarks", []),
            readings=params.get("readings", {}),
        )


def paper_figure(input, output, params, wildcards, log) -> None:
    """Rule paper_figure: one paper figure (png and svg)."""
    from lmbias.papers.jobs import paper_figure_job

    with job_log(log[0]):
        paper_figure_job(
            wildcards.paper,
            wildcards.figure,
            input.summaries,
            params.runs,
            input.models,
            output.png,
            params.families,
            readings=params.readings,
        )
