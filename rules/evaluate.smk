# Scoring (expensive forward passes: one job per model/method/seed loads the model once and scores every
# benchmark of its summary, each score file cached by its score key) and metrics (cheap,
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


# Every benchmark a (model, method) summary holds, scored in one job per seed that loads the model once
# (lmbias.engine.model_scoring, docs/scoring-jobs.md). Its declared output is a manifest; the score files
# (scores/{benchmark}.parquet, the same paths score_benchmark writes) are not outputs, since Snakemake would
# delete them before a rerun: each carries a score key (lmbias.metrics.score_keys), and a rerun keeps every
# file whose key still holds, so editing one benchmark's scoring options rescores that benchmark only.
rule score_model:
    input:
        # every benchmark's items and library fingerprints, the weights and the method's model folder
        unpack(model_scoring_inputs),
        script="scripts/score_model.py",
    output:
        "results/{model}/{method}/seed{seed}/scores.json",
    log:
        "logs/{model}/{method}/seed{seed}/scores.log",
        # one row for loading the model, one per benchmark (lmbias.engine.job_timing)
        timing="benchmarks/{model}/{method}/seed{seed}/scores.job.tsv",
    benchmark:
        "benchmarks/{model}/{method}/seed{seed}/scores.tsv"
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        gpu=1,
        max_tokens=scoring_max_tokens,
    params:
        model=model_entry,
        method=method_entry,
        benchmarks=model_benchmark_slices,
    script:
        "../scripts/score_model.py"


# One benchmark's score file on its own (a user asking for that path, or a metric or comparison of a benchmark
# outside the pair's summary): the same file and score key as score_model's, so that job later keeps it.
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


# BOLD's figure (lmbias.papers.figures_bold): the VADER sentiment of one seed's generations per group, from its
# cached generations; `snakemake results/{model}/{method}/seed{k}/plots/bold_sentiment.svg`.
rule bold_sentiment_figure:
    input:
        # the pair's score_model manifest when its summary holds the benchmark, else the score file (as metrics)
        scores=lambda wildcards: metric_inputs(wildcards)["scores"],
        library=["src/lmbias/papers/figures_bold.py", "src/lmbias/metrics/bold.py"],
        script="scripts/bold_figure.py",
    output:
        png="results/{model}/{method}/seed{seed}/plots/{benchmark}_sentiment.png",
        svg="results/{model}/{method}/seed{seed}/plots/{benchmark}_sentiment.svg",
    log:
        "logs/{model}/{method}/seed{seed}/plots/{benchmark}_sentiment.log",
    wildcard_constraints:
        benchmark="|".join(re.escape(b) for b, e in config["benchmarks"].items() if e.get("dataset") == "bold")
        or "(?!)",
    conda:
        "../envs/lmbias.yaml"
    params:
        metric=metric_benchmark_slice,
    script:
        "../scripts/bold_figure.py"
