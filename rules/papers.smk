# The papers' tables and figures from our run, beside their published numbers (lmbias.papers).
#
#   results/papers/{paper}/{table}.parquet, .md, .html   rule paper_table (rule paper_settings_table for
#                                                        hyper-parameter tables such as Table 12)
#   results/plots/{paper}/{figure}.png, .svg             rule paper_figure (lmbias.papers.figures.FIGURES)
#   paper_manela2021, paper_bartl2020, paper_lu2018, paper_over_debiasing, paper_meade2022
#                                                        every table and figure of a paper
#   paper_llm_gender                                     our own grid laid out like a paper (no published
#                                                        numbers): open decoders x LoRA and post-hoc methods
#
# config.yaml `papers:` names each paper's models and methods; their cross product, less the pairs a
# family cannot run, are the pairs its tables read. Its `readings` ({benchmark: entry}) name the authors'
# computation a column reads (e.g. crows_pairs-biasbench for Meade et al.'s CrowS-Pairs column): the pairs'
# summaries hold those entries (lmbias.workflow.selection) and the tables read them. A table reads only the summaries of the pairs whose
# method kind it shows, and its params are only those pairs, so editing one method reruns that method's
# jobs and the tables and figures that show it.
#
# Tables and figures are cheap: they run inside Snakemake's process (`run:`, one call of lmbias.workflow.jobs,
# which imports lmbias.papers.jobs when the first one runs and logs through lmbias.job_runtime.job_log), and on
# a cluster on the submit host (localrule). See docs/development/index.md, "Jobs in Snakemake's process".


include: "papers_helpers.smk"


localrules:
    paper_manela2021,
    paper_bartl2020,
    paper_lu2018,
    paper_over_debiasing,
    paper_meade2022,
    paper_llm_gender,


wildcard_constraints:
    paper=_papers_pattern(_PAPERS),


rule paper_manela2021:
    input:
        lambda wildcards: paper_targets("manela2021"),


rule paper_bartl2020:
    input:
        lambda wildcards: paper_targets("bartl2020"),


rule paper_lu2018:
    input:
        lambda wildcards: paper_targets("lu2018"),


rule paper_over_debiasing:
    input:
        lambda wildcards: paper_targets("over_debiasing"),


rule paper_meade2022:
    input:
        lambda wildcards: paper_targets("meade2022"),


rule paper_llm_gender:
    input:
        lambda wildcards: paper_targets("llm_gender"),


rule paper_table:
    input:
        unpack(paper_table_inputs),
    output:
        parquet="results/papers/{paper}/{table}.parquet",
        md="results/papers/{paper}/{table}.md",
        html=report(
            "results/papers/{paper}/{table}.html",
            caption="../report/paper_table.rst",
            category="{paper}",
            subcategory="tables",
            labels={"paper": "{paper}", "table": "{table}"},
        ),
    log:
        "logs/papers/{paper}/{table}.log",
    wildcard_constraints:
        table=r"[^/.]+",
    localrule: True
    params:
        pairs=paper_table_pairs,
        caption=paper_table_caption,
        left_out=paper_table_left_out,
        lm_benchmarks=paper_table_lm_benchmarks,
        readings=paper_table_readings,
    run:
        from lmbias.workflow.jobs import paper_table

        paper_table(input, output, params, wildcards, log)


rule paper_settings_table:
    input:
        unpack(paper_table_inputs),
    output:
        parquet="results/papers/{paper}/{table}.parquet",
        md="results/papers/{paper}/{table}.md",
        html=report(
            "results/papers/{paper}/{table}.html",
            caption="../report/settings_table.rst",
            category="{paper}",
            subcategory="tables",
            labels={"paper": "{paper}", "table": "{table}"},
        ),
    log:
        "logs/papers/{paper}/{table}.log",
    wildcard_constraints:
        # the hyper-parameter tables of the transcriptions (lmbias.papers.tables.is_settings_table)
        table=_PAPERS_SETTINGS_PATTERN,
    localrule: True
    params:
        pairs=paper_table_pairs,
        caption=paper_table_caption,
        left_out=paper_table_left_out,
    run:
        from lmbias.workflow.jobs import paper_table

        paper_table(input, output, params, wildcards, log)


ruleorder: paper_settings_table > paper_table


rule paper_figure:
    input:
        unpack(paper_figure_inputs),
    output:
        png=report(
            "results/plots/{paper}/{figure}.png",
            caption="../report/paper_figure.rst",
            category="{paper}",
            subcategory="figures",
            labels={"paper": "{paper}", "figure": "{figure}"},
        ),
        svg="results/plots/{paper}/{figure}.svg",
    log:
        "logs/plots/{paper}/{figure}.log",
    wildcard_constraints:
        figure=r"[^/.]+",
    localrule: True
    params:
        runs=paper_figure_runs,
        families=paper_figure_families,
        readings=paper_figure_readings,
        caption=paper_figure_caption,
    run:
        from lmbias.workflow.jobs import paper_figure

        paper_figure(input, output, params, wildcards, log)
