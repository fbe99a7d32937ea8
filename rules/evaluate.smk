# Scoring (expensive forward passes, cached per model/method/seed/benchmark) and metrics (cheap,
# recomputed from the cached scores when a metric option changes: one job per model/method/seed computes
# every benchmark's rows into seed{k}/metrics.parquet, which summaries read; metrics/{benchmark}.parquet is
# one benchmark's rows, built on request). A method with a model folder
# (rules/train.smk) is scored through lmbias.engine.method_folders.load_method_model; pretrained and online
# score the base model, self_debias the base model behind its prefix (lmbias.engine.self_debias). Every scoring and metric job of a benchmark (and every fine-tuning or SentenceDebias
# job) reads its library modules through one fingerprint file (results/library/{library}.sha256), rewritten
# when one of them is edited: one input per job instead of six to ten keeps a large DAG's build fast.
#
# The metric jobs and the fingerprints are cheap: they run inside Snakemake's process (`run:`, one call of
# lmbias.workflow.jobs, which imports the job's module when the first one runs and logs through
# lmbias.job_runtime.job_log), and on a cluster on the submit host (localrule). See docs/development/index.md,
# "Jobs in Snakemake's process".


rule library_fingerprint:
    input:
        library_fingerprint_sources,
    output:
        "results/library/{library}.sha256",
    log:
        "logs/library/{library}.log",
    localrule: True
    run:
        with job_log(log[0]):
            write_source_fingerprint(input, output[0], workflow.basedir)


rule score_benchmark:
    input:
        # benchmark_items, library, weights (none for hub ids) and method_model (the method's fine-tuned or
        # fitted model folder; none for pretrained and online): one input function, see scoring_inputs.
        unpack(scoring_inputs),
        script="scripts/score_benchmark.py",
    output:
        "results/{model}/{method}/seed{seed}/scores/{benchmark}.parquet",
    log:
        "logs/{model}/{method}/seed{seed}/scores/{benchmark}.log",
        # the job's own timing file: seconds, token budget and halvings, peak RSS and CUDA memory
        # (lmbias.engine.job_timing); Snakemake's benchmark file beside it is rewritten after the job
        timing="benchmarks/{model}/{method}/seed{seed}/scores/{benchmark}.job.tsv",
    benchmark:
        "benchmarks/{model}/{method}/seed{seed}/scores/{benchmark}.tsv"
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        gpu=1,
        # models.<model>.max_tokens: a resource, not a param, since no score depends on it (docs/llms.md)
        max_tokens=scoring_max_tokens,
    params:
        model=model_entry,
        method=method_entry,
        benchmark=benchmark_scoring_slice,
    script:
        "../scripts/score_benchmark.py"


rule compute_seed_metrics:
    input:
        # scores, library fingerprints and metric files of every benchmark the summary holds
        unpack(seed_metric_inputs),
    output:
        "results/{model}/{method}/seed{seed}/metrics.parquet",
    log:
        "logs/{model}/{method}/seed{seed}/metrics.log",
    localrule: True
    params:
        # Only what the metrics read: editing scoring options reruns scoring (and so this), nothing else.
        benchmarks=seed_metric_benchmark_slices,
    run:
        from lmbias.workflow.jobs import compute_seed_metrics

        compute_seed_metrics(input, output, params, wildcards, log)


rule compute_metric:
    input:
        unpack(metric_inputs),
    output:
        "results/{model}/{method}/seed{seed}/metrics/{benchmark}.parquet",
    log:
        "logs/{model}/{method}/seed{seed}/metrics/{benchmark}.log",
    localrule: True
    params:
        # Only what the metric reads: editing scoring options reruns scoring (and so this), nothing else.
        benchmark=metric_benchmark_slice,
    run:
        from lmbias.workflow.jobs import compute_metric

        compute_metric(input, output, params, wildcards, log)
