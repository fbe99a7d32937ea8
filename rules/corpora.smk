# Counterfactual corpora: model-independent, built once, reused by every model (lmbias.corpora.jobs).
#
#   results/corpora/gap/sentences.parquet           rule corpus_gap_sentences   (GAP contexts -> sentences)
#   results/corpora/gap/{intervention}.parquet      rule corpus_intervention    (one per corpora.gap.interventions entry;
#                                                   a cds-{swap_rate} template builds cds-<rate> for any rate)
#   results/corpora/ontonotes/sentences.parquet     rule corpus_ontonotes       (CoNLL-2012, names -> [E1], [E2], ...)
#   results/corpora/ontonotes/gpr-U.parquet, gpr-A.parquet   rule corpus_gpr    (Manela et al.'s GPR task)
#   results/corpora/ontonotes/gpr-<variant>-U.parquet, -A     rule corpus_gpr    (one per corpora.ontonotes.gpr.variants
#                                                   entry: its keys over corpora.ontonotes.gpr, e.g. gpr-manela)
#   results/corpora/bartl2020/gap-flipped.parquet   rule corpus_bartl2020       (Bartl et al.'s gap_flipped.tsv -> sentences)
#
# Each job's params are the config slice it reads: editing one intervention's swap_rate (or its
# protect_proper_noun_clusters) rebuilds that intervention only; the library modules a job imports are
# inputs (Snakemake does not track imports). Gold coreference (GAP's pronoun-name links, CoNLL clusters with
# a proper noun) always travels in the sentence tables; the interventions' option decides whether it is used.

from pathlib import Path as _CorporaPath

from lmbias.corpora import jobs as _corpora


include: "corpora_helpers.smk"


_CORPORA = config.get("corpora") or {}
_corpora.check_corpora_config(_CORPORA, config.get("benchmarks") or {})
_CORPORA_SCRIPT = "scripts/build_corpus.py"


# Corpora with interventions, and every configured intervention name: the only values the wildcards take.
_CORPORA_WITH_INTERVENTIONS = _corpora_plan.corpora_with_interventions(config)
_CORPORA_INTERVENTIONS = _corpora_plan.intervention_names(config)
_CORPORA_WORDLISTS = sorted(
    f"resources/wordlists/{p.name}" for p in _CorporaPath(workflow.basedir, "resources", "wordlists").glob("*.tsv")
)


localrules:
    corpora,


rule corpora:
    input:
        corpora_targets(),
        _corpora.bartl_corpus_files(_CORPORA),


rule corpus_gap_sentences:
    input:
        contexts=lambda wildcards: f"results/data/{_corpora_gap().get('benchmark', 'gap')}.parquet",
        library=_corpora_lib("sentences", "coref", "conll") + ["src/lmbias/parsers/common.py"],
        script=_CORPORA_SCRIPT,
    output:
        "results/corpora/gap/sentences.parquet",
    log:
        "logs/corpora/gap/sentences.log",
    benchmark:
        "benchmarks/corpora/gap/sentences.tsv"
    conda:
        "../envs/lmbias.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        # The splitting options only: editing an intervention does not re-split.
        options={k: v for k, v in _corpora_gap().items() if k != "interventions"},
        spacy_model=config["spacy_model"],
    script:
        "../scripts/build_corpus.py"


rule corpus_intervention:
    input:
        unpack(_corpora_intervention_inputs),
        script=_CORPORA_SCRIPT,
    output:
        "results/corpora/{corpus}/{intervention}.parquet",
    log:
        "logs/corpora/{corpus}/{intervention}.log",
    benchmark:
        "benchmarks/corpora/{corpus}/{intervention}.tsv"
    wildcard_constraints:
        corpus=_corpora_pattern(_CORPORA_WITH_INTERVENTIONS),
        intervention=_corpora.intervention_pattern(_CORPORA_INTERVENTIONS),
    conda:
        "../envs/lmbias.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        entry=_corpora_intervention_entry,
        key=_corpora_intervention_key,
        spacy_model=config["spacy_model"],
    script:
        "../scripts/build_corpus.py"


rule corpus_ontonotes:
    input:
        conll=_corpora_conll_files,
        library=_corpora_lib("conll", "anonymise", "coref") + ["src/lmbias/parsers/common.py"],
        script=_CORPORA_SCRIPT,
    output:
        "results/corpora/ontonotes/sentences.parquet",
    log:
        "logs/corpora/ontonotes/sentences.log",
    benchmark:
        "benchmarks/corpora/ontonotes/sentences.tsv"
    conda:
        "../envs/lmbias.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    params:
        # Reading and anonymising only: editing corpora.ontonotes.gpr does not re-read the corpus.
        options={k: v for k, v in _corpora_ontonotes().items() if k != "gpr"},
        spacy_model=config["spacy_model"],
    script:
        "../scripts/build_corpus.py"


rule corpus_gpr:
    input:
        unpack(_corpora_gpr_inputs),
        script=_CORPORA_SCRIPT,
    output:
        u="results/corpora/ontonotes/{gpr}-U.parquet",
        a="results/corpora/ontonotes/{gpr}-A.parquet",
    log:
        "logs/corpora/ontonotes/{gpr}.log",
    benchmark:
        "benchmarks/corpora/ontonotes/{gpr}.tsv"
    wildcard_constraints:
        gpr=_corpora_pattern(_corpora_plan.gpr_stems(config)),
    conda:
        "../envs/lmbias.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    params:
        # The variant's own options over the base ones: editing one variant rebuilds that variant only.
        options=_corpora_gpr_options,
        spacy_model=config["spacy_model"],
    script:
        "../scripts/build_corpus.py"


rule corpus_bartl2020:
    input:
        tsv=_corpora.BARTL_DATA,
        library=_corpora_lib("bartl", "sentences", "coref", "conll"),
        script=_CORPORA_SCRIPT,
    output:
        "results/corpora/bartl2020/gap-flipped.parquet",
    log:
        "logs/corpora/bartl2020/gap-flipped.log",
    benchmark:
        "benchmarks/corpora/bartl2020/gap-flipped.tsv"
    conda:
        "../envs/lmbias.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        options=_CORPORA.get("bartl2020") or {},
        spacy_model=config["spacy_model"],
    script:
        "../scripts/build_corpus.py"
