"""HONEST (Nozza, Bianchi and Hovy, NAACL 2021): the binary-gender English templates and the HurtLex lexicon they are
scored against.

Templates: ``en_template.tsv`` of MilaNLProc/honest (``resources/binary/en_template.tsv``), 810 rows with the
columns template_masked ("the woman should work as a [M]."), raw ("[I] should work as a [M]"), identity ("the
woman"), number (singular | plural), category (female | male: 405 each) and type (occupation,
descriptive_adjective, descriptive_verb: 270 each). One row per template, in file order; `template_id` is that
position. 54 identity terms x 15 templates: the five gender-neutral terms ("the child", "the children", "the young",
"the youngs") and "the girls" are listed twice, under both categories (or twice under female), so the 810 rows hold
724 distinct template texts. Every row is an item, as the file lists them (the HONEST score's denominator counts
810 templates); the authors' package, reading the file into a dict keyed by template_masked, keeps one row per
text (the last: a duplicated neutral term then counts as male only). A masked model fills a repeated text
alike (the engine reads it once); a generative model samples each row on its own (seeded by template_id).
`prefix` is the text before
``[M]`` with trailing whitespace removed, what a causal or encoder-decoder model continues (the authors' GPT-2
notebook asks ``template.replace(" [M].", "")``: the same text for every template, each of which ends " [M].").

Lexicon: HurtLex EN 1.2 (``lexica/EN/1.2/hurtlex_EN.tsv`` of MilaNLProc/hurtlex, the file the authors' package
downloads; columns id, pos, category, stereotype, lemma, level), a file of another dataset (`data.hurtlex`; the
entry key `lexicon` names another `data:` entry holding a file of that name). It is read here, through the data
layer's OTHER_DATA (lmbias.parsers: an input of rule parse_benchmark, fetched and verified by its own dataset's
rule, its sha256 in the parsed table's metadata), and travels with the templates: every row (lemma, category,
level, in file order, 8,228 rows, 3,360 of them at level conservative) is stored as JSON in the table's schema
metadata under ``lmbias.hurtlex`` (`lexicon_rows` reads it back). The scorer (lmbias.benchmarks.honest) labels
each completion from it (lmbias.metrics.hurtlex: the matching rule), so the metric never needs the lexicon.
Keeping it in the metadata rather than a second table keeps one parsed file per benchmark (the workflow's
contract), and its hash is part of the parsed table's, so editing the lexicon re-scores.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers import other_file_key
from lmbias.parsers.common import check_choice, read_delimited, table

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "honest"
FILE = "en_template.tsv"
HEADER = ["template_masked", "raw", "identity", "number", "category", "type"]
CATEGORIES = ("female", "male")
NUMBERS = ("singular", "plural")
TYPES = ("occupation", "descriptive_adjective", "descriptive_verb")
MASK = "[M]"

#: The lexicon: a file of another configured dataset (lmbias.parsers.OTHER_DATA), named by the entry's `lexicon`.
LEXICON_KEY = "lexicon"
DEFAULT_LEXICON = "hurtlex"
LEXICON_FILE = "hurtlex_EN.tsv"
OTHER_DATA = {LEXICON_KEY: (DEFAULT_LEXICON, (LEXICON_FILE,))}
LEXICON_HEADER = ["id", "pos", "category", "stereotype", "lemma", "level"]
LEVELS = ("conservative", "inclusive")
#: The schema metadata key of the lexicon rows ({"columns": [lemma, category, level], "rows": [...]} as JSON).
LEXICON_METADATA = "lmbias.hurtlex"

SCHEMA = pa.schema(
    [
        ("template_id", pa.int32()),  # position in en_template.tsv
        ("template", pa.string()),  # template_masked, as in the file ("the woman should work as a [M].")
        ("raw", pa.string()),  # "[I] should work as a [M]"
        ("identity", pa.string()),  # "the woman"
        ("number", pa.string()),  # singular | plural
        ("category", pa.string()),  # female | male
        ("type", pa.string()),  # occupation | descriptive_adjective | descriptive_verb
        ("prefix", pa.string()),  # the text before [M], trailing whitespace removed
    ]
)


def parse_templates(path: str | os.PathLike) -> list[dict]:
    """The rows of en_template.tsv; a row whose template does not hold exactly one [M] or an unknown category,
    number or type is a DataError naming file and line."""
    rows = []
    for line, (template, raw, identity, number, category, kind) in read_delimited(path, delimiter="\t", header=HEADER):
        if template.count(MASK) != 1:
            raise DataError(f"expected one {MASK} in the template, got {template!r}", path, line)
        rows.append(
            {
                "template_id": len(rows),
                "template": template,
                "raw": raw,
                "identity": identity,
                "number": check_choice(number, NUMBERS, "number", path, line),
                "category": check_choice(category, CATEGORIES, "category", path, line),
                "type": check_choice(kind, TYPES, "type", path, line),
                "prefix": template[: template.index(MASK)].rstrip(),
            }
        )
    return rows


def parse_lexicon(path: str | os.PathLike) -> list[tuple[str, str, str]]:
    """(lemma, category, level) of every row of a HurtLex TSV, in file order; an unknown level or an empty lemma or
    category is a DataError naming file and line. Quotes are read as written (`"c" word`): pandas, which the
    authors' package reads the file with, takes a field that opens with a quote as quoted (`c word`); the 10 rows
    with quotes hold lemmas of several words, which no completed word can equal either way."""
    rows = []
    lines = read_delimited(path, delimiter="\t", header=LEXICON_HEADER, quoting=csv.QUOTE_NONE)
    for line, (_, _, category, _, lemma, level) in lines:
        if not lemma or not category:
            raise DataError("a HurtLex row needs a lemma and a category", path, line)
        rows.append((lemma, category, check_choice(level, LEVELS, "level", path, line)))
    return rows


def first_per_category(rows: list[dict], n: int | None) -> list[dict]:
    """The first `n` rows of each category (female, male) in file order (None: every row); template_id stays the
    row's place in the whole file."""
    if n is None:
        return rows
    seen: dict[str, int] = {}
    kept = []
    for row in rows:
        seen[row["category"]] = seen.get(row["category"], 0) + 1
        if seen[row["category"]] <= n:
            kept.append(row)
    return kept


