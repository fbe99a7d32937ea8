"""How one tagged sentence is swapped: the rules of the grammatical and naive interventions (pronouns by tag,
dictionary words, titles and names, proper-name and coreference protection) and the document-wide name
decisions. The rules and the reasons for them are documented in lmbias.corpora.counterfactual, whose
`Swapper` feeds these rules the sentences its spaCy pipeline tags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lmbias.corpora.swap_lexicon import FIXED_PRONOUNS, PRONOUNS, SwapLexicon
from lmbias.corpora.swap_sentence import WORD_SPLIT_RE, Sentence

#: The naive intervention's pronoun table (no POS): her -> his always, his -> her always.
NAIVE_PRONOUNS = {**FIXED_PRONOUNS, "her": "his", "his": "her"}
#: Courtesy titles: flipped even before a name.
HONORIFICS = frozenset({"mr", "mr.", "mrs", "mrs.", "ms", "ms.", "miss", "mx", "mx."})
#: Words flipped only when capitalised ("Miss Taylor", not "I miss you").
TITLE_ONLY = frozenset({"miss"})
#: Titles after which a single name is a surname ("Mrs. Taylor").
SURNAME_TITLES = HONORIFICS | frozenset({"dr", "dr.", "prof", "prof.", "mister", "missus"})
#: A title before a swapped name takes its titular partner, not the dictionary's ("Sir X" -> "Dame Y").
TITLE_PARTNERS = {"sir": "dame", "dame": "sir", "lady": "lord", "lord": "lady", "madam": "sir"}
#: Entity labels whose gendered words are kept when the entity holds a real name (places, organisations ...).
PROTECT_LABELS = frozenset({"ORG", "FAC", "GPE", "LOC", "WORK_OF_ART", "EVENT", "PRODUCT", "LAW", "NORP"})

_FUNCTION_WORDS = frozenset(
    {
        "the",
        "a",
        "an",
        "of",
        "and",
        "&",
        "for",
        "in",
        "on",
        "at",
        "to",
        "de",
        "la",
        "le",
        "du",
        "des",
        "von",
        "van",
        "der",
    }
)
_VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"})
_PROPER_TAGS = frozenset({"NNP", "NNPS"})
# Tags after which a possessive determiner cannot stand: "her"/"his" there is object/predicative.
_NP_STOP_TAGS = frozenset(
    {
        "CC",
        "IN",
        "TO",
        "MD",
        "VBD",
        "VBZ",
        "VBP",
        "VB",
        "DT",
        "PDT",
        "WDT",
        "WP",
        "WP$",
        "WRB",
        "PRP",
        "PRP$",
        "EX",
        "RP",
        "UH",
        "POS",
        "HYPH",
        ".",
        ",",
        ":",
        "``",
        "''",
        "-LRB-",
        "-RRB-",
        "NFP",
        "_SP",
        "SP",
    }
)
# Looked past when deciding whether a noun follows a possessive; _NP_WORDS are heads/determiners themselves.
_SKIP_TAGS = frozenset({"JJ", "JJR", "RB", "RBR"})
# ordinals head an elliptical noun phrase like superlatives do: "her third [marriage] to a peer"
_NP_WORDS = frozenset(
    {
        "own",
        "every",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "last",
        "next",
        "latest",
        "previous",
        "other",
    }
)
_STOP_PUNCT = frozenset(".,;:!?)]}\"'”’»…—–-")


def match_case(original: str, replacement: str) -> str:
    """Give `replacement` the case pattern of `original`: he->she, He->She, HE->SHE, Son-In-Law->Daughter-In-Law."""
    letters = [c for c in original if c.isalpha()]
    if not letters:
        return replacement
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return replacement.upper()
    if original[0].isupper() or (not original[0].isalpha() and letters[0].isupper()):
        if "-" in original and original.istitle():
            return "-".join(p[:1].upper() + p[1:] for p in replacement.split("-"))
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _all_caps(sent) -> bool:
    """True when (nearly) every word of the sentence is upper-case: shouted text, headlines."""
    words = [t for t in sent.texts if any(c.isalpha() for c in t)]
    caps = sum(1 for t in words if t.isupper() and len(t) > 1 or t == "I")
    return len(words) >= 2 and caps >= 0.8 * len(words)


def _is_capitalised(text: str) -> bool:
    return bool(text) and text[0].isupper()


@dataclass
class SwapStats:
    """Running counts of one Swapper (texts seen/changed, tokens swapped by kind, words kept as names)."""

    texts: int = 0
    changed_texts: int = 0
    pronouns: int = 0
    words: int = 0
    names: int = 0
    kept_in_names: int = 0
    kept_in_clusters: int = 0  # gendered tokens kept by gold coreference (protect=)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class PendingSentence:
    """A sentence rendered except for its name slots, waiting for its document's name decisions."""

    tokens: list[str]  # output token texts (swapped where decided)
    ws: list[str]  # each token's original trailing whitespace
    name_slots: list[tuple[int, str]]  # (token index, lower-case name)
    title_slots: list[tuple[int, list[str], tuple, int]]  # (index, swapped title tokens, linked names, length)
    given: set[str]
    surnames: set[str]
    original: str
    coref_slots: list[tuple[int, str, tuple[str, ...], bool]] = field(default_factory=list)  # (index, swapped
    # token, its name's lower-case words, is a pronoun): flipped only if the name is swapped (names=True)


