"""Jobs behind rules/corpora.smk: model-independent corpora under results/corpora/, built once.

    results/corpora/gap/sentences.parquet          GAP contexts split into sentences (lmbias.corpora.sentences)
    results/corpora/gap/{intervention}.parquet     one counterfactual variant per `corpora.gap.interventions`
                                                   entry (CDA: originals + swapped copies; CDS: in-place)
    results/corpora/ontonotes/sentences.parquet    CoNLL-2012 sentences, person names -> [E1], [E2], ...
    results/corpora/ontonotes/gpr-U.parquet        GPR task, unaugmented (Manela et al.'s BERT-U data)
    results/corpora/ontonotes/gpr-A.parquet        GPR task, plus gender-swapped copies (BERT-A data)
    results/corpora/ontonotes/gpr-<variant>-U.parquet, -A.parquet   one pair per corpora.ontonotes.gpr.variants
                                                   entry (e.g. gpr-manela-U: Manela et al.'s code's recipe)
    results/corpora/bartl2020/gap-flipped.parquet  Bartl et al.'s gap_flipped.tsv in sentences (lmbias.corpora.bartl)

Each function takes paths and the config slice its rule passes as `params:` (never the whole
config), writes its output atomically and returns the counts it logged.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lmbias.errors import ConfigError
from lmbias.io import read_table, write_table_atomic

log = logging.getLogger(__name__)

GAP_DEFAULTS = {"splitter": "parser", "batch_size": 128}
ONTONOTES_DEFAULTS = {"pattern": "**/*gold_conll", "ner": "auto"}
# Word lists by name, each paper's own as its default: lu2018 = Lu et al.'s 124 pairs (Hall Maudslay et
# al.'s default list, used by the over-debiasing paper's CDS) for CDA/CDS; winobias = Zhao et al.'s
# generalized_swaps + extra_gendered_words (Manela et al.) for GPR; merged = every list (first wins).
WORDLISTS = ("lu2018", "winobias", "merged")
# protect_proper_noun_clusters (Lu et al.'s rule, lmbias.corpora.coref) is off for GPR: Manela et al. (3.3)
# anonymise the names first and then replace "all possessive and personal pronouns".
# The other GPR keys default to this project's task (lmbias.corpora.gpr); Manela et al.'s code's choices are
# examples: accumulated, other_pronouns: masked, pronouns: [he, she, her, his, him], deduplicate: true,
# split_by: example, seed: 2018, wordlist: gn_glove (the shipped `variants.manela`).
GPR_DEFAULTS = {
    "intervention": "grammatical",
    "validation_fraction": 0.2,
    "seed": 0,
    "wordlist": "winobias",
    "protect_proper_noun_clusters": False,
    "examples": "sentence",
    "max_chars": 512,
    "other_pronouns": "visible",
    "pronouns": ["he", "him", "his", "himself", "she", "her", "hers", "herself"],
    "deduplicate": False,
    "split_by": "document",
}
# GPR only: GN-GloVe's male/female word lists (Manela et al.'s -A map, lmbias.corpora.gpr.gn_glove_lexicon).
GPR_WORDLISTS = WORDLISTS + ("gn_glove",)
GN_GLOVE_INPUTS = {
    "gn_glove_male": "resources/data/gn_glove/male_word_file.txt",
    "gn_glove_female": "resources/data/gn_glove/female_word_file.txt",
}
GPR_KEY = "corpora.ontonotes.gpr"
GPR_VARIANT = re.compile(r"[a-z0-9][a-z0-9_]*")
PROTECT_KEY = "protect_proper_noun_clusters"
# Who swaps the words: lmbias (lmbias.corpora.counterfactual.Swapper, default) or hall_maudslay (Hall Maudslay et
# al.'s substitutor as the over-debiasing authors run it, lmbias.corpora.hall_maudslay).
SUBSTITUTORS = ("lmbias", "hall_maudslay")
# Interventions may not take these names: they are other files of the corpus folder.
RESERVED_INTERVENTIONS = ("sentences", "gpr-U", "gpr-A")


def build_gap_sentences(
    contexts: str | os.PathLike, out: str | os.PathLike, options: Mapping, spacy_model: str
) -> dict:
    """results/data/gap.parquet -> results/corpora/gap/sentences.parquet."""
    from lmbias.corpora.sentences import SENTENCES_SCHEMA, gap_sentences, load_splitter

    opts = {**GAP_DEFAULTS, **{k: v for k, v in options.items() if k in GAP_DEFAULTS}}
    nlp = load_splitter(spacy_model, opts["splitter"])
    table, counts = gap_sentences(read_table(contexts), nlp, batch_size=opts["batch_size"], source=contexts)
    write_table_atomic(table, out, SENTENCES_SCHEMA)
    return counts


COUNTERFACTUAL_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("sentence_id", pa.int32()),
        ("split", pa.string()),
        ("text", pa.string()),
        ("is_counterfactual", pa.bool_()),  # CDA: the swapped copy; CDS: a sentence of a swapped document
        ("changed", pa.bool_()),  # its text differs from the original sentence
    ]
)
METHODS = ("cda", "cds")

# Raw word lists every swapper reads (resources/data/<dataset>/<file>, fetched by rules/data.smk), plus the
# CDS name pairs for interventions with names: true. Keys are the rule's input names.
LEXICON_INPUTS = {
    "cds_pairs": "resources/data/cds/cda_default_pairs.json",
    "winobias_generalized_swaps": "resources/data/winobias/generalized_swaps.txt",
    "winobias_extra_gendered_words": "resources/data/winobias/extra_gendered_words.txt",
}
NAMES_INPUT = {"name_pairs": "resources/data/cds/names_pairs_1000_scaled.json"}
LU2018_INPUT = {"lu2018_pairs": "resources/wordlists/lu2018_gender_pairs.tsv"}
WINOBIAS_INPUTS = {k: v for k, v in LEXICON_INPUTS.items() if k.startswith("winobias_")}


def lexicon_inputs(names: bool, wordlist: str = "merged") -> dict[str, str]:
    """The word-list files a swapper reads (rule inputs; the WinoBias lists through the data rules)."""
    lists = {"lu2018": LU2018_INPUT, "winobias": WINOBIAS_INPUTS, "merged": LEXICON_INPUTS, "gn_glove": GN_GLOVE_INPUTS}
    if wordlist not in lists:
        raise ConfigError(f"wordlist: must be one of {list(GPR_WORDLISTS)}, got {wordlist!r}")
    return {**lists[wordlist], **(NAMES_INPUT if names else {})}


def lexicon_kwargs(files: Mapping[str, str]) -> dict:
    """Rule inputs (keys of lexicon_inputs) -> keyword arguments of counterfactual.load_lexicon."""
    kwargs = {}
    if "gn_glove_male" in files:  # GN-GloVe's lists alone (lmbias.corpora.gpr.gn_glove_lexicon)
        return {"gn_glove": (files["gn_glove_male"], files["gn_glove_female"])}
    if "lu2018_pairs" in files:  # Lu et al.'s list alone
        kwargs["wordlists"] = [files["lu2018_pairs"]]
    if "cds_pairs" in files:
        kwargs["cds_pairs"] = files["cds_pairs"]
    if "winobias_generalized_swaps" in files:
        if "cds_pairs" not in files:  # the WinoBias lists alone
            kwargs["wordlists"] = []
        kwargs["winobias_dir"] = str(Path(files["winobias_generalized_swaps"]).parent)
        if Path(files["winobias_extra_gendered_words"]).parent != Path(files["winobias_generalized_swaps"]).parent:
            raise ConfigError("the two WinoBias word lists must sit in one folder (resources/data/winobias/)")
    if files.get("name_pairs"):
        kwargs["names"] = files["name_pairs"]
    return kwargs


def check_intervention(entry: Mapping, key: str) -> dict:
    """One `corpora.<corpus>.interventions.<name>` entry with defaults filled in; ConfigError naming the key."""
    from lmbias.corpora.augment import SELECTIONS, SWAP_UNITS, check_swap_rate
    from lmbias.corpora.counterfactual import INTERVENTIONS

    method = entry.get("method")
    if method not in METHODS:
        raise ConfigError(f"{key}.method: must be one of {list(METHODS)}, got {method!r}")
    if entry.get("intervention") not in INTERVENTIONS:
        raise ConfigError(
            f"{key}.intervention: must be one of {list(INTERVENTIONS)}, got {entry.get('intervention')!r}"
        )
    out = {"names": False, "batch_size": 256, "wordlist": "lu2018", "substitutor": "lmbias", **entry}
    if out["substitutor"] not in SUBSTITUTORS:
        raise ConfigError(f"{key}.substitutor: must be one of {list(SUBSTITUTORS)}, got {out['substitutor']!r}")
    if out["substitutor"] == "hall_maudslay":
        _check_hall_maudslay(out, key)
    _check_protect(out, key)
    if out["wordlist"] not in WORDLISTS:
        raise ConfigError(f"{key}.wordlist: must be one of {list(WORDLISTS)}, got {out['wordlist']!r}")
    if method == "cds":
        if "swap_rate" not in entry:
            raise ConfigError(f"{key}.swap_rate: a cds intervention needs a swap_rate in (0, 1]")
        check_swap_rate(entry["swap_rate"], f"{key}.swap_rate")
        out.setdefault("seed", 0)
        out.setdefault("swap_unit", "sentence")  # the over-debiasing paper's definition (section 7.3)
        if out["swap_unit"] not in SWAP_UNITS:
            raise ConfigError(f"{key}.swap_unit: must be one of {list(SWAP_UNITS)}, got {out['swap_unit']!r}")
        # random: a seeded draw; prefix: the first int(swap_rate * N) in file order (the DA-Gender code)
        out.setdefault("selection", "random")
        if out["selection"] not in SELECTIONS:
            raise ConfigError(f"{key}.selection: must be one of {list(SELECTIONS)}, got {out['selection']!r}")
    else:
        for extra in ("swap_rate", "seed", "swap_unit", "selection"):
            if extra in entry:
                raise ConfigError(f"{key}.{extra}: only cds interventions take a {extra} (CDA keeps every sentence)")
    return out


def _check_hall_maudslay(opts: dict, key: str) -> None:
    """Their substitutor has its own rules: one word list (theirs, lu2018), no gold coreference."""
    if opts["intervention"] != "grammatical":
        raise ConfigError(
            f"{key}.intervention: the hall_maudslay substitutor decides his/her by the tag "
            f"(grammatical), got {opts['intervention']!r}"
        )
    if opts["wordlist"] != "lu2018":
        raise ConfigError(
            f"{key}.wordlist: the hall_maudslay substitutor reads its own list, lu2018 "
            f"(cda_default_pairs.json), got {opts['wordlist']!r}"
        )
    if opts.setdefault(PROTECT_KEY, False) is not False:
        raise ConfigError(
            f"{key}.{PROTECT_KEY}: the hall_maudslay substitutor keeps nothing for gold coreference; set it false"
        )


def _check_protect(opts: dict, key: str) -> None:
    """Lu et al.'s proper-noun rule is part of the grammatical intervention: on by default there, never with
    naive (the dictionary alone flips every gendered word)."""
    grammatical = opts.get("intervention") == "grammatical"
    value = opts.setdefault(PROTECT_KEY, grammatical)
    if not isinstance(value, bool):
        raise ConfigError(f"{key}.{PROTECT_KEY}: must be true or false, got {value!r}")
    if value and not grammatical:
        raise ConfigError(
            f"{key}.{PROTECT_KEY}: true needs intervention: grammatical (the naive intervention "
            f"flips every gendered word, Lu et al.)"
        )


# An intervention named with "{swap_rate}" (e.g. cds-{swap_rate}) is a template: it builds <name> for any swap
# rate written in Python's shortest float form (cds-0.7.parquet, cds-1.0.parquet), so a swap-rate sweep
# (lmbias.methods.sweeps.expand_sweeps) needs no entry per rate. A plainly named entry wins over a template.
SWAP_RATE_FIELD = "{swap_rate}"
_RATE_REGEX = r"[0-9][0-9.e+-]*"


def is_template(name: str) -> bool:
    return SWAP_RATE_FIELD in name


def format_swap_rate(value) -> str:
    """A swap rate as it appears in file names: Python's shortest round-trip float form (0.7, 1.0)."""
    return repr(float(value))


