"""HolisticBias v1.1 (Smith et al., EMNLP 2022, "I'm sorry to hear that": Finding New Biases in Language Models with
a Holistic Descriptor Dataset): sentences built from the dataset's descriptors, nouns and sentence templates.

The rules are those of the authors' generator (holistic_bias/src/sentences.py of facebookresearch/ResponsibleNLP,
`HolisticBiasSentenceGenerator` with its default settings: dataset v1.1, no small set, no filters); the code is
lmbias's. Names in quotes are the generator's metadata values, kept so the rows can be compared with its CSV.

Noun phrases, per axis of descriptors.json ({axis: {bucket: [entry, ...]}}):

1. Every descriptor entry is a string or an object with `descriptor` and optional flags: `gender` (female | male:
   the descriptor only goes with nouns of that gender, e.g. "female", "FTM"), `article` (the indefinite article
   in place of the automatic one: "a US-born", "a Unitarian"), `preference` (dispreferred | polarizing | reviewed;
   "no_data" when absent). An entry gives two kinds of noun phrase:
   * `descriptor`: the descriptor alone, singular and plural alike ("I'm queer.", "I have friends who are
     queer."); no noun (noun and noun_gender "(none)");
   * `descriptor_noun`: "<article> <descriptor> <noun>" for every noun of nouns.json whose gender is the
     descriptor's (every noun when it has none), plural "<descriptor> <plural noun>" ("a queer grandma",
     "queer grandmas"). The automatic article is "an" when the descriptor's first letter, lower-cased, is a
     vowel (a e i o u) and "a" otherwise, as the generator decides it: "an AFAB woman", "an intersex man", "a
     LGBTQ person", "a FTM guy", "an US-born ..." unless the entry says otherwise.
2. standalone_noun_phrases.json ({axis: [phrase, ...]}): a phrase (string, or an object with `noun_phrase`, an
   optional `plural_noun_phrase`, default the singular, and `preference`) is either
   * `noun_descriptor` when it holds "{noun}": filled with every noun of every gender (no gender rule applies),
     "{article}" being the noun's a/an and the plural dropping it ("an individual who uses a wheelchair",
     "individuals who use wheelchairs"); its descriptor is the phrase without article and noun ("who uses a
     wheelchair"), its bucket "(none)";
   * `fixed_phrase` otherwise, as written ("a person who uses she/her pronouns", plural "people who use ...");
     descriptor = the phrase, noun "(none)", noun_gender "neutral" (the generator's value), bucket "(none)".
   The gender_and_sex axis has eight phrases, all fixed (pronoun phrases).
3. The `null` axis: every noun alone, "<a/an> <noun>" and its plural ("a woman", "women"; type `noun`,
   descriptor and bucket "(none)"), the generator's control for "I'm a <descriptor> woman". Selected like an
   axis (`axes: [null]`).

Sentences: every noun phrase with every template of sentence_templates.json ({template: {flags}}), in the file's
order, except that a phrase without a noun (types `descriptor` and `fixed_phrase`) skips the templates flagged
`must_be_noun` (9 of the 26: "As {noun_phrase}, ...", "I love {plural_noun_phrase}.", ...). A template holds
{noun_phrase} (the singular phrase goes in) or {plural_noun_phrase} (the plural; `plural` true). Flags:
`must_be_noun`, `first_turn_only` (greetings; it drops no sentence and is not kept). No stylistic variants: the
generator applies those (I am for I'm, no hyphens, lower case, no final period) only when it samples one
sentence for a conversation (`get_sentence`), never in the dataset or in the bias measurement.

Rows (SCHEMA): index (row number), axis, bucket, descriptor, descriptor_gender ("(none)" or female/male),
preference, noun ("(none)" for phrases without one), noun_gender, noun_phrase_type (the five kinds above),
plural, template, noun_phrase (the phrase as it stands in the sentence: singular or plural), sentence.

Counts (dataset v1.1; tests/parsers/test_holistic_bias.py): the gender_and_sex axis gives 51,057 sentences: 65
descriptors (8 of them gendered: 4 female x 12 female nouns, 4 male x 11 male nouns, 57 x 32 nouns for the
others: 1,916 descriptor-noun phrases x 26 templates = 49,816), the 65 descriptors alone x 17 templates (1,105) and
the 8 pronoun phrases x 17 (136). The likelihood bias reads 47,424 of them (lmbias.metrics.holistic_bias: the 57
descriptors without a gender, each with the 32 nouns, in 26 templates). Neither the paper nor the README gives a
per-axis count, so every axis was built too: the 13 axes and the null axis give 566,625 sentences, 563,195
distinct texts (the same sentence from two axes: LGBT, LGBTQ, LGBTQ+ and queer are listed under gender_and_sex and
sexual_orientation; "a Rasta" twice under religion; "a veteran" both a fixed phrase and the null axis's noun),
against the README's "over 400k unique sentences" for the dataset's CSV (the paper, for v1.0 with nearly 600
descriptors: "over 450,000 unique sentence prompts"). Descriptors: 770 distinct (579 of descriptors.json, 191 of
the standalone phrases), one more than the README's 769 for v1.1 (it does not say how it counts, nor for which
commit of the files). The authors' generator, run on the same four files, gives the same rows (compared as
multisets of axis, bucket, descriptor, its gender and preference, noun, noun gender, phrase type, template and
sentence): 51,057 on gender_and_sex, 566,625 over every axis.

Where lmbias differs from the generator (none changes a sentence or a count):

* Order: rows follow the files (axes, buckets, descriptors, then standalone phrases; nouns by gender as listed;
  templates as listed); the generator sorts its noun phrases by their metadata columns first.
* Malformed input is an error naming the file and the place in it (a descriptor entry with an unknown flag, a
  gender that is not a noun gender, a template without exactly one noun-phrase slot, a noun pair that is not two
  strings, ...), where the generator would write odd sentences or fail later.

Subsets for quick runs (deterministic, no sampling; the authors' `--use-small-set` draws 100 descriptors over all
axes with numpy's generator, which lmbias does not copy):

* `axes` (default [gender_and_sex]): the axes to build, any of descriptors.json's and `null`; an unknown axis is a
  ConfigError naming the key and the known axes.
* `max_descriptors` (default null: all): the first N descriptors of each axis in file order (bucketed entries,
  then standalone phrases); the null axis is not cut.
* `templates` (default null: all): the templates to keep, written as in sentence_templates.json.
* `nouns` (default null: all): the singular nouns to keep (of nouns.json); phrases without a noun stay.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import read_json, table

DESCRIPTORS = "descriptors.json"
NOUNS = "nouns.json"
TEMPLATES = "sentence_templates.json"
STANDALONE = "standalone_noun_phrases.json"
FILES = (DESCRIPTORS, NOUNS, TEMPLATES, STANDALONE)

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "holistic_bias"
OPTIONS = ("axes", "max_descriptors", "templates", "nouns")
DEFAULT_AXES = ("gender_and_sex",)
#: The generator's value for a missing attribute (NONE_STRING) and for an unreviewed descriptor.
NONE = "(none)"
NO_DATA = "no_data"
#: The noun-only control phrases' axis.
NULL_AXIS = "null"
NOUN_PHRASE = "{noun_phrase}"
PLURAL_NOUN_PHRASE = "{plural_noun_phrase}"
#: noun_phrase_type values (the generator's): the metric compares the first two kinds.
TYPES = ("descriptor_noun", "noun_descriptor", "descriptor", "fixed_phrase", "noun")
TEMPLATE_FLAGS = ("first_turn_only", "must_be_noun")
DESCRIPTOR_KEYS = ("descriptor", "gender", "article", "preference")
STANDALONE_KEYS = ("noun_phrase", "plural_noun_phrase", "preference")

SCHEMA = pa.schema(
    [
        ("index", pa.int32()),
        ("axis", pa.string()),
        ("bucket", pa.string()),  # "(none)" for standalone phrases and the null axis
        ("descriptor", pa.string()),
        ("descriptor_gender", pa.string()),  # "(none)" | female | male
        ("preference", pa.string()),  # no_data | reviewed | dispreferred | polarizing ("(none)": null axis)
        ("noun", pa.string()),  # singular; "(none)" for a phrase without a noun
        ("noun_gender", pa.string()),
        ("noun_phrase_type", pa.string()),  # TYPES
        ("plural", pa.bool_()),  # the template takes the plural noun phrase
        ("template", pa.string()),
        ("noun_phrase", pa.string()),  # as it stands in the sentence
        ("sentence", pa.string()),
    ]
)


# ---------------------------------------------------------------------------------------------------- reading


def article(word: str) -> str:
    """The generator's indefinite article: "an" before a first letter that is a vowel (lower-cased), else "a"."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _text(value, what: str, path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{what} must be a non-empty string, got {value!r}", path)
    return value


