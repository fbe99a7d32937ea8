# Aggregation: every metric for one model and method, over seeds (mean, std, interval: config `aggregate`),
# with provenance.
#
# Every job here is cheap: it runs inside Snakemake's process (`run:`, one call of lmbias.workflow.jobs, which
# imports the job's module when the first one runs and logs through lmbias.job_runtime.job_log), and on a
# cluster on the submit host (localrule). See docs/development/index.md, "Jobs in Snakemake's process".


rule summarise:
    input:
        metrics=summary_metric_files,
        library="src/lmbias/metrics/summary.py",
    output:
        "results/{model}/{method}/summary.parquet",
    log:
        "logs/{model}/{method}/summary.log",
    localrule: True
    params:
        slices=summary_config_slices,
        left_out=summary_left_out,
        # the interval across seeds: editing it re-summarises, nothing else
        aggregate=aggregate_settings,
    run:
        from lmbias.workflow.jobs import summarise

        summarise(input, output, params, wildcards, log)


# What `snakemake` with no target ends with: one headline number per benchmark, before vs after mitigation,
# for the default target's models and methods and its comparisons (lmbias.metrics.headline). The run
# prints it when it finishes (Snakefile, onsuccess).
rule summary_page:
    input:
        summaries=default_target_summaries(),
        paired=default_target_comparisons(),
        library=["src/lmbias/metrics/headline.py", "src/lmbias/metrics/summary_page.py"],
    output:
        md="results/summary.md",
        html="results/summary.html",
    log:
        "logs/summary_page.log",
    localrule: True
    params:
        # our benchmarks' headlines; a peer reading (papers.<paper>.readings) is a paper table's, not a headline
        datasets=lambda wildcards: {
            b: catalog.measure_of(entry)
            for b, entry in config["benchmarks"].items()
            if not _readings_grid.is_reading(entry)
        },
    run:
        from lmbias.workflow.jobs import summary_page

        summary_page(input, output, params, wildcards, log)


# Pre/post paired test of one benchmark between two (model, method) pairs (config.yaml `comparisons`).
rule paired_comparison:
    input:
        unpack(comparison_inputs),
    output:
        "results/tables/paired/{comparison}.parquet",
    log:
        "logs/tables/paired/{comparison}.log",
    localrule: True
    params:
        comparison=comparison_entry,
        benchmark=comparison_benchmark_slice,
    run:
        from lmbias.workflow.jobs import paired_comparison

        paired_comparison(input, output, params, wildcards, log)


rule reject_unknown_comparison:
    input:
        reject_unknown_comparison,
    output:
        "results/tables/paired/{comparison}.parquet",
    wildcard_constraints:
        comparison=constraints.unknown_comparison(config),


# Summary paths naming a model or method that config.yaml does not define match only these rules, so the
# user gets "unknown model 'X' (configured: ...)" instead of Snakemake's generic "no rule to produce".
rule reject_unknown_model:
    input:
        lambda wc: reject_unknown_target(wc.model, wc.method),
    output:
        "results/{model}/{method}/summary.parquet",
    wildcard_constraints:
        model=constraints.unknown_model(config),
        method=r"[^/]+",


rule reject_unknown_method:
    input:
        lambda wc: reject_unknown_target(wc.model, wc.method),
    output:
        "results/{model}/{method}/summary.parquet",
    wildcard_constraints:
        method=constraints.unknown_method(config),


ruleorder: reject_unknown_model > reject_unknown_method


# The same for scores/ and metrics/ paths: one lookahead over the rest of the path admits only the
# (model, method, seed, benchmark) combinations the config defines; anything else matches this rule.
rule reject_unknown_result:
    input:
        reject_unknown_result,
    output:
        "results/{model}/{method}/seed{seed}/{kind}/{benchmark}.parquet",
    wildcard_constraints:
        model=constraints.unknown_result_model(config),
        method=r"[^/]+",
        seed=r"[^/]*",
        kind="scores|metrics",
        benchmark=r"[^/]+",


ruleorder: reject_unknown_result > score_benchmark
ruleorder: reject_unknown_result > compute_metric


# And for a seed's metrics.parquet: only configured (model, method, seed) combinations reach compute_seed_metrics.
rule reject_unknown_seed_metrics:
    input:
        reject_unknown_seed_metrics,
    output:
        "results/{model}/{method}/seed{seed}/metrics.parquet",
    wildcard_constraints:
        model=constraints.unknown_seed_metrics_model(config),
        method=r"[^/]+",
        seed=r"[^/]*",


ruleorder: reject_unknown_seed_metrics > compute_seed_metrics


rule reject_unknown_model_folder:
    input:
        reject_unknown_model_folder,
    output:
        "resources/models/{model}",
    wildcard_constraints:
        model=constraints.unknown_model_folder(config),


# And for a seed's scores.json: only configured (model, method, seed) combinations reach score_model.
rule reject_unknown_seed_scores:
    input:
        reject_unknown_seed_scores,
    output:
        "results/{model}/{method}/seed{seed}/scores.json",
    wildcard_constraints:
        model=constraints.unknown_seed_scores_model(config),
        method=r"[^/]+",
        seed=r"[^/]*",


ruleorder: reject_unknown_seed_scores > score_model
