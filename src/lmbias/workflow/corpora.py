"""The counterfactual corpora a config builds (rules/corpora.smk), what their jobs read, and the check that a
method's `corpus` is one of them. The jobs themselves are lmbias.corpora.jobs'."""

from __future__ import annotations

import re

from lmbias.corpora import jobs as corpus_jobs
from lmbias.errors import ConfigError


def corpora_config(config: dict) -> dict:
    """config.yaml's `corpora` block ({} when unset)."""
    return config.get("corpora") or {}


def gap_options(config: dict) -> dict:
    return corpora_config(config).get("gap") or {}


def ontonotes_options(config: dict) -> dict:
    return corpora_config(config).get("ontonotes") or {}


def corpora_with_interventions(config: dict) -> list[str]:
    """The corpora with an `interventions` block, sorted: the values the {corpus} wildcard takes."""
    return sorted(c for c, e in corpora_config(config).items() if (e or {}).get("interventions"))


def intervention_names(config: dict) -> list[str]:
    """Every configured intervention name (a `{swap_rate}` template as written), sorted."""
    corpora = corpora_config(config)
    return sorted({n for c in corpora_with_interventions(config) for n in corpora[c]["interventions"]})


def library(*modules: str) -> list[str]:
    """The library files a corpus job imports (Snakemake does not track imports): the shared ones and `modules`."""
    return ["src/lmbias/corpora/jobs.py", "src/lmbias/corpora/nlp.py", "src/lmbias/io.py", "src/lmbias/errors.py"] + [
        f"src/lmbias/corpora/{m}.py" for m in modules
    ]


def pattern(names) -> str:
    """A regex matching exactly the given names (never matches when there are none)."""
    names = sorted(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


def intervention(config: dict, corpus: str, name: str) -> tuple[str, dict]:
    """(config key, entry) of an intervention file: its own entry or a `{swap_rate}` template's, filled in."""
    entries = (corpora_config(config).get(corpus) or {}).get("interventions") or {}
    return corpus_jobs.resolve_intervention(entries, name, f"corpora.{corpus}.interventions")


def intervention_inputs(config: dict, corpus: str, name: str, wordlists: list[str]) -> dict:
    """Inputs of an intervention job: the corpus' sentences, the name and word lists its entry selects (defaults
    filled in), the shipped word lists and the library."""
    key, entry = intervention(config, corpus, name)
    entry = corpus_jobs.check_intervention(entry, key)  # defaults filled in
    return {
        "sentences": f"results/corpora/{corpus}/sentences.parquet",
        **corpus_jobs.lexicon_inputs(entry["names"], entry["wordlist"]),
        "wordlists": wordlists,
        "library": library("augment", "counterfactual", "swap_lexicon", "swap_rules", "swap_sentence", "hall_maudslay"),
    }


def gpr_variant_options(config: dict, gpr: str) -> dict:
    """The options of GPR file stem `gpr` (gpr or gpr-<variant>): the variant's keys over corpora.ontonotes.gpr."""
    return corpus_jobs.gpr_options(ontonotes_options(config).get("gpr"), corpus_jobs.gpr_stem_variant(gpr))


def gpr_inputs(config: dict, gpr: str, wordlists: list[str]) -> dict:
    """Sentences, the word lists of the GPR file's `wordlist` (GN-GloVe's through the data rules) and the library."""
    opts = gpr_variant_options(config, gpr)
    return {
        "sentences": "results/corpora/ontonotes/sentences.parquet",
        **corpus_jobs.lexicon_inputs(False, opts["wordlist"]),
        "wordlists": wordlists,
        "library": library(
            "gpr", "anonymise", "conll", "coref", "counterfactual", "swap_lexicon", "swap_rules", "swap_sentence"
        ),
    }


def gpr_stems(config: dict) -> list[str]:
    """The GPR file stems the {gpr} wildcard takes: gpr and gpr-<variant> of every configured variant."""
    return ["gpr"] + [f"gpr-{v}" for v in corpus_jobs.gpr_variants(ontonotes_options(config).get("gpr"))]


def conll_files(config: dict) -> list[str]:
    """The CoNLL files of corpora.ontonotes.path; a ConfigError naming that key when it is unset (raised only
    when a GPR file is asked for)."""
    return [str(p) for p in corpus_jobs.ontonotes_files(ontonotes_options(config))]


def swap_rates_in_use(config: dict) -> list[float]:
    """Every swap rate a models.*.training or methods.*.training block names (what a template builds for
    `snakemake corpora`)."""
    blocks = [e.get("training") or {} for e in list(config["models"].values()) + list(config["methods"].values())]
    return sorted({float(b["swap_rate"]) for b in blocks if b.get("swap_rate") is not None})


def intervention_files(config: dict, corpus: str) -> list[str]:
    """The corpus' intervention files: each named entry's, and a template's for every swap rate in use."""
    out = []
    for name in corpora_config(config)[corpus]["interventions"]:
        if corpus_jobs.is_template(name):
            out += [
                f"results/corpora/{corpus}/"
                f"{name.replace(corpus_jobs.SWAP_RATE_FIELD, corpus_jobs.format_swap_rate(r))}.parquet"
                for r in swap_rates_in_use(config)
            ]
        else:
            out.append(f"results/corpora/{corpus}/{name}.parquet")
    return list(dict.fromkeys(out))


def method_corpus_files(config: dict) -> list[str]:
    """The corpus files a method's `corpus` may name as written (templates aside, see check_method_corpus)."""
    corpora = corpora_config(config)
    files = ["results/corpora/gap/sentences.parquet"] if corpora.get("gap") else []
    for corpus in corpora_with_interventions(config):
        files += [f"results/corpora/{corpus}/{name}.parquet" for name in corpora[corpus]["interventions"]]
    return files + corpus_jobs.gpr_files(ontonotes_options(config).get("gpr")) + corpus_jobs.bartl_corpus_files(corpora)


def check_method_corpus(config: dict, method: str, path: str) -> None:
    """ConfigError naming methods.<method>.corpus unless `path` is a corpus this config builds: a named file, or
    a `{swap_rate}` template's file."""
    known = method_corpus_files(config)
    if path in known:
        return
    match = re.fullmatch(r"results/corpora/([^/]+)/([^/]+)\.parquet", path)
    entries = (corpora_config(config).get(match.group(1)) or {}).get("interventions") or {} if match else {}
    templated = [n for n in entries if corpus_jobs.is_template(n)]
    if not templated:
        raise ConfigError(
            f"methods.{method}.corpus: {path!r} is not a corpus this config builds; configured: {', '.join(known)}"
        )
    try:
        corpus_jobs.resolve_intervention(entries, match.group(2), f"corpora.{match.group(1)}.interventions")
    except ConfigError as error:
        raise ConfigError(
            f"methods.{method}.corpus: {path!r} is not a corpus this config builds ({error}); "
            f"configured: {', '.join(known)}"
        ) from None