def _object(value, what: str, path) -> dict:
    if not isinstance(value, dict):
        raise DataError(f"{what} must be a JSON object, got {type(value).__name__}", path)
    return value


def read_nouns(path) -> list[tuple[str, str, str]]:
    """(gender, noun, plural noun) of nouns.json, genders and nouns in file order."""
    data = _object(read_json(path), "the file", path)
    nouns = []
    for gender, pairs in data.items():
        if not isinstance(pairs, list) or not pairs:
            raise DataError(f"{gender}: must be a non-empty list of [noun, plural] pairs", path)
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(w, str) and w for w in pair)):
                raise DataError(f"{gender}[{i}]: must be a [noun, plural] pair of strings, got {pair!r}", path)
            nouns.append((gender, pair[0], pair[1]))
    seen = [n for _, n, _ in nouns]
    repeated = sorted({n for n in seen if seen.count(n) > 1})
    if repeated:
        raise DataError(f"nouns listed twice: {repeated}", path)
    return nouns


def read_templates(path) -> dict[str, dict]:
    """{template: {first_turn_only, must_be_noun}} of sentence_templates.json, in file order."""
    data = _object(read_json(path), "the file", path)
    templates = {}
    for template, flags in data.items():
        flags = _object(flags, f"template {template!r}", path)
        slots = template.count(NOUN_PHRASE) + template.count(PLURAL_NOUN_PHRASE)
        if slots != 1 or template.count("{") != 1 or template.count("}") != 1:
            raise DataError(
                f"template {template!r} must hold one {NOUN_PHRASE} or {PLURAL_NOUN_PHRASE} and no other braces",
                path,
            )
        unknown = sorted(set(flags) - set(TEMPLATE_FLAGS))
        if unknown:
            known = ", ".join(TEMPLATE_FLAGS)
            raise DataError(f"template {template!r}: unknown flag {unknown[0]!r} (known: {known})", path)
        for flag, value in flags.items():
            if not isinstance(value, bool):
                raise DataError(f"template {template!r}: {flag} must be true or false, got {value!r}", path)
        templates[template] = {flag: flags.get(flag, False) for flag in TEMPLATE_FLAGS}
    if not templates:
        raise DataError("no templates", path)
    return templates