def intervention_pattern(names) -> str:
    """Regex of the intervention file names `names` (plain names, and templates for any rate)."""
    import re

    parts = []
    for name in sorted(names):
        if is_template(name):
            head, tail = name.split(SWAP_RATE_FIELD)
            parts.append(re.escape(head) + _RATE_REGEX + re.escape(tail))
        else:
            parts.append(re.escape(name))
    return "|".join(parts) if parts else "(?!x)x"


def resolve_intervention(interventions: Mapping, name: str, prefix: str) -> tuple[str, dict]:
    """(config key, entry) of the intervention file `name`: its own entry, or a template's with swap_rate
    filled in from the name. ConfigError naming `prefix` when nothing configured builds it."""
    if name in interventions:
        return f"{prefix}.{name}", dict(interventions[name])
    for template, entry in sorted(interventions.items()):
        if not is_template(template):
            continue
        head, tail = template.split(SWAP_RATE_FIELD)
        if not (name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail)):
            continue
        text = name[len(head) : len(name) - len(tail)]
        try:
            rate = float(text)
        except ValueError:
            continue
        key = f"{prefix}.{template}"
        if format_swap_rate(rate) != text:
            raise ConfigError(
                f"{key}: {name!r} writes the swap rate {text!r} non-canonically; "
                f"the file for that rate is {head}{format_swap_rate(rate)}{tail}"
            )
        if not 0 < rate <= 1:
            raise ConfigError(f"{key}: {name!r} asks for swap rate {text}; it must be in (0, 1]")
        return key, {**entry, "swap_rate": rate}
    raise ConfigError(f"{prefix}: no entry builds {name!r}; configured: {', '.join(sorted(interventions)) or 'none'}")