class SwapRules:
    """The decisions of one intervention on tagged sentences (`analyse`), and their rendering once a
    document's name decisions are known (`finish_group`); ``stats`` (SwapStats) counts what was swapped.
    lmbias.corpora.counterfactual.Swapper adds the spaCy pipeline that tags the sentences."""

    def __init__(self, lexicon: SwapLexicon, grammatical: bool, names: bool):
        self.lexicon = lexicon
        self.names = bool(names)
        self.grammatical = grammatical
        self.stats = SwapStats()
        self._words = lexicon.word_pairs
        self._name_pairs = lexicon.name_pairs
        # multi-token dictionary entries ("son-in-law", "ma'am"), keyed by their first token
        self._phrases: dict[str, list[tuple[tuple[str, ...], str]]] = {}

    def _match_word(self, sent: Sentence, i: int, lows: list[str]) -> tuple[int, str] | None:
        """(number of tokens, dictionary key) of the gendered word starting at token i, longest first."""
        low = lows[i]
        for toks, key in self._phrases.get(low, ()):
            k = len(toks)
            if i + k <= sent.n and tuple(lows[i : i + k]) == toks and not any(sent.ws[i : i + k - 1]):
                return k, key
        if low in self._words:
            return 1, low
        return None

    def _her_is_possessive(self, sent: Sentence, i: int) -> bool:
        """Possessive ("her dog" -> his) or object ("saw her" -> him): tag and parse, checked by what follows."""
        if self._no_noun_follows(sent, i):
            return False  # "saw her.", "made her happy.", "leave her alone", "gave her the"
        tag, dep = sent.tags[i], sent.deps[i]
        if tag == "PRP$" or dep == "poss":
            return True
        if tag == "PRP":
            return False
        # odd tag (e.g. NN in all-caps text): a following noun/adjective/number reads as possessive
        nxt = self._next_token(sent, i)
        return nxt is not None and (sent.tags[nxt] or "").startswith(("NN", "JJ", "CD", "VBG"))

    def _his_is_predicative(self, sent: Sentence, i: int) -> bool:
        """Predicative ("is his" -> hers) or determiner ("his dog" -> her)."""
        return sent.tags[i] == "PRP" or self._no_noun_follows(sent, i)

    @staticmethod
    def _next_token(sent: Sentence, i: int) -> int | None:
        j = i + 1
        while j < sent.n and not sent.texts[j].strip():
            j += 1
        return j if j < sent.n else None

    def _no_noun_follows(self, sent: Sentence, i: int) -> bool:
        """True when no noun phrase can follow token i: a possessive determiner there has nothing to determine.

        Adjectives and adverbs are looked past ("her very old car" vs "found her asleep."); superlatives,
        ordinals and "own" count as heads ("did his best", "her third to a peer", "of her own").
        """
        j = self._next_token(sent, i)
        while j is not None:
            if not sent.ws[j] and j + 1 < sent.n and sent.texts[j + 1] in ("-", "‐"):
                return False  # a hyphenated compound: "her half-brother", "his so-called friend"
            if sent.tags[j] not in _SKIP_TAGS or sent.texts[j].lower() in _NP_WORDS:
                break
            j = self._next_token(sent, j)
        if j is None:
            return True
        text = sent.texts[j]
        if text and all(c in _STOP_PUNCT for c in text):
            return True
        tag = sent.tags[j]
        return tag in _NP_STOP_TAGS and text.lower() not in _NP_WORDS

    def _proper_title(self, sent: Sentence, i: int, k: int, lows: list[str], ent_spans) -> tuple | None:
        """Linked name token indices when the gendered word at i..i+k is a title inside a proper name."""
        end = i + k
        label = sent.ents[i]
        if label == "PERSON":
            start, stop = next(((s, e) for s, e, _ in ent_spans if s <= i < e), (i, end))
            others = [
                j
                for j in range(start, stop)
                if not (i <= j < end)
                and sent.texts[j][:1].isalpha()
                and lows[j] not in self._words
                and lows[j] not in HONORIFICS
            ]
            if others:
                return tuple(others)
        if sent.tags[i] not in _PROPER_TAGS or not _is_capitalised(sent.texts[i]):
            return None
        j = end
        if j < sent.n and lows[j] in ("'s", "’s", "'") and not sent.ws[j - 1]:
            j += 1
        linked = []
        while (
            j < sent.n
            and sent.tags[j] in _PROPER_TAGS
            and _is_capitalised(sent.texts[j])
            and lows[j] not in self._words
            and lows[j] not in HONORIFICS
        ):
            linked.append(j)
            if sent.ws[j] == "" and j + 1 < sent.n and not sent.texts[j + 1][:1].isalpha():
                break
            j += 1
        return tuple(linked) if linked else None

    def analyse(
        self,
        sent: Sentence,
        original: str,
        protect: set[int] = frozenset(),
        name_links: dict[int, tuple[str, ...]] | None = None,
    ) -> PendingSentence:
        """Decide every token of one sentence. `protect`: token indices not to flip; `name_links` (a subset,
        used with names=True): protected tokens that flip exactly when their name (words) is swapped."""
        n = sent.n
        lows = [t.lower() for t in sent.texts]
        out: list[str | None] = [None] * n
        coref_slots: list[tuple[int, str, tuple[str, ...], bool]] = []
        if protect:
            conditional = set(name_links or {}) & set(protect) if self.names else set()
            for j in protect:
                if 0 <= j < n and j not in conditional and self.lexicon.is_gendered(lows[j]):
                    self.stats.kept_in_clusters += 1
            protect = set(protect) - conditional
        else:
            conditional = set()
        grammatical = self.grammatical
        ent_spans = sent.entity_spans() if any(sent.ents) else []
        # a gendered word is kept inside an ORG/FAC/WORK_OF_ART/... entity only when the entity also holds a
        # real name ("Prince Street", "King's College", "His Dark Materials"); NER also labels bits like
        # "The Queen of" (WORK_OF_ART), which must not block the flip
        named_entity = [False] * n
        for s, e, label in ent_spans:
            if label in PROTECT_LABELS:
                for j in range(s, e):
                    named_entity[j] = any(self._is_name_word(sent, m, lows) for m in range(s, e) if m != j)
        title_slots: list[tuple[int, list[str], tuple, int]] = []
        caps = _all_caps(sent)  # in ALL-CAPS text tags and entities do not mark proper names
        untagged = all(t is None for t in sent.tags)
        i = 0
        while i < n:
            low = lows[i]
            if i in protect:
                i += 1
                continue
            # ---- pronouns
            if low in PRONOUNS:
                if grammatical and not caps and named_entity[i] and _is_capitalised(sent.texts[i]):
                    self.stats.kept_in_names += 1
                elif not grammatical or untagged:
                    out[i] = match_case(sent.texts[i], NAIVE_PRONOUNS[low])
                elif low == "her":
                    out[i] = match_case(sent.texts[i], "his" if self._her_is_possessive(sent, i) else "him")
                elif low == "his":
                    out[i] = match_case(sent.texts[i], "hers" if self._his_is_predicative(sent, i) else "her")
                else:
                    out[i] = match_case(sent.texts[i], FIXED_PRONOUNS[low])
                if out[i] is not None:
                    self.stats.pronouns += 1
                i += 1
                continue
            # ---- dictionary words
            hit = self._match_word(sent, i, lows)
            if hit is None:
                i += 1
                continue
            k, key = hit
            if any(j in protect for j in range(i, i + k)):
                i += k
                continue
            partner = self._words[key]
            replacement = self._replacement(sent, i, k, partner)
            title_replacement = replacement
            if key in TITLE_PARTNERS:
                title_replacement = self._replacement(sent, i, k, TITLE_PARTNERS[key])
            text = "".join(sent.texts[i : i + k])
            if key in TITLE_ONLY and not (
                _is_capitalised(text) and (not grammatical or sent.tags[i] in _PROPER_TAGS or sent.tags[i] is None)
            ):
                i += k
                continue
            if grammatical:
                tag = sent.tags[i]
                if tag in _VERB_TAGS and key not in HONORIFICS:
                    i += k
                    continue
                if named_entity[i] and not caps:
                    self.stats.kept_in_names += 1
                    i += k
                    continue
                if key not in HONORIFICS and not caps:
                    linked = self._proper_title(sent, i, k, lows, ent_spans)
                    if linked is not None:
                        self.stats.kept_in_names += 1
                        if self.names:
                            title_slots.append((i, title_replacement, linked, k))
                        i += k
                        continue
            for j, r in enumerate(replacement):
                out[i + j] = r
            self.stats.words += 1
            i += k
        # ---- names: collect given names / surnames and the slots where a name may be swapped
        name_slots: list[tuple[int, str]] = []
        given: set[str] = set()
        surnames: set[str] = set()
        if self.names:
            self._collect_names(sent, lows, ent_spans, out, name_slots, given, surnames)
        # protected words linked to a name (names=True): decided like any other, applied only if the name
        # is swapped in the document (finish_group)
        for j in sorted(conditional):
            if out[j] is not None:
                coref_slots.append((j, out[j], name_links[j], lows[j] in PRONOUNS))
                out[j] = None
        tokens = [sent.texts[j] if out[j] is None else out[j] for j in range(n)]
        return PendingSentence(
            tokens=tokens,
            ws=list(sent.ws),
            name_slots=name_slots,
            title_slots=title_slots,
            given=given,
            surnames=surnames,
            original=original,
            coref_slots=coref_slots,
        )

    def _is_name_word(self, sent: Sentence, j: int, lows: list[str]) -> bool:
        """A capitalised proper-noun token that is not itself gendered or a function word."""
        text = sent.texts[j]
        if not text[:1].isupper() or not any(c.isalpha() for c in text):
            return False
        low = lows[j]
        if low in self._words or low in HONORIFICS or low in PRONOUNS or low in _FUNCTION_WORDS:
            return False
        tag = sent.tags[j]
        return tag is None or tag in _PROPER_TAGS or tag.startswith(("NN", "CD", "JJ"))

    def _replacement(self, sent: Sentence, i: int, k: int, partner: str) -> list[str]:
        """Per-token replacement of the k tokens at i (a phrase keeps its own token split when it can)."""
        if k == 1:
            return [match_case(sent.texts[i], partner)]
        parts = WORD_SPLIT_RE.findall(partner)
        if len(parts) == k:
            return [match_case(sent.texts[i + j], parts[j]) for j in range(k)]
        whole = "".join(sent.texts[i : i + k])
        return [match_case(whole, partner)] + [""] * (k - 1)

    def _collect_names(self, sent, lows, ent_spans, out, name_slots, given, surnames) -> None:
        names = self._name_pairs
        in_person = [False] * sent.n
        for s, e, label in ent_spans:
            if label != "PERSON":
                continue
            toks = []
            for j in range(s, e):
                in_person[j] = True
                if (
                    sent.texts[j][:1].isalpha()
                    and lows[j] not in self._words
                    and lows[j] not in HONORIFICS
                    and lows[j] not in PRONOUNS
                ):
                    toks.append(j)
            # a hyphenated name ("Glen-Coats", "Jean-Paul") is one unit: never swapped piecewise
            hyphenated = {
                j
                for j in toks
                if (not sent.ws[j] and j + 1 < sent.n and sent.texts[j + 1] == "-")
                or (j >= 2 and sent.texts[j - 1] == "-" and not sent.ws[j - 2])
            }
            surnames.update(lows[j] for j in hyphenated)
            toks = [j for j in toks if j not in hyphenated]
            if not toks:
                continue
            prev = s - 1
            while prev >= 0 and not sent.texts[prev].strip():
                prev -= 1
            titled = (prev >= 0 and lows[prev] in SURNAME_TITLES) or any(
                lows[j] in SURNAME_TITLES for j in range(s, toks[0])
            )
            if len(toks) >= 2:
                surnames.add(lows[toks[-1]])
                given.update(lows[j] for j in toks[:-1] if lows[j] in names)
            elif titled:
                surnames.add(lows[toks[0]])
            elif lows[toks[0]] in names:
                given.add(lows[toks[0]])
        for j in range(sent.n):
            if out[j] is not None or lows[j] not in names or not _is_capitalised(sent.texts[j]):
                continue
            if sent.ents[j] and sent.ents[j] != "PERSON":
                continue
            if in_person[j] or sent.tags[j] in _PROPER_TAGS or sent.tags[j] is None:
                name_slots.append((j, lows[j]))

    def finish_group(self, group: list[PendingSentence], tokens: bool = False):
        """Apply the document's name decisions to its sentences, render them and count changes."""
        swap: set[str] = set()
        if self.names:
            given = set().union(*(p.given for p in group))
            surnames = set().union(*(p.surnames for p in group))
            swap = given - surnames
        results = []
        for p in group:
            toks = p.tokens
            if p.coref_slots:
                toks = list(toks)
                for j, replacement, name_words, is_pronoun in p.coref_slots:
                    if any(w in swap for w in name_words):
                        toks[j] = replacement
                    else:  # its name is kept: Lu et al.'s rule keeps the word too
                        self.stats.kept_in_clusters += 1
                        if is_pronoun:
                            self.stats.pronouns -= 1
                        else:
                            self.stats.words -= 1
            if swap and p.name_slots:
                toks = list(toks)
                swapped_idx = set()
                for j, low in p.name_slots:
                    if low in swap:
                        toks[j] = match_case(toks[j], self._name_pairs[low])
                        swapped_idx.add(j)
                        self.stats.names += 1
                for j, replacement, linked, k in p.title_slots:
                    if swapped_idx & set(linked):
                        toks[j : j + k] = replacement
                        self.stats.words += 1
                        self.stats.kept_in_names -= 1
            if tokens:
                result = list(toks)
            else:
                result = "".join(t + w for t, w in zip(toks, p.ws))
            self.stats.texts += 1
            if (" ".join(result) if tokens else result) != p.original:
                self.stats.changed_texts += 1
            results.append(result)
        return results
