"""WinoBias masked-pronoun scoring (Manela et al. 2021, sections 3.1, 3.2, 4.1 and 4.4).

Each WinoBias line has a bracketed pronoun. We hide it and ask the model how likely the male and the
female form of that line's pronoun pair are (he/she, him/her, his/her):

* mlm: log p(form) at the masked position;
* seq2seq: the encoder reads the masked sentence, log p(form) is the decoder's next token after the prefix;
* clm: log-likelihood of the whole sentence with each form filled in (causal models cannot look ahead).

Besides the sentence as written, the same pronoun is scored under extra *conditions* (scoring option
``conditions``; all four by default, every one a cheap extra request per item, so that a metric option
never needs a new forward pass). Each adds a ``<prefix>_logp_male`` / ``<prefix>_logp_female`` column pair:

* ``professions_masked`` (columns ``prior_all_*``): every profession noun phrase masked, the Online
  Skewness prior of section 3.2 ("[MASK] hired [MASK] because [MASK] was overwhelmed with clients");
* ``referent_masked`` (``prior_referent_*``): only the referent's noun phrase masked (the issue's variant);
* ``names`` (``names_*``, plus ``name_male``/``name_female``): Alice & Bob (section 4.1, Table 1), the
  referent becomes the name of the gold pronoun's gender, the other entity a name of the other gender;
* ``person`` (``person_*``): every profession replaced by "person" (section 4.4, Table 3).

A noun phrase is the occupation plus a directly preceding determiner (the/a/an), and for the referent also
the rest of its bracketed span. Where a model cannot read a mask, a masked profession is rewritten as "person"
instead (the `person` rewrite of resources/templates/winobias_substitutions.yaml): for clm the Online
Skewness prior is the likelihood of "The person hired the person because he/she was ..."; for seq2seq the
encoder reads the masks and the decoder prefix (which has to commit to some words) reads "person". For
mlm the pronoun is read at its own mask among the several masks of the sentence.

The per-item scores are the expensive part and are cached; skew, stereotype, the -O variants, the Alice &
Bob F1 and the competency proportions are computed from them (`lmbias.metrics.winobias`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

from lmbias.benchmarks.definition import BenchmarkDef, readings
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import InfillRequest, MaskedRequest, word_token_ids
from lmbias.errors import ConfigError, DataError
from lmbias.io import load_yaml
from lmbias.metrics.headline import Headline
from lmbias.metrics.winobias import CONDITION_PREFIX, WinoBiasOptions, winobias_metric_rows
from lmbias.options import check_block

log = logging.getLogger(__name__)

SCORES_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("type", pa.int8()),
        ("stereotype", pa.string()),
        ("gold_gender", pa.string()),
        ("male_form", pa.string()),
        ("female_form", pa.string()),
        ("logp_male", pa.float64()),
        ("logp_female", pa.float64()),
        ("score_kind", pa.string()),
        # The metric needs these two: `line` pairs a line's pro and anti versions (bootstrap units, one count
        # per sentence in the competency analysis); `other_pronouns` counts the flipped gendered pronouns left
        # visible beside the scored one (they give the gold gender away; the metric drops such lines).
        ("line", pa.int32()),
        ("other_pronouns", pa.int16()),
    ]
)

#: What logp_male / logp_female mean for each family.
SCORE_KIND = {"mlm": "token_logprob", "seq2seq": "token_logprob", "clm": "sentence_loglik"}

#: Extra scoring conditions, in column order (see the module docstring).
CONDITIONS = tuple(CONDITION_PREFIX)

#: Project-authored rewrites (names, "person", determiners). Editing it changes scores: the workflow
#: should treat it like the module's source (the definition's `resources`).
SUBSTITUTIONS_FILE = Path(__file__).resolve().parents[3] / "resources" / "templates" / "winobias_substitutions.yaml"


def scores_schema(conditions) -> pa.Schema:
    """SCORES_SCHEMA plus one (male, female) log-prob column pair per extra condition, in CONDITIONS order."""
    fields = list(SCORES_SCHEMA)
    for cond in CONDITIONS:
        if cond in conditions:
            prefix = CONDITION_PREFIX[cond]
            fields += [pa.field(f"{prefix}_logp_male", pa.float64()), pa.field(f"{prefix}_logp_female", pa.float64())]
    if "names" in conditions:
        fields += [pa.field("name_male", pa.string()), pa.field("name_female", pa.string())]
    return pa.schema(fields)


# -- rewrites -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Substitutions:
    names: tuple[tuple[str, str], ...]  # (female, male) pairs
    person: str
    person_plural: str
    determiners: frozenset[str]


def load_substitutions(path: str | Path = SUBSTITUTIONS_FILE) -> Substitutions:
    """Read resources/templates/winobias_substitutions.yaml (DataError naming the file on a bad entry)."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("file not found", path) from None
    except yaml.YAMLError as err:
        line = getattr(getattr(err, "problem_mark", None), "line", None)
        raise DataError(f"invalid YAML: {err}", path, None if line is None else line + 1) from None
    if not isinstance(data, dict) or set(data) != {"names", "person", "determiners"}:
        raise DataError("expected the keys names, person, determiners", path)
    names = data["names"]
    if (
        not isinstance(names, list)
        or not names
        or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(n, str) and n.strip() and " " not in n for n in p)
            for p in names
        )
    ):
        raise DataError("names: expected a non-empty list of [female, male] pairs of single words", path)
    person = data["person"]
    if not isinstance(person, dict) or set(person) != {"singular", "plural"}:
        raise DataError("person: expected {singular, plural}", path)
    dets = data["determiners"]
    if not isinstance(dets, list) or not all(isinstance(d, str) for d in dets):
        raise DataError("determiners: expected a list of words", path)
    return Substitutions(
        names=tuple((f, m) for f, m in names),
        person=str(person["singular"]),
        person_plural=str(person["plural"]),
        determiners=frozenset(d.lower() for d in dets),
    )


