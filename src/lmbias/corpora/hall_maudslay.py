"""Hall Maudslay et al.'s (2019) word-by-word substitution, as the over-debiasing authors' CDS runs it
(DA-Gender ``CDA/substitutor.py``, built with cda_default_pairs.json and names_pairs_1000_scaled.json).

Option ``substitutor: hall_maudslay`` of a `corpora.gap.interventions` entry. Per spaCy token, right to left:

1. a token whose lower-case text is in the word list becomes its partner, wherever it stands: no part of
   speech, proper-name or verb rule ("King's College" -> "Queen's College", "they man the station" -> "they
   woman ..."); the list's he/she and mr/mrs are entries like any other;
2. else, a token tagged PERSON by spaCy's NER whose lower-case text is in the name list becomes its partner
   (surnames too: a listed name is one word however it is used);
3. else the pronoun rules, by the tagger alone: him -> her; his -> hers when tagged NNS, her otherwise;
   her -> his when tagged PRP$, him otherwise; hers -> his. himself and herself are in neither list and
   stay as they are.

Case is matched as theirs does: all lower, ALL UPPER, or Capitalised like the original; any other mix gets
the partner in lower case. The word list maps both ways, and a word listed twice keeps its last partner (the
previous pairing of either word is dropped, as their two-way dictionary does). There is no gold coreference:
nothing is kept for a proper noun (``protect_proper_noun_clusters`` must be false).

What differs from lmbias.corpora.counterfactual.Swapper (the default ``substitutor: lmbias``): its grammatical
rules keep gendered words inside proper names and never flip verbs, decide "her"/"his" from the following
words and the parser as well as the tag, flip himself/herself and Ms/Miss, and swap a name only where it is
a given name in its document.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from lmbias.corpora.swap_rules import SwapStats
from lmbias.errors import ConfigError

log = logging.getLogger(__name__)


def two_way(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Both directions of every (male, female) pair, lower-cased; a later pair undoes the earlier pairings of
    its two words (their TwoWayDict)."""
    table: dict[str, str] = {}
    for male, female in pairs:
        male, female = male.lower(), female.lower()
        for word in (male, female):
            if word in table:
                partner = table.pop(word)
                if table.get(partner) == word:
                    del table[partner]
        table[male] = female
        table[female] = male
    return table


def match_case(partner: str, original: str) -> str:
    """The partner in the original's case: lower, UPPER or Capitalised; otherwise as listed (lower case)."""
    if original.islower():
        return partner.lower()
    if original.isupper():
        return partner.upper()
    if original[:1].isupper() and original[1:].islower():
        return partner[:1].upper() + partner[1:].lower()
    return partner


class HallMaudslaySubstitutor:
    """Swap texts as Hall Maudslay et al.'s substitutor does; the interface of Swapper.swap_texts."""

    intervention = "hall_maudslay"

    def __init__(self, word_pairs: Sequence[tuple[str, str]], name_pairs: Sequence[tuple[str, str]] | None, nlp):
        self.words = two_way(word_pairs)
        self.name_table = two_way(name_pairs or [])
        self.names = bool(name_pairs)
        self.nlp = nlp  # a spaCy pipeline with the tagger and NER
        self.stats = SwapStats()

    def partner(self, token) -> str | None:
        """The replacement of one spaCy token, or None to keep it."""
        low = token.text.lower()
        if low in self.words:
            self.stats.words += 1
            return match_case(self.words[low], token.text)
        if low in self.name_table and token.ent_type_ == "PERSON":
            self.stats.names += 1
            return match_case(self.name_table[low], token.text)
        partner = None
        if low == "him":
            partner = "her"
        elif low == "his":
            partner = "hers" if token.tag_ == "NNS" else "her"
        elif low == "her":
            partner = "his" if token.tag_ == "PRP$" else "him"
        elif low == "hers":
            partner = "his"
        if partner is None:
            return None
        self.stats.pronouns += 1
        return match_case(partner, token.text)

    def swap_doc(self, doc) -> str:
        text = doc.text
        for token in reversed(doc):
            partner = self.partner(token)
            if partner is not None:
                text = text[: token.idx] + partner + text[token.idx + len(token.text) :]
        return text

    def swap_text(self, text: str) -> str:
        return self.swap_texts([text])[0]

    def swap_texts(
        self, texts: Iterable[str], batch_size: int = 256, doc_ids: Sequence | None = None, protect=None
    ) -> list[str]:
        """Every text swapped (doc_ids are not needed: a name's partner is fixed). protect must be empty."""
        if protect is not None and any(protect):
            raise ConfigError(
                "protect_proper_noun_clusters: the hall_maudslay substitutor keeps nothing for gold "
                "coreference; set it false"
            )
        out = []
        for doc in self.nlp.pipe(list(texts), batch_size=batch_size):
            swapped = self.swap_doc(doc)
            self.stats.texts += 1
            self.stats.changed_texts += swapped != doc.text
            out.append(swapped)
        return out