def _listed_entry(entry, main_key: str, known: Sequence[str], where: str, path) -> dict:
    """One entry of a list in the data files: a bare string stands for {main_key: string}; an object may hold
    only the `known` keys (DataError naming `where` and the file)."""
    if isinstance(entry, str):
        entry = {main_key: entry}
    entry = _object(entry, where, path)
    unknown = sorted(set(entry) - set(known))
    if unknown:
        raise DataError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})", path)
    return entry


def _descriptor_entry(entry, where: str, genders: Sequence[str], path) -> dict:
    """{descriptor, gender, article, preference} of one entry of descriptors.json."""
    entry = _listed_entry(entry, "descriptor", DESCRIPTOR_KEYS, where, path)
    descriptor = _text(entry.get("descriptor"), f"{where}.descriptor", path)
    gender = entry.get("gender", NONE)
    if gender != NONE and gender not in genders:
        raise DataError(f"{where}: gender {gender!r} is not a noun gender of {NOUNS} ({', '.join(genders)})", path)
    return {
        "descriptor": descriptor,
        "gender": gender,
        "article": _text(entry.get("article", article(descriptor)), f"{where}.article", path),
        "preference": _text(entry.get("preference", NO_DATA), f"{where}.preference", path),
    }


def read_descriptors(path, genders: Sequence[str]) -> dict[str, list[tuple[str, dict]]]:
    """{axis: [(bucket, entry), ...]} of descriptors.json, in file order."""
    data = _object(read_json(path), "the file", path)
    axes = {}
    for axis, buckets in data.items():
        buckets = _object(buckets, axis, path)
        entries = []
        for bucket, listed in buckets.items():
            if not isinstance(listed, list):
                raise DataError(f"{axis}.{bucket}: must be a list of descriptors", path)
            for i, entry in enumerate(listed):
                entries.append((bucket, _descriptor_entry(entry, f"{axis}.{bucket}[{i}]", genders, path)))
        axes[axis] = entries
    return axes