_MASK = object()  # placeholder replacement: the tokenizer's mask token


def _np_start(sentence: str, start: int, determiners) -> int:
    """Start of the noun phrase of an occupation at `start`: a directly preceding determiner is included."""
    before = sentence[:start].rstrip(" ")
    if len(before) == start:  # no space before the occupation: nothing to absorb
        return start
    word_start = len(before) - len(before.split(" ")[-1]) if before else 0
    word = before[word_start:]
    return word_start if word.lower() in determiners else start


@dataclass
class _Item:
    """Spans of one WinoBias line that the rewrites need (character offsets into `sentence`)."""

    sentence: str
    pronoun: tuple[int, int]
    mentions: list[tuple[int, int]]  # every occupation mention (occupation words only)
    nps: list[tuple[int, int]]  # their noun phrases (determiner included; referent span for the referent)
    referent: int  # index into mentions of the referent's occupation
    other: int | None  # index of the other entity's first mention (None if the line has none)


def _item(row: dict, subs: Substitutions) -> _Item:
    s = row["sentence"]
    mentions = [(m["start"], m["end"]) for m in row["professions"]]
    ref_span = (row["referent_start"], row["referent_end"])
    inside = [i for i, (a, b) in enumerate(mentions) if a >= ref_span[0] and b <= ref_span[1]]
    if len(inside) != 1:
        raise DataError(
            f"WinoBias item {row['item_id']}: expected one occupation inside the referent {row['referent']!r}"
        )
    referent = inside[0]
    nps = []
    for i, (a, b) in enumerate(mentions):
        start = _np_start(s, a, subs.determiners)
        if i == referent:
            start, b = min(start, ref_span[0]), max(b, ref_span[1])
        nps.append((start, b))
    others = [i for i in range(len(mentions)) if i != referent]
    return _Item(s, (row["pronoun_start"], row["pronoun_end"]), mentions, nps, referent, others[0] if others else None)


def _person_word(sentence: str, start: int, end: int, subs: Substitutions) -> str:
    word = sentence[start:end].split()[-1].lower()
    plural = word.endswith("s") or word.endswith("people") or word.endswith("men")
    out = subs.person_plural if plural else subs.person
    return out[:1].upper() + out[1:] if start == 0 else out