def check_corpora_config(corpora: Mapping, benchmarks: Mapping) -> None:
    """Cross-checks the schema cannot express; raised before any job runs."""
    gap = corpora.get("gap") or {}
    if gap:
        bench = gap.get("benchmark", "gap")
        if bench not in benchmarks or benchmarks[bench].get("dataset") != "gap":
            raise ConfigError(f"corpora.gap.benchmark: {bench!r} is not a configured benchmark of dataset gap")
    if "ontonotes" in corpora:
        gpr_options((corpora.get("ontonotes") or {}).get("gpr"))
        gpr_variants((corpora.get("ontonotes") or {}).get("gpr"))
    for corpus, entry in corpora.items():
        for name, intervention in ((entry or {}).get("interventions") or {}).items():
            key = f"corpora.{corpus}.interventions.{name}"
            if name in RESERVED_INTERVENTIONS:
                raise ConfigError(f"{key}: the name {name!r} is reserved for another file of the corpus folder")
            if is_template(name):
                if name.count(SWAP_RATE_FIELD) != 1:
                    raise ConfigError(f"{key}: a template names {SWAP_RATE_FIELD} once")
                if intervention.get("method") != "cds":
                    raise ConfigError(
                        f"{key}.method: only cds interventions take a swap rate, so only they may be "
                        f"templates ({SWAP_RATE_FIELD} in the name); got {intervention.get('method')!r}"
                    )
                if "swap_rate" in intervention:
                    raise ConfigError(
                        f"{key}.swap_rate: a template takes its swap rate from the file name; drop this key"
                    )
                intervention = {**intervention, "swap_rate": 1.0}
            check_intervention(intervention, key)