def parse_honest(
    templates: str | os.PathLike, lexicon: str | os.PathLike, max_templates: int | None = None
) -> pa.Table:
    """The templates as a table, the lexicon's rows in its schema metadata (LEXICON_METADATA); `max_templates`:
    the first N templates of each category only (quick runs)."""
    rows = first_per_category(parse_templates(templates), max_templates)
    entries = parse_lexicon(lexicon)
    payload = {"columns": ["lemma", "category", "level"], "rows": [list(e) for e in entries]}
    return table(rows, SCHEMA).replace_schema_metadata({LEXICON_METADATA: json.dumps(payload, ensure_ascii=False)})


def lexicon_rows(items: pa.Table) -> list[tuple[str, str, str]]:
    """The (lemma, category, level) rows a parsed HONEST table carries (DataError where it carries none: a table not
    parsed by this module)."""
    raw = (items.schema.metadata or {}).get(LEXICON_METADATA.encode())
    if raw is None:
        raise DataError(f"HONEST items carry no lexicon (schema metadata {LEXICON_METADATA!r}); parse them again")
    return [tuple(row) for row in json.loads(raw)["rows"]]


OPTIONS = (LEXICON_KEY, "max_templates")


def _max_templates(options: Mapping, key: str) -> int | None:
    value = options.get("max_templates")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{key}.max_templates must be a positive integer or null, got {value!r}")
    return value


def lexicon_dataset(options: Mapping, key: str) -> str:
    dataset = options.get(LEXICON_KEY, DEFAULT_LEXICON)
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError(f"{key}.{LEXICON_KEY}: expected the name of a data: entry, got {dataset!r}")
    return dataset


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    lexicon_dataset(options, key)
    _max_templates(options, key)
    return [FILE]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    lexicon = files[other_file_key(lexicon_dataset(options, key), LEXICON_FILE)]
    return parse_honest(files[FILE], lexicon, _max_templates(options, key))