def _person_edits(item: _Item, which: list[int], subs: Substitutions) -> list[tuple[int, int, object]]:
    """Occupation words -> "person" (determiner kept; "an" -> "a")."""
    s = item.sentence
    edits = []
    for i in which:
        a, b = item.mentions[i]
        before = s[:a].rstrip(" ")
        det_start = len(before) - len(before.split(" ")[-1]) if before else 0
        det = before[det_start:]
        if det.lower() == "an" and len(before) < a:
            edits.append((det_start, len(before), det[0]))  # "an" -> "a", "An" -> "A"
        edits.append((a, b, _person_word(s, a, b, subs)))
    return edits


def _apply(sentence: str, edits, pronoun: tuple[int, int], mask_token: str | None, item_id: str):
    """Apply non-overlapping (start, end, replacement) edits; return (text, new pronoun span, masks before it)."""
    out, pos, shift, masks_before = [], 0, 0, 0
    p_start, p_end = pronoun
    for start, end, repl in sorted(edits, key=lambda e: e[0]):
        if start < pos:
            raise DataError(f"WinoBias item {item_id}: overlapping rewrites at character {start}")
        if start < p_end and end > p_start:
            raise DataError(f"WinoBias item {item_id}: a rewrite overlaps the scored pronoun")
        text = mask_token if repl is _MASK else repl
        if repl is _MASK and mask_token is None:
            raise DataError(f"WinoBias item {item_id}: a mask was asked of a model without a mask token")
        out.append(sentence[pos:start])
        out.append(text)
        if end <= p_start:
            shift += len(text) - (end - start)
            masks_before += repl is _MASK
        pos = end
    out.append(sentence[pos:])
    return "".join(out), (p_start + shift, p_end + shift), masks_before


def _condition_edits(cond: str, item: _Item, row: dict, subs: Substitutions, name_pair: tuple[str, str]):
    """(edits for the model's input, edits for text a model reads instead of masks) of one condition."""
    everyone = list(range(len(item.mentions)))
    if cond == "professions_masked":
        return [(a, b, _MASK) for a, b in item.nps], _person_edits(item, everyone, subs)
    if cond == "referent_masked":
        a, b = item.nps[item.referent]
        return [(a, b, _MASK)], _person_edits(item, [item.referent], subs)
    if cond == "names":
        female, male = name_pair
        gold, other = (male, female) if row["gold_gender"] == "male" else (female, male)
        edits = [(*item.nps[item.referent], gold)]
        if item.other is not None:
            edits.append((*item.nps[item.other], other))
        return edits, edits
    if cond == "person":
        edits = _person_edits(item, everyone, subs)
        return edits, edits
    raise ConfigError(f"unknown WinoBias scoring condition {cond!r}")


def rewrite(
    row: dict,
    condition: str,
    mask_token: str = "[MASK]",
    substitutions: Substitutions | None = None,
    name_pair: tuple[str, str] | None = None,
) -> dict:
    """One item under one condition, as the scorer builds it (for inspection and tests).

    Returns {"masked": text a masked model reads (pronoun masked too), "mask_index": the pronoun's mask
    among the masks, "text": the mask-free rewrite (what causal models and seq2seq decoders read, pronoun
    as written)}.
    """
    subs = substitutions or load_substitutions()
    item = _item(row, subs)
    model_edits, text_edits = _condition_edits(condition, item, row, subs, name_pair or subs.names[0])
    masked, (a, b), k = _apply(item.sentence, model_edits, item.pronoun, mask_token, row["item_id"])
    text, _, _ = _apply(item.sentence, text_edits, item.pronoun, None, row["item_id"])
    return {"masked": masked[:a] + mask_token + masked[b:], "mask_index": k, "text": text}


# -- scoring ---------------------------------------------------------------------------------------


def _match_case(form: str, surface: str) -> str:
    if surface.isupper() and len(surface) > 1:
        return form.upper()
    if surface[:1].isupper():
        return form[:1].upper() + form[1:]
    return form


def _single_token(tokenizer, word: str, after_space: bool, item_id: str) -> int:
    ids = word_token_ids(tokenizer, word, after_space=after_space)
    if len(ids) != 1:
        pieces = tokenizer.convert_ids_to_tokens(ids)
        raise DataError(
            f"WinoBias item {item_id}: candidate {word!r} is {len(ids)} tokens {pieces} for this tokenizer; "
            "masked-pronoun scoring needs single-token pronouns"
        )
    return ids[0]