def build_counterfactual(
    sentences: str | os.PathLike,
    out: str | os.PathLike,
    lexicon_files: Mapping[str, str],
    entry: Mapping,
    spacy_model: str,
    key: str = "corpora.gap.interventions",
) -> dict:
    """sentences.parquet -> one CDA or CDS variant (lmbias.corpora.augment) with COUNTERFACTUAL_SCHEMA."""
    from lmbias.corpora.augment import cda_corpus, cds_corpus, protect_from_table

    opts = check_intervention(entry, key)
    full = read_table(sentences)
    table = full.select(["doc_id", "sentence_id", "split", "text"])
    # gold coreference (GAP's pronoun-name links) where the sentences carry it; None: unknown, flip everything
    protect = protect_from_table(full) if opts[PROTECT_KEY] else None
    swapper = make_swapper(lexicon_files, opts["intervention"], opts["names"], spacy_model, opts["substitutor"])
    if opts["method"] == "cda":
        result = cda_corpus(table, swapper, batch_size=opts["batch_size"], protect=protect)
    else:
        result = cds_corpus(
            table,
            swapper,
            opts["swap_rate"],
            opts["seed"],
            batch_size=opts["batch_size"],
            unit=opts["swap_unit"],
            selection=opts["selection"],
            protect=protect,
        )
    write_table_atomic(result, out, COUNTERFACTUAL_SCHEMA)
    flags = result.column("is_counterfactual").to_pylist()
    counts = {
        "sentences_in": table.num_rows,
        "rows_out": result.num_rows,
        "counterfactual_rows": sum(flags),
        "changed": sum(result.column("changed").to_pylist()),
        "kept_in_clusters": swapper.stats.kept_in_clusters,
    }
    log.info(
        "%s: %d sentences in, %d rows out, %d counterfactual rows, %d changed; %d gendered words kept by "
        "gold coreference with a name (%s)",
        out,
        *counts.values(),
        "coreference unknown"
        if protect is None and opts[PROTECT_KEY]
        else f"{PROTECT_KEY}: {str(opts[PROTECT_KEY]).lower()}",
    )
    return counts


