"""Counterfactual prompt pairs: each prompt and its gender-swapped twin, built with lmbias's own swap lexicon.

A prompt's twin is its counterfactual under one intervention of lmbias.corpora.counterfactual (``Swapper``) over
the project's word lists alone (resources/wordlists/: Lu et al.'s pairs and the project's extra ones; the
gendered pronouns are decided by the swapper's rules):

* ``grammatical`` (default): POS-aware, through the spaCy pipeline (`spacy_model`): object "her" -> "him",
  possessive "her" -> "his", "his" before a noun -> "her", predicative "his" -> "hers"; a gendered word that
  belongs to a proper name ("Queen Elizabeth", "King's College") is kept;
* ``naive``: the dictionary alone (spaCy's blank English tokenizer, no model), "her" always -> "his".

Names are never swapped (the swapper's ``names=False``): "Jacob Zachar is an American actor" becomes "Jacob
Zachar is an American actress". A prompt whose swap changes nothing (it has no gendered word, or only words
kept as part of a name) has no twin: it is counted as unpaired and left out, never paired with itself.

Each pair records the words swapped, in text order (``swaps``: (as written in the prompt, as written in the
twin), found by diffing the two texts' word tokens), and its direction from the genders of the words swapped
(``word_genders``: masculine = the first column of the word lists and he/him/his/himself, feminine = the second
and she/her/hers/herself): ``male->female`` when every swapped word of the prompt is masculine,
``female->male`` when every one is feminine, ``mixed`` otherwise ("he told her" -> "she told him").
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lmbias.corpora.swap_lexicon import load_lexicon, read_tsv_pairs, wordlist_files

MALE, FEMALE = "male", "female"
MALE_TO_FEMALE, FEMALE_TO_MALE, MIXED = "male->female", "female->male", "mixed"
DIRECTIONS = (MALE_TO_FEMALE, FEMALE_TO_MALE, MIXED)
PRONOUN_GENDERS = {
    **dict.fromkeys(("he", "him", "his", "himself"), MALE),
    **dict.fromkeys(("she", "her", "hers", "herself"), FEMALE),
}
#: Tokens of a text for the diff: a word (letters and digits with inner apostrophes: "ma'am", "he's") or one
#: other non-space character (a hyphen of "actor-filmmaker", "sons-in-law" stands alone).
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|\S")


@dataclass(frozen=True)
class PromptPair:
    prompt: str
    twin: str | None  # None: the swap changed nothing (unpaired)
    swaps: tuple[tuple[str, str], ...]  # (in the prompt, in the twin), text order
    direction: str | None  # DIRECTIONS; None when unpaired

    @property
    def paired(self) -> bool:
        return self.twin is not None


@functools.cache
def _genders(files: tuple[str, ...]) -> dict[str, str]:
    genders = dict(PRONOUN_GENDERS)
    for path in files:
        for masculine, feminine, _ in read_tsv_pairs(Path(path)):
            genders.setdefault(masculine, MALE)
            genders.setdefault(feminine, FEMALE)
    return genders


def word_genders(wordlists: Sequence[str | Path] | None = None) -> dict[str, str]:
    """{lower-case word: male | female} of the gendered pronouns and every word of the word lists (default the
    project's, resources/wordlists/; masculine first column, feminine second; the first list to name a word
    decides it)."""
    files = wordlist_files() if wordlists is None else wordlists
    return _genders(tuple(str(f) for f in files))


def swapped_spans(prompt: str, twin: str) -> tuple[tuple[str, str], ...]:
    """(text in `prompt`, text in `twin`) of every stretch of word tokens that differs between the two."""
    a = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(prompt)]
    b = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(twin)]
    matcher = difflib.SequenceMatcher(None, [t for t, _, _ in a], [t for t, _, _ in b], autojunk=False)
    spans = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        before = prompt[a[i1][1] : a[i2 - 1][2]] if i2 > i1 else ""
        after = twin[b[j1][1] : b[j2 - 1][2]] if j2 > j1 else ""
        spans.append((before, after))
    return tuple(spans)


def direction_of(swaps: Sequence[tuple[str, str]], genders: dict[str, str]) -> str:
    """male->female, female->male or mixed from the genders of the prompt's swapped words (a stretch of several
    tokens counts by those of its words that are gendered; one without any makes the pair mixed)."""
    seen = set()
    for before, _ in swaps:
        low = before.lower().replace("’", "'")
        words = [low] if low in genders else [t for t in _TOKEN.findall(low) if t[0].isalnum()]
        found = {genders[w] for w in words if w in genders}
        seen.update(found or {"?"})
    if seen == {MALE}:
        return MALE_TO_FEMALE
    if seen == {FEMALE}:
        return FEMALE_TO_MALE
    return MIXED


def make_swapper(intervention: str = "grammatical", spacy_model: str = "en_core_web_sm", nlp=None):
    """A Swapper over the project's word lists (no names); spaCy is loaded on first use (grammatical only)."""
    from lmbias.corpora.counterfactual import Swapper

    return Swapper(load_lexicon(), intervention=intervention, names=False, nlp=nlp, spacy_model=spacy_model)


def build_pairs(prompts: Sequence[str], swapper, genders: dict[str, str] | None = None) -> list[PromptPair]:
    """One PromptPair per prompt, in order: its twin (None where swapping changes nothing), the words swapped and
    the direction. `swapper`: lmbias.corpora.counterfactual.Swapper (make_swapper)."""
    genders = word_genders() if genders is None else genders
    prompts = [str(p) for p in prompts]
    twins = swapper.swap_texts(prompts)
    pairs = []
    for prompt, twin in zip(prompts, twins):
        if twin == prompt:
            pairs.append(PromptPair(prompt, None, (), None))
            continue
        swaps = swapped_spans(prompt, twin)
        pairs.append(PromptPair(prompt, twin, swaps, direction_of(swaps, genders)))
    return pairs