def read_standalone(path) -> dict[str, list[dict]]:
    """{axis: [{noun_phrase, plural_noun_phrase, preference}, ...]} of standalone_noun_phrases.json."""
    data = _object(read_json(path), "the file", path)
    axes = {}
    for axis, phrases in data.items():
        if not isinstance(phrases, list):
            raise DataError(f"{axis}: must be a list of noun phrases", path)
        entries = []
        for i, entry in enumerate(phrases):
            where = f"{axis}[{i}]"
            entry = _listed_entry(entry, "noun_phrase", STANDALONE_KEYS, where, path)
            singular = _text(entry.get("noun_phrase"), f"{where}.noun_phrase", path)
            plural = _text(entry.get("plural_noun_phrase", singular), f"{where}.plural_noun_phrase", path)
            templated = "{noun}" in singular
            for text in (singular, plural):
                rest = text.replace("{noun}", "").replace("{article}", "") if templated else text
                if "{" in rest or "}" in rest or (templated and "{noun}" not in text):
                    raise DataError(
                        f"{where}: {text!r} may hold only {{article}} and {{noun}}, both forms the noun or neither",
                        path,
                    )
            preference = _text(entry.get("preference", NO_DATA), f"{where}.preference", path)
            entries.append({"noun_phrase": singular, "plural_noun_phrase": plural, "preference": preference})
        axes[axis] = entries
    return axes


# ---------------------------------------------------------------------------------------------------- building


def _phrase(axis, bucket, descriptor, gender, preference, noun, noun_gender, kind, singular, plural) -> dict:
    return {
        "axis": axis,
        "bucket": bucket,
        "descriptor": descriptor,
        "descriptor_gender": gender,
        "preference": preference,
        "noun": noun,
        "noun_gender": noun_gender,
        "noun_phrase_type": kind,
        "singular": singular,
        "plural": plural,
    }


def _fill(text: str, noun: str, word_article: str) -> str:
    """A standalone phrase with its noun and article."""
    return text.replace("{article}", word_article).replace("{noun}", noun)


def descriptor_phrases(axis: str, bucket: str, entry: dict, nouns) -> list[dict]:
    """The descriptor alone, then with every noun its gender allows (rule 1 of the module docstring)."""
    d, gender, preference = entry["descriptor"], entry["gender"], entry["preference"]
    phrases = [_phrase(axis, bucket, d, gender, preference, NONE, NONE, "descriptor", d, d)]
    for noun_gender, noun, plural in nouns:
        if gender in (NONE, noun_gender):
            singular, plurals = f"{entry['article']} {d} {noun}", f"{d} {plural}"
            phrases.append(
                _phrase(axis, bucket, d, gender, preference, noun, noun_gender, "descriptor_noun", singular, plurals)
            )
    return phrases


def standalone_phrases(axis: str, entry: dict, nouns) -> list[dict]:
    """A standalone phrase with every noun, or as written (rule 2)."""
    singular, plural, preference = entry["noun_phrase"], entry["plural_noun_phrase"], entry["preference"]
    if "{noun}" not in singular:
        return [_phrase(axis, NONE, singular, NONE, preference, NONE, "neutral", "fixed_phrase", singular, plural)]
    descriptor = _fill(singular, "", "").lstrip()  # the generator's: "who uses a wheelchair"
    return [
        _phrase(
            axis,
            NONE,
            descriptor,
            NONE,
            preference,
            noun,
            noun_gender,
            "noun_descriptor",
            _fill(singular, noun, article(noun)),
            _fill(plural, noun_plural, "").lstrip(),  # no article, nor the space after it
        )
        for noun_gender, noun, noun_plural in nouns
    ]


def null_phrases(nouns) -> list[dict]:
    """Every noun alone (rule 3)."""
    return [
        _phrase(NULL_AXIS, NONE, NONE, NONE, NONE, noun, gender, "noun", f"{article(noun)} {noun}", plural)
        for gender, noun, plural in nouns
    ]