BARTL_DATA = "resources/data/bartl2020_gap_flipped/gap_flipped.tsv"


def bartl_corpus_files(corpora: Mapping) -> list[str]:
    """The Bartl et al. corpus file when `corpora.bartl2020` is configured (a target and a method corpus)."""
    from lmbias.corpora.bartl import CORPUS_NAME

    return [f"results/corpora/bartl2020/{CORPUS_NAME}.parquet"] if "bartl2020" in corpora else []


def build_bartl_corpus(tsv: str | os.PathLike, out: str | os.PathLike, options: Mapping, spacy_model: str) -> dict:
    """gap_flipped.tsv -> results/corpora/bartl2020/gap-flipped.parquet (lmbias.corpora.bartl)."""
    from lmbias.corpora.bartl import BARTL_DEFAULTS, bartl_corpus
    from lmbias.corpora.sentences import load_splitter

    opts = {**BARTL_DEFAULTS, **{k: v for k, v in (options or {}).items() if k in BARTL_DEFAULTS}}
    nlp = load_splitter(spacy_model, opts["splitter"], key="corpora.bartl2020.splitter")
    table, counts = bartl_corpus(tsv, nlp, batch_size=opts["batch_size"])
    write_table_atomic(table, out, COUNTERFACTUAL_SCHEMA)
    return counts


def ontonotes_files(options: Mapping, key: str = "corpora.ontonotes") -> list[Path]:
    """The CoNLL-2012 files the GPR corpus reads; ConfigError naming the key when `path` is unset."""
    from lmbias.corpora.conll import find_conll_files

    path = options.get("path")
    if not path:
        raise ConfigError(
            f"{key}.path is not set: the OntoNotes GPR corpus needs your licensed OntoNotes 5.0 CoNLL-2012 "
            f"folder (English, e.g. conll-2012/v4/data/train/data/english): set {key}.path in config.yaml "
            f"(or in a --configfile)"
        )
    return find_conll_files(path, options.get("pattern", ONTONOTES_DEFAULTS["pattern"]), key)