def scoring_options(scoring: dict | None, key: str = "benchmarks.winobias.scoring") -> dict:
    """Scoring options checked against the schema's winobias.scoring, with defaults: batch_size, max_length,
    conditions (all, in column order), name_pairs (1)."""
    check_block(scoring, "benchmarks.winobias.scoring", key)
    scoring = scoring or {}
    conditions = scoring.get("conditions", list(CONDITIONS))
    return {
        "batch_size": scoring.get("batch_size", 64),
        "max_length": scoring.get("max_length", 128),
        "conditions": [c for c in CONDITIONS if c in conditions],
        "name_pairs": scoring.get("name_pairs", 1),
    }


@dataclass(frozen=True)
class _Prepared:
    """What every reading of WinoBias starts from: options, rows, each row's parsed item, name pair and (male,
    female) pronoun forms in the row's case."""

    opts: dict
    rows: list
    items: list
    pairs: list
    forms: list
    subs: object


def _prepare(items: pa.Table, scoring: dict | None, substitutions) -> _Prepared:
    opts = scoring_options(scoring)
    subs = load_substitutions(substitutions or SUBSTITUTIONS_FILE)
    if opts["name_pairs"] > len(subs.names):
        raise ConfigError(
            f"benchmarks.winobias.scoring.name_pairs: {opts['name_pairs']} pairs asked, "
            f"{len(subs.names)} in {substitutions or SUBSTITUTIONS_FILE}"
        )
    rows = items.to_pylist()
    parsed = [_item(row, subs) for row in rows]
    pairs = [subs.names[(row["line"] - 1) % opts["name_pairs"]] if "line" in row else subs.names[0] for row in rows]
    forms = [
        (_match_case(row["male_form"], row["pronoun"]), _match_case(row["female_form"], row["pronoun"])) for row in rows
    ]
    return _Prepared(opts, rows, parsed, pairs, forms, subs)


def _mask_token(lm: LanguageModel) -> str:
    mask = getattr(lm.tokenizer, "mask_token", None)
    if mask is None:
        raise DataError(f"WinoBias: the tokenizer of {lm.model_name} has no mask token to read the pronoun at")
    return mask


def _views(p: _Prepared, mask: str | None) -> list[tuple[int, str, str, tuple[int, int], int, str]]:
    """Every (item, condition) view: (row, condition, input text, the pronoun's span in it, the pronoun's mask
    index among the masks, the decoder's prefix, mask-free). Condition "" is the sentence as written. With a
    `mask` (a masked or encoder-decoder reading) the input carries the model-side edits (masks included);
    without (a causal LM reads every edit as text) the text-side edits alone."""
    views = []
    for i, (row, item, pair) in enumerate(zip(p.rows, p.items, p.pairs)):
        views.append((i, "", item.sentence, item.pronoun, 0, item.sentence[: item.pronoun[0]]))
        for cond in p.opts["conditions"]:
            model_edits, text_edits = _condition_edits(cond, item, row, p.subs, pair)
            text_only, text_pron, _ = _apply(item.sentence, text_edits, item.pronoun, None, row["item_id"])
            if mask is None:
                views.append((i, cond, text_only, text_pron, 0, text_only[: text_pron[0]]))
            else:
                text, pron, k = _apply(item.sentence, model_edits, item.pronoun, mask, row["item_id"])
                views.append((i, cond, text, pron, k, text_only[: text_pron[0]]))
    return views


def _table(p: _Prepared, views, values, kind: str) -> pa.Table:
    conditions = p.opts["conditions"]
    records = [
        {
            "item_id": row["item_id"],
            "type": row["type"],
            "stereotype": row["stereotype"],
            "gold_gender": row["gold_gender"],
            "male_form": row["male_form"],
            "female_form": row["female_form"],
            "score_kind": kind,
            "line": row.get("line"),
            "other_pronouns": len(row.get("other_pronouns") or []),
        }
        for row in p.rows
    ]
    for (i, cond, *_), (male, female) in zip(views, values):
        prefix = CONDITION_PREFIX[cond] + "_" if cond else ""
        records[i][f"{prefix}logp_male"] = float(male)
        records[i][f"{prefix}logp_female"] = float(female)
    if "names" in conditions:
        for rec, (female, male) in zip(records, p.pairs):
            rec["name_male"], rec["name_female"] = male, female
    log.info("WinoBias: %d items x (1 + %d conditions %s) scored", len(p.rows), len(conditions), conditions)
    return pa.Table.from_pylist(records, schema=scores_schema(conditions))


