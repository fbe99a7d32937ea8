# Scoring (expensive forward passes) and metrics (cheap, recomputed from the cached scores when a metric option
# changes). Scoring: one job per model/method/seed loads the model once and scores every benchmark of its
# summary (score_model), one job per benchmark scores a benchmark asked for on its own (score_benchmark); each
# score file is cached by its score key, and both jobs keep a file that holds it (docs/scoring-jobs.md).
# Metrics: one job per model/method/seed computes every benchmark's rows into seed{k}/metrics.parquet, which
# summaries read; metrics/{benchmark}.parquet is one benchmark's rows, built on request from its own score file.
# A method with a model folder (rules/train.smk) is scored through
# lmbias.engine.method_folders.load_method_model; pretrained and online score the base model, self_debias the
# base model behind its prefix (lmbias.engine.self_debias). Every scoring and metric job of a benchmark (and
# every fine-tuning or SentenceDebias job) reads its library modules through one fingerprint file
# (results/library/{library}.sha256), rewritten when one of them is edited: one input per job instead of six
# to ten keeps a large DAG's build fast.
#
# The metric jobs, the scoring specs and the fingerprints are cheap: they run inside Snakemake's process (`run:`,
# one call of lmbias.workflow.jobs, which imports the job's module when the first one runs and logs through
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


# What scores depend on from the config, in small files the scoring jobs read (lmbias.workflow.scoring_specs):
# the model entry, one file per model; a benchmark's scoring slice with the method entry, one file per (scoring
# variant: the method's kind, or a Self-Debias method; benchmark). An edit rewrites the edited spec alone, so
# `snakemake -n` names that benchmark (or model) as the scoring jobs' reason, and a score file written by
# score_model is seen as older than the edit by score_benchmark too. Params: a short digest (the rerun trigger
# and the printed reason) and the spec itself, kept out of Snakemake's records.
rule scoring_model_spec:
    output:
        "results/scoring/{model}.json",
    log:
        "logs/scoring/{model}.log",
    localrule: True
    params:
        digest=scoring_model_spec_digest,
        spec=scoring_model_spec_content,
    run:
        from lmbias.workflow.jobs import write_scoring_spec

        write_scoring_spec(output, params, wildcards.model, log)


rule scoring_spec:
    output:
        "results/scoring/{variant}/{benchmark}.json",
    log:
        "logs/scoring/{variant}/{benchmark}.log",
    wildcard_constraints:
        variant=constraints.scoring_variants(config),
    localrule: True
    params:
        digest=scoring_spec_digest,
        spec=scoring_spec_content,
    run:
        from lmbias.workflow.jobs import write_scoring_spec

        write_scoring_spec(output, params, wildcards.benchmark, log)


# Every benchmark a (model, method) summary holds, scored in one job per seed that loads the model once
# (lmbias.jobs.model_scoring, docs/scoring-jobs.md). Its declared output is a manifest; the score files
# (scores/{benchmark}.parquet, rule score_benchmark's outputs) are written beside it, each with its score key
# (lmbias.metrics.score_keys): a rerun keeps every file whose key still holds, so editing one benchmark's
# scoring options rescores that benchmark only. It holds the seed's scoring lock (lmbias.engine.score_lock)
# while it scores, as score_benchmark does, so the two never write one file; its priority starts it first when
# both are ready, and score_benchmark then keeps its file.
rule score_model:
    input:
        # the model's spec, every benchmark's spec, items and library fingerprints, the weights, the method's model
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
    priority: 1
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        gpu=1,
        max_tokens=scoring_max_tokens,
    script:
        "../scripts/score_model.py"


# One benchmark's score file: the only rule whose output it is, so that Snakemake rebuilds a missing one and a
# target that names one benchmark (its scores, its metrics) loads the model for that benchmark alone. update():
# Snakemake keeps the file while the job runs, and the job keeps it when it holds its score key (written by
# score_model, or by this rule for the same config), without loading the model.
rule score_benchmark:
    input:
        # model_spec, spec, benchmark_items, library, weights (none for hub ids), method_model (the method's
        # fine-tuned or fitted model folder; none for pretrained and online): one input function, scoring_inputs.
        unpack(scoring_inputs),
        script="scripts/score_benchmark.py",
    output:
        update("results/{model}/{method}/seed{seed}/scores/{benchmark}.parquet"),
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
    script:
        "../scripts/score_benchmark.py"


# One scorer's classification of one benchmark's cached generations (config.yaml `scorers`, lmbias.workflow.scorers):
# a sequence classifier (toxicity, regard) over BOLD's or HONEST's generated texts, read from their score file, never
# generated again; the metric jobs add its rows to the benchmark's. Params: what classifying reads of the scorer's
# entry (its metric options are the metric jobs' params; its max_tokens a resource).
rule classify_generations:
    input:
        unpack(classify_inputs),
        script="scripts/classify_generations.py",
    output:
        "results/{model}/{method}/seed{seed}/classified/{benchmark}/{scorer}.parquet",
    log:
        "logs/{model}/{method}/seed{seed}/classified/{benchmark}/{scorer}.log",
    benchmark:
        "benchmarks/{model}/{method}/seed{seed}/classified/{benchmark}/{scorer}.tsv"
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        gpu=1,
        max_tokens=scorer_max_tokens,
    params:
        entry=classification_entry,
    script:
        "../scripts/classify_generations.py"


# A scorer given by hub id, fetched once (a localrule, as fetch_hub_model) into <models_dir>/scorers/{scorer}.
rule fetch_hub_scorer:
    output:
        directory(scorers.scorer_folder(config, "{scorer}")),
    log:
        "logs/scorers/{scorer}.log",
    wildcard_constraints:
        scorer=scorers.hub_scorer_pattern(config),
    localrule: True
    conda:
        "../envs/lmbias.yaml"
    params:
        entry=lambda wildcards: {
            k: v for k, v in config["scorers"][wildcards.scorer].items() if k in ("hub_id", "revision", "allow_pickle")
        },
    script:
        "../scripts/fetch_hub_model.py"


rule compute_seed_metrics:
    input:
        # scores, library fingerprints and metric files of every benchmark the summary holds, and the scorers'
        # classifications of its generating benchmarks
        unpack(seed_metric_inputs),
    output:
        "results/{model}/{method}/seed{seed}/metrics.parquet",
    log:
        "logs/{model}/{method}/seed{seed}/metrics.log",
    localrule: True
    params:
        # Only what the metrics read: editing scoring options reruns scoring (and so this), nothing else.
        benchmarks=seed_metric_benchmark_slices,
        scorers=scorer_metric_options,
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
        scorers=scorer_metric_options,
    run:
        from lmbias.workflow.jobs import compute_metric

        compute_metric(input, output, params, wildcards, log)


# BOLD's figure (lmbias.papers.figures_bold): the VADER sentiment of one seed's generations per group, from its
# cached generations; `snakemake results/{model}/{method}/seed{k}/plots/bold_sentiment.svg`.
rule bold_sentiment_figure:
    input:
        # the benchmark's score file (rule score_benchmark), as its metrics read it
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