def build_ontonotes_sentences(
    conll_files: Sequence[str | os.PathLike], out: str | os.PathLike, options: Mapping, spacy_model: str
) -> dict:
    """CoNLL-2012 files -> anonymised sentences (results/corpora/ontonotes/sentences.parquet)."""
    from lmbias.corpora.anonymise import ANONYMISED_SCHEMA, anonymise_documents, resolve_ner_source, sentences_table
    from lmbias.corpora.conll import read_conll_files

    docs = read_conll_files(conll_files)
    nlp = None
    if resolve_ner_source(docs, options.get("ner", ONTONOTES_DEFAULTS["ner"])) == "spacy":
        from lmbias.corpora.nlp import load_spacy

        nlp = load_spacy(spacy_model, exclude=["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"])
    sentences, counts = anonymise_documents(docs, options.get("ner", ONTONOTES_DEFAULTS["ner"]), nlp=nlp)
    write_table_atomic(sentences_table(sentences), out, ANONYMISED_SCHEMA)
    return {"files": len(conll_files), **counts}


def gpr_options(options: Mapping | None, variant: str | None = None) -> dict:
    """corpora.ontonotes.gpr with defaults filled in, or (variant) the entry of gpr.variants.<variant> over it;
    ConfigError naming the key of a bad value."""
    from lmbias.corpora.gpr import EXAMPLE_UNITS, OTHER_PRONOUNS, PRONOUNS, SPLIT_UNITS

    base = {k: v for k, v in (options or {}).items() if k != "variants"}
    key = GPR_KEY
    if variant is not None:
        variants = (options or {}).get("variants") or {}
        if variant not in variants:
            raise ConfigError(
                f"{GPR_KEY}.variants: no variant {variant!r}; configured: {', '.join(sorted(variants)) or 'none'}"
            )
        key = f"{GPR_KEY}.variants.{variant}"
        base.update(variants[variant] or {})
    unknown = sorted(set(base) - set(GPR_DEFAULTS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key; known: {', '.join(sorted(GPR_DEFAULTS))}")
    opts = {**GPR_DEFAULTS, **base}

    def choice(name, allowed):
        if opts[name] not in allowed:
            raise ConfigError(f"{key}.{name}: must be one of {list(allowed)}, got {opts[name]!r}")

    choice("wordlist", GPR_WORDLISTS)
    choice("examples", EXAMPLE_UNITS)
    choice("other_pronouns", OTHER_PRONOUNS)
    choice("split_by", SPLIT_UNITS)
    for name in ("deduplicate",):
        if not isinstance(opts[name], bool):
            raise ConfigError(f"{key}.{name}: must be true or false, got {opts[name]!r}")
    for name, low in (("max_chars", 1), ("seed", 0)):
        if isinstance(opts[name], bool) or not isinstance(opts[name], int) or opts[name] < low:
            raise ConfigError(f"{key}.{name}: must be an integer >= {low}, got {opts[name]!r}")
    fraction = opts["validation_fraction"]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
        raise ConfigError(f"{key}.validation_fraction: must be in [0, 1), got {fraction!r}")
    chosen = opts["pronouns"]
    if (
        not isinstance(chosen, (list, tuple))
        or not chosen
        or any(not isinstance(p, str) or p.lower() not in PRONOUNS for p in chosen)
    ):
        raise ConfigError(f"{key}.pronouns: must be a non-empty list of {sorted(PRONOUNS)}, got {chosen!r}")
    _check_protect(opts, key)
    return opts


def gpr_variants(options: Mapping | None) -> list[str]:
    """The configured GPR corpus variants (file stems gpr-<name>-U/-A), each checked."""
    variants = (options or {}).get("variants") or {}
    if not isinstance(variants, Mapping):
        raise ConfigError(f"{GPR_KEY}.variants: must map variant names to option overrides, got {variants!r}")
    for name in variants:
        if not isinstance(name, str) or not GPR_VARIANT.fullmatch(name) or name in ("u", "a"):
            raise ConfigError(
                f"{GPR_KEY}.variants.{name}: a variant name is lower-case letters, digits and _ "
                f"(it names results/corpora/ontonotes/gpr-<name>-U.parquet)"
            )
        gpr_options(options, name)
    return sorted(variants)


def gpr_stem_variant(stem: str) -> str | None:
    """File stem (gpr, gpr-manela) -> variant name (None for the base corpus)."""
    if stem == "gpr":
        return None
    if not stem.startswith("gpr-"):
        raise ConfigError(f"{GPR_KEY}: {stem!r} is not a GPR corpus name (gpr or gpr-<variant>)")
    return stem[len("gpr-") :]


def gpr_files(options: Mapping | None) -> list[str]:
    """Every GPR file the config defines: gpr-U/-A and gpr-<variant>-U/-A."""
    stems = ["gpr"] + [f"gpr-{v}" for v in gpr_variants(options)]
    return [f"results/corpora/ontonotes/{stem}-{half}.parquet" for stem in stems for half in ("U", "A")]


def build_gpr(
    sentences: str | os.PathLike,
    out_u: str | os.PathLike,
    out_a: str | os.PathLike,
    lexicon_files: Mapping[str, str],
    options: Mapping,
    spacy_model: str,
    variant: str | None = None,
) -> dict:
    """Anonymised sentences -> GPR -U and -A tables (lmbias.corpora.gpr); `variant`: a gpr.variants entry."""
    from lmbias.corpora.anonymise import sentences_from_table
    from lmbias.corpora.gpr import GPR_SCHEMA, gpr_examples

    opts = gpr_options(options, variant)
    swapper = make_swapper(lexicon_files, opts["intervention"], names=False, spacy_model=spacy_model)
    u, a, counts = gpr_examples(
        sentences_from_table(read_table(sentences)),
        swapper,
        validation_fraction=opts["validation_fraction"],
        seed=opts["seed"],
        protect=opts[PROTECT_KEY],
        examples=opts["examples"],
        max_chars=opts["max_chars"],
        other_pronouns=opts["other_pronouns"],
        pronouns=opts["pronouns"],
        deduplicate=opts["deduplicate"],
        split_by=opts["split_by"],
    )
    write_table_atomic(u, out_u, GPR_SCHEMA)
    write_table_atomic(a, out_a, GPR_SCHEMA)
    return counts


def make_swapper(
    lexicon_files: Mapping[str, str], intervention: str, names: bool, spacy_model: str, substitutor: str = "lmbias"
):
    """A lmbias.corpora.counterfactual.Swapper over the word lists (rule inputs named as in lexicon_inputs), or
    with substitutor "hall_maudslay" a lmbias.corpora.hall_maudslay.HallMaudslaySubstitutor."""
    from lmbias.corpora.counterfactual import Swapper
    from lmbias.corpora.swap_lexicon import load_lexicon

    if substitutor == "hall_maudslay":
        from lmbias.corpora.hall_maudslay import HallMaudslaySubstitutor
        from lmbias.corpora.nlp import load_spacy
        from lmbias.corpora.swap_lexicon import read_json_pairs, read_tsv_pairs

        words = [(a, b) for a, b, _ in read_tsv_pairs(Path(lexicon_files["lu2018_pairs"]))]
        name_pairs = [(a, b) for a, b, _ in read_json_pairs(Path(lexicon_files["name_pairs"]))] if names else None
        # the tagger (his/her) and NER (names); the parser and lemmatizer change neither
        return HallMaudslaySubstitutor(words, name_pairs, load_spacy(spacy_model, exclude=["parser", "lemmatizer"]))

    kwargs = lexicon_kwargs(lexicon_files)
    if "gn_glove" in kwargs:
        from lmbias.corpora.gpr import gn_glove_lexicon

        lexicon = gn_glove_lexicon(*kwargs["gn_glove"])
    else:
        lexicon = load_lexicon(**kwargs)
    nlp = None
    if intervention == "grammatical" or names:
        from lmbias.corpora.nlp import load_spacy

        # The same components as the tested swapper: the tagger, NER (a capitalised gendered word or a
        # name) and the parser, whose dependency arcs decide possessive "her" ("HER answer" -> "HIS answer").
        nlp = load_spacy(spacy_model)
    return Swapper(lexicon, intervention=intervention, names=names, nlp=nlp)