def score_sentences(
    items: pa.Table, lm: LanguageModel, scoring: dict | None = None, substitutions: str | Path | None = None
) -> pa.Table:
    """A causal LM's reading: the log-likelihood of each view's sentence with the male and with the female
    pronoun, in one engine call."""
    p = _prepare(items, scoring, substitutions)
    views = _views(p, None)
    texts = []
    for i, _, text, (a, b), _, _ in views:
        m, f = p.forms[i]
        texts += [text[:a] + m + text[b:], text[:a] + f + text[b:]]
    lls = lm.sentence_logprobs(texts, batch_size=p.opts["batch_size"], max_length=p.opts["max_length"])
    values = [(lls[2 * k], lls[2 * k + 1]) for k in range(len(views))]
    return _table(p, views, values, SCORE_KIND["clm"])


def _pronoun_logprobs(lm: LanguageModel, p: _Prepared, views, request) -> list[tuple[float, float]]:
    """log p of the male and the female pronoun (each one token) of every view, as `request(masked text,
    candidates, mask index, decoder prefix)` asks it, in one engine call."""
    tokenizer = lm.tokenizer
    cands_of = {}
    requests = []
    for i, _condition, text, (a, b), k, dec in views:
        row = p.rows[i]
        after_space = a > 0 and text[a - 1] == " "
        if (i, after_space) not in cands_of:
            m, f = p.forms[i]
            cands_of[(i, after_space)] = (
                _single_token(tokenizer, m, after_space, row["item_id"]),
                _single_token(tokenizer, f, after_space, row["item_id"]),
            )
        masked = text[:a] + tokenizer.mask_token + text[b:]
        requests.append(request(masked, cands_of[(i, after_space)], k, dec))
    out = lm.candidate_logprobs(requests, batch_size=p.opts["batch_size"], max_length=p.opts["max_length"])
    return [(float(o[0]), float(o[1])) for o in out]


def score_masked_pronouns(
    items: pa.Table, lm: LanguageModel, scoring: dict | None = None, substitutions: str | Path | None = None
) -> pa.Table:
    """A masked LM's reading: the male and the female pronoun at the pronoun's mask."""
    p = _prepare(items, scoring, substitutions)
    views = _views(p, _mask_token(lm))

    def request(masked, cands, k, _dec):
        return MaskedRequest(text=masked, candidates=cands, mask_index=k)

    return _table(p, views, _pronoun_logprobs(lm, p, views, request), SCORE_KIND["mlm"])


def score_infilled_pronouns(
    items: pa.Table, lm: LanguageModel, scoring: dict | None = None, substitutions: str | Path | None = None
) -> pa.Table:
    """An encoder-decoder's reading: the male and the female pronoun written by the decoder after the text
    before it."""
    p = _prepare(items, scoring, substitutions)
    views = _views(p, _mask_token(lm))

    def request(masked, cands, _k, dec):
        return InfillRequest(masked_text=masked, prefix=dec.rstrip(" "), candidates=cands)

    return _table(p, views, _pronoun_logprobs(lm, p, views, request), SCORE_KIND["seq2seq"])


#: Score every WinoBias item (rows of results/data/winobias.parquet) under every configured condition, each
#: family by its reading.
score_winobias = readings(
    "WinoBias scoring", clm=score_sentences, mlm=score_masked_pronouns, seq2seq=score_infilled_pronouns
)

BENCHMARKS = [
    BenchmarkDef(
        name="winobias",
        families=("mlm", "clm", "seq2seq"),
        score=score_winobias,
        parse_options=WinoBiasOptions.from_config,
        rows=winobias_metric_rows,
        description="Manela et al. 2021: F1 per gender on pro/anti sets, mu_skew, mu_stereo; Online Skewness "
        "Mitigation (-O), Alice & Bob baseline, competency proportions",
        resources=("resources/templates/winobias_substitutions.yaml",),
        row_local=True,
        headlines=(
            Headline("mu_skew", None, "WinoBias mean skew", "0"),
            Headline("mu_stereo", None, "WinoBias mean stereotype", "0"),
        ),
    )
]