def axis_phrases(axis: str, descriptors, standalone, nouns, max_descriptors: int | None) -> list[dict]:
    """The noun phrases of one axis: its first `max_descriptors` descriptors (all when None) in file order."""
    if axis == NULL_AXIS:
        return null_phrases(nouns)
    units = [("descriptor", bucket, entry) for bucket, entry in descriptors.get(axis, [])]
    units += [("standalone", NONE, entry) for entry in standalone.get(axis, [])]
    if max_descriptors is not None:
        units = units[:max_descriptors]
    phrases = []
    for kind, bucket, entry in units:
        if kind == "descriptor":
            phrases += descriptor_phrases(axis, bucket, entry, nouns)
        else:
            phrases += standalone_phrases(axis, entry, nouns)
    return phrases


def sentences(phrases: list[dict], templates: Mapping[str, dict]) -> list[dict]:
    """Every phrase in every template it may take (a phrase without a noun skips must_be_noun templates)."""
    rows = []
    for phrase in phrases:
        has_noun = phrase["noun"] != NONE
        for template, flags in templates.items():
            if flags["must_be_noun"] and not has_noun:
                continue
            plural = PLURAL_NOUN_PHRASE in template
            inserted = phrase["plural"] if plural else phrase["singular"]
            rows.append(
                {
                    "index": len(rows),
                    **{k: v for k, v in phrase.items() if k not in ("singular", "plural")},
                    "plural": plural,
                    "template": template,
                    "noun_phrase": inserted,
                    "sentence": template.replace(PLURAL_NOUN_PHRASE if plural else NOUN_PHRASE, inserted),
                }
            )
    return rows


# ---------------------------------------------------------------------------------------------------- options


def _list_option(options: Mapping, name: str, key: str) -> list[str] | None:
    value = options.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key}.{name} must be a non-empty list of strings, got {value!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{key}.{name}: {value!r} lists an entry twice")
    return value


def check_options(options: Mapping, key: str) -> dict:
    """The parser's options (module docstring), checked without the data: types, ranges, repeats."""
    axes = _list_option(options, "axes", key) or list(DEFAULT_AXES)
    limit = options.get("max_descriptors")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"{key}.max_descriptors must be a positive integer or null, got {limit!r}")
    return {
        "axes": axes,
        "max_descriptors": limit,
        "templates": _list_option(options, "templates", key),
        "nouns": _list_option(options, "nouns", key),
    }


def _unknown(key: str, wanted: Sequence[str], known: Sequence[str], what: str, path) -> None:
    missing = [w for w in wanted if w not in known]
    if missing:
        raise ConfigError(f"{key}: {missing[0]!r} is not {what} of {path} (known: {', '.join(known)})")


def parse_holistic_bias(
    descriptors_path,
    nouns_path,
    templates_path,
    standalone_path,
    options: Mapping | None = None,
    key: str = "benchmarks.holistic_bias",
) -> pa.Table:
    """The sentences of the configured axes (module docstring), in file order."""
    chosen = check_options(options or {}, key)
    nouns = read_nouns(nouns_path)
    genders = list(dict.fromkeys(g for g, _, _ in nouns))
    descriptors = read_descriptors(descriptors_path, genders)
    standalone = read_standalone(standalone_path)
    templates = read_templates(templates_path)
    unknown_axes = sorted(set(standalone) - set(descriptors))
    if unknown_axes:
        raise DataError(f"axis {unknown_axes[0]!r} is not an axis of {DESCRIPTORS}", standalone_path)
    _unknown(f"{key}.axes", chosen["axes"], [*descriptors, NULL_AXIS], "an axis", descriptors_path)
    if chosen["templates"] is not None:
        _unknown(f"{key}.templates", chosen["templates"], list(templates), "a template", templates_path)
        templates = {t: flags for t, flags in templates.items() if t in chosen["templates"]}
    if chosen["nouns"] is not None:
        _unknown(f"{key}.nouns", chosen["nouns"], [n for _, n, _ in nouns], "a noun", nouns_path)
        nouns = [n for n in nouns if n[1] in chosen["nouns"]]
    phrases = []
    for axis in chosen["axes"]:
        phrases += axis_phrases(axis, descriptors, standalone, nouns, chosen["max_descriptors"])
    return table(sentences(phrases, templates), SCHEMA)


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    check_options(options, key)
    return list(FILES)


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_holistic_bias(
        files[DESCRIPTORS], files[NOUNS], files[TEMPLATES], files[STANDALONE], {k: options.get(k) for k in OPTIONS}, key
    )
