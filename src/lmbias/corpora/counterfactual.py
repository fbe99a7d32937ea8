"""Counterfactual gender interventions (Lu et al. 2018; names as in Hall Maudslay et al. 2019).

Two interventions, as in Lu et al.:

- ``naive``: the dictionary alone. Every gendered word becomes its partner, whatever its part of speech;
  ``her`` always becomes ``his`` and ``his`` always ``her``. This reproduces the paper's baseline *with its
  known error*: object "her" ("I saw her.") becomes "I saw his." (bias-bench's CDA makes the same mistake).
- ``grammatical``: the same dictionary, but pronouns are decided by their tag (spaCy's tagger, or the gold
  PTB column of a CoNLL file), verbs are never flipped ("they man the station"), and gendered words that
  belong to a proper name are kept ("Queen Elizabeth", "Prince Street", "King's College").

Pronoun rules (grammatical): he<->she, him->her, her(PRP, object)->him, her(PRP$)->his, his(PRP$)->her,
his(predicative: "the book is his", tag PRP or no noun after it)->hers, hers->his (en_core_web_sm tags
"hers" NNS, so "hers" is decided by its spelling), himself<->herself. Two checks back the tag up:
(1) what follows: past adjectives and adverbs, a possessive needs a noun (or an ordinal, a superlative,
"own"); when punctuation, a verb, a determiner, a preposition ... or the end comes instead, "her" is an
object ("found her asleep.", "gave her the book") and "his" predicative ("was his alone."); (2) for "her",
the parser's "poss" arc (en_core_web_sm tags "kept her promise" PRP but parses it as poss). The parser
runs only on texts that contain "her"; a pipeline without a parser works, slightly less well.

Decisions documented here (and tested in tests/corpora/test_counterfactual.py):

- Courtesy titles Mr/Mrs/Ms/Miss are always flipped, also before a name ("Mr. Smith said he ..." ->
  "Mrs. Smith said she ..."): they mark the person's gender, as the pronouns do. "miss" is flipped only
  when capitalised (and, grammatical, tagged as a proper noun): "I miss you" stays.
- Rank and family titles that are part of a name (King, Queen, Prince, Sir, Lady, Father, Aunt ... followed
  by a proper noun, or inside a PERSON entity with a name) are kept with ``names=False``. With
  ``names=True`` the name itself is swapped, so its title follows it: "Queen Elizabeth" -> "King William".
  Gendered words inside other entities (ORG, FAC, GPE, WORK_OF_ART, ...) that also hold a real name are
  never flipped ("King's College", "His Dark Materials" when NER finds it); an entity that is only a
  gendered word plus function words ("The Queen of", a common NER slip) does not protect it.
- Coreference: without it, a pronoun that refers to a kept name is still flipped ("Queen Elizabeth said
  she ..." -> "Queen Elizabeth said he ..."). Where gold coreference is known (lmbias.corpora.coref: GAP's
  pronoun-name links, CoNLL clusters with a proper noun), Lu et al.'s rule keeps such words: pass token
  indices to ``swap_tokens(..., protect=...)`` or character spans to ``swap_texts(..., protect=...)``. A
  span may name its proper noun, ``(start, end, name)``: with ``names=True`` the word then flips exactly
  when that name is swapped in its document ("Mary ... she" -> "John ... he", but "Abalos ... him" stays),
  since Lu et al.'s reason (the name keeps its gender) holds only for names that are kept.
- Names (``names=True``): tokens of PERSON entities found in the name-pair list are swapped, consistently
  within a document: a name seen as a given name anywhere in the document is swapped at every
  capitalised occurrence, and a name seen as a surname anywhere ("Elizabeth Taylor", "Mrs. Taylor") is
  never swapped in that document. Names not in the list are kept.
- Case is copied from the original (he/He/HE -> she/She/SHE); whitespace and punctuation are kept
  exactly: the output is rebuilt from the tokens' own text and trailing whitespace. In ALL-CAPS text,
  tags and entities say nothing about proper names, so the proper-name protection is off there.
- NER is needed only where a capitalised gendered word (or, with names, a capitalised listed name) or a
  capitalised pronoun mid-sentence occurs; it runs on those texts only.

The dictionary (``SwapLexicon``) merges, in this priority order, resources/wordlists/ (Lu et al.'s list
as printed in the paper, then the project's own extra pairs), the CDS pair list, WinoBias's
generalized_swaps.txt and extra_gendered_words.txt, and (separately) the CDS name pairs. Within a
source the listed direction is entered before the reverse one; a word that already has a partner keeps
it (first wins) and the conflict is recorded in ``SwapLexicon.conflicts`` and logged.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lmbias.errors import ConfigError, DataError

log = logging.getLogger(__name__)

INTERVENTIONS = ("grammatical", "naive")

WORDLIST_DIR = Path(__file__).resolve().parents[3] / "resources" / "wordlists"
PRIMARY_WORDLIST = "lu2018_gender_pairs.tsv"
WINOBIAS_FILES = ("generalized_swaps.txt", "extra_gendered_words.txt")

#: Gendered pronouns: swapped by rules, never by the dictionary (source lists' entries for them are ignored).
PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})
#: Pronouns whose partner does not depend on grammar.
FIXED_PRONOUNS = {"he": "she", "she": "he", "him": "her", "hers": "his", "himself": "herself", "herself": "himself"}
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

_FUNCTION_WORDS = frozenset({"the", "a", "an", "of", "and", "&", "for", "in", "on", "at", "to", "de", "la", "le",
                             "du", "des", "von", "van", "der"})
_VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"})
_PROPER_TAGS = frozenset({"NNP", "NNPS"})
# Tags after which a possessive determiner cannot stand: "her"/"his" there is object/predicative.
_NP_STOP_TAGS = frozenset({"CC", "IN", "TO", "MD", "VBD", "VBZ", "VBP", "VB", "DT", "PDT", "WDT", "WP", "WP$",
                           "WRB", "PRP", "PRP$", "EX", "RP", "UH", "POS", "HYPH", ".", ",", ":", "``", "''", "-LRB-",
                           "-RRB-", "NFP", "_SP", "SP"})
# Looked past when deciding whether a noun follows a possessive; _NP_WORDS are heads/determiners themselves.
_SKIP_TAGS = frozenset({"JJ", "JJR", "RB", "RBR"})
# ordinals head an elliptical noun phrase like superlatives do: "her third [marriage] to a peer"
_NP_WORDS = frozenset({"own", "every", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                       "ninth", "tenth", "last", "next", "latest", "previous", "other"})
_STOP_PUNCT = frozenset(".,;:!?)]}\"'”’»…—–-")
_SENTENCE_START_PREV = frozenset({".", "!", "?", "\"", "“", "‘", "'", ":", "(", "[", "-", "—", "–", "…"})
_UNKNOWN_TAGS = frozenset({"", "-", "XX", "_", "None"})
_HER_RE = re.compile(r"(?<![^\W_])her(?![^\W_])", re.IGNORECASE)
_SPLIT_RE = re.compile(r"[^\W_]+|[^\w\s]", re.UNICODE)
#: Longest piece of one text handed to spaCy. Its max_length (1,000,000) guards the parser and NER, which
#: need about 1 GB per 100,000 characters; longer texts are swapped in pieces (see swap_lines).
MAX_PIECE_CHARS = 100_000
_CUT_AFTER = re.compile(r"[.!?;:]['\")\]]*\s+|\n\s*")


# --------------------------------------------------------------------------------------------- lexicon

@dataclass
class SwapLexicon:
    """Gendered word partners, lower-case, both directions (incl. plurals); names separately.

    ``word_pairs`` never contains the pronouns (see PRONOUNS); ``conflicts`` lists the entries that lost to
    an earlier partner ("source:line: word -> new (kept old)").
    """

    word_pairs: dict[str, str] = field(default_factory=dict)
    name_pairs: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def is_involution(self, word: str) -> bool:
        """True when swapping `word` twice gives it back (the partner's partner is the word)."""
        w = word.lower()
        for table in (self.word_pairs, self.name_pairs):
            if w in table:
                return table.get(table[w]) == w
        if w in PRONOUNS:  # he/she, himself/herself only: him/her/his/hers are many-to-many
            return w in FIXED_PRONOUNS and FIXED_PRONOUNS.get(FIXED_PRONOUNS[w]) == w
        return True

    def is_gendered(self, word: str) -> bool:
        w = word.lower()
        return w in PRONOUNS or w in self.word_pairs


def _read_tsv_pairs(path: Path, *, sep: str | None = "\t") -> list[tuple[str, str, int]]:
    """(word, partner, line) from a two-column file; '#' comments and blank lines skipped."""
    pairs = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DataError(f"not valid UTF-8 ({exc.reason})", path, line) from exc
    except OSError as exc:
        raise DataError(f"cannot read word list: {exc.strerror}", path) from exc
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = raw.split(sep)
        if len(parts) != 2:
            raise DataError(f"expected 2 tab-separated columns (word, partner), got {len(parts)}: {raw!r}",
                            path, lineno)
        a, b = (p.strip().lower() for p in parts)
        if not a or not b or any(ch.isspace() for ch in a + b):
            raise DataError(f"empty word or a word with inner whitespace: {raw!r}", path, lineno)
        pairs.append((a, b, lineno))
    return pairs


def _read_json_pairs(path: Path) -> list[tuple[str, str, int]]:
    """(word, partner, line) from a JSON array of [masculine, feminine] string pairs."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise DataError(f"not valid UTF-8 ({exc.reason})", path) from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from exc
    except OSError as exc:
        raise DataError(f"cannot read pair list: {exc.strerror}", path) from exc
    if not isinstance(data, list):
        raise DataError(f"expected a JSON array of [word, partner] pairs, got {type(data).__name__}", path, 1)
    pairs = []
    for index, item in enumerate(data):
        ok = (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) and x.strip() for x in item))
        if not ok:
            # the upstream files are one line long: name the entry as well as the line
            line = text[: text.find(json.dumps(item)) if json.dumps(item) in text else 0].count("\n") + 1
            raise DataError(f"entry {index} is not a [word, partner] pair of non-empty strings: {item!r}", path, line)
        a, b = (x.strip().lower() for x in item)
        if any(ch.isspace() for ch in a + b):
            raise DataError(f"entry {index} has a word with inner whitespace: {item!r}", path, 1)
        pairs.append((a, b, 1))
    return pairs


def _merge(table: dict[str, str], pairs: list[tuple[str, str, int]], source: str, conflicts: list[str],
           *, skip_pronouns: bool) -> int:
    """Enter listed directions first, then reverse ones; first partner wins. Returns entries added."""
    added = 0
    for direction in (0, 1):
        for a, b, line in pairs:
            word, partner = (a, b) if direction == 0 else (b, a)
            if word == partner:
                conflicts.append(f"{source}:{line}: {word} -> {partner} (maps a word to itself; ignored)")
                continue
            if skip_pronouns and (word in PRONOUNS or partner in PRONOUNS):
                continue
            old = table.get(word)
            if old is None:
                table[word] = partner
                added += 1
            elif old != partner:
                kind = "listed" if direction == 0 else "reverse"
                conflicts.append(f"{source}:{line}: {word} -> {partner} ({kind}; kept {word} -> {old})")
    return added


def wordlist_files(wordlist_dir=None) -> list[Path]:
    """The project word lists load_lexicon always reads, in load order (declare them as rule inputs)."""
    return _wordlist_files(Path(wordlist_dir) if wordlist_dir else WORDLIST_DIR)


def _wordlist_files(wordlist_dir: Path) -> list[Path]:
    if not wordlist_dir.is_dir():
        raise ConfigError(f"word list folder {wordlist_dir} not found (resources/wordlists/ of the repository)")
    files = sorted(wordlist_dir.glob("*.tsv"), key=lambda p: (p.name != PRIMARY_WORDLIST, p.name))
    if not files:
        raise ConfigError(f"no *.tsv word lists in {wordlist_dir}")
    return files


def load_lexicon(cds_pairs=None, winobias_dir=None, names=None, *, wordlist_dir=None, wordlists=None) -> SwapLexicon:
    """Merge resources/wordlists/ (all of them, or only the files in `wordlists` when given; [] = none)
    + CDS pairs json + WinoBias swap lists + CDS names json.

    Priority (first wins on conflicts): Lu et al.'s list, the project's extra lists, `cds_pairs`
    (cda_default_pairs.json), WinoBias generalized_swaps.txt, then extra_gendered_words.txt. Entries for the
    gendered pronouns are ignored (they are decided by rules). `names` (names_pairs_1000_scaled.json) fills
    ``name_pairs``. Malformed lines raise DataError naming file and line.
    """
    lex = SwapLexicon()
    sources: list[tuple[str, list[tuple[str, str, int]]]] = []
    chosen = _wordlist_files(Path(wordlist_dir) if wordlist_dir else WORDLIST_DIR) if wordlists is None else wordlists
    for path in map(Path, chosen):
        if not path.is_file():
            raise DataError(f"word list {path} not found", path)
        sources.append((str(path), _read_tsv_pairs(path)))
    if cds_pairs is not None:
        sources.append((str(cds_pairs), _read_json_pairs(Path(cds_pairs))))
    if winobias_dir is not None:
        for name in WINOBIAS_FILES:
            path = Path(winobias_dir) / name
            if not path.is_file():
                raise DataError(f"WinoBias word list {name} not found in {winobias_dir}", path)
            sources.append((str(path), _read_tsv_pairs(path)))
    for source, pairs in sources:
        added = _merge(lex.word_pairs, pairs, source, lex.conflicts, skip_pronouns=True)
        lex.sources.append(source)
        log.debug("%s: %d pairs, %d new entries", source, len(pairs), added)
    n_word_conflicts = len(lex.conflicts)
    if names is not None:
        pairs = _read_json_pairs(Path(names))
        added = _merge(lex.name_pairs, pairs, str(names), lex.conflicts, skip_pronouns=False)
        lex.sources.append(str(names))
        log.debug("%s: %d name pairs, %d entries", names, len(pairs), added)
    for line in lex.conflicts:
        log.debug("lexicon conflict: %s", line)
    if lex.conflicts:
        log.info("swap lexicon: %d words, %d names; %d conflicting entries resolved first-wins "
                 "(%d words, %d names; e.g. %s)", len(lex.word_pairs), len(lex.name_pairs), len(lex.conflicts),
                 n_word_conflicts, len(lex.conflicts) - n_word_conflicts, lex.conflicts[0])
    else:
        log.info("swap lexicon: %d words, %d names", len(lex.word_pairs), len(lex.name_pairs))
    return lex


# --------------------------------------------------------------------------------------------- helpers

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


def _norm_tag(tag) -> str | None:
    if tag is None:
        return None
    tag = str(tag).strip()
    return None if tag in _UNKNOWN_TAGS else tag


def _parse_ner(ner: Sequence[str] | None, n: int) -> tuple[list[str], list[bool]]:
    """Per-token entity label + 'starts an entity' from BIO, plain labels, or CoNLL bracket columns."""
    labels = [""] * n
    starts = [False] * n
    if ner is None:
        return labels, starts
    if len(ner) != n:
        raise ValueError(f"ner has {len(ner)} entries for {n} tokens")
    values = [("" if v is None else str(v).strip()) for v in ner]
    if any(v.startswith("(") or v.endswith(")") for v in values):  # CoNLL-2012: (PERSON* * *)  (PERSON)
        current = ""
        for i, v in enumerate(values):
            if v.startswith("("):
                current = v[1:].rstrip("*)").strip()
                starts[i] = True
            labels[i] = current
            if v.endswith(")"):
                current = ""
        return labels, starts
    prev = ""
    for i, v in enumerate(values):
        if v in ("", "O", "*", "-", "_"):
            prev = ""
            continue
        if v[:2] in ("B-", "I-", "E-", "S-", "L-", "U-"):
            label = v[2:]
            starts[i] = v[0] in "BSU" or label != prev
        else:
            label = v
            starts[i] = label != prev
        labels[i] = label
        prev = label
    return labels, starts


@dataclass
class _Sent:
    """A tokenised sentence/document in the one form the rules read (from spaCy or from a CoNLL file)."""

    texts: list[str]
    ws: list[str]
    tags: list[str | None]
    ents: list[str]
    ent_starts: list[bool]
    deps: list[str | None] = None

    def __post_init__(self):
        if self.deps is None:
            self.deps = [None] * len(self.texts)

    @property
    def n(self) -> int:
        return len(self.texts)

    def entity_spans(self) -> list[tuple[int, int, str]]:
        spans, i = [], 0
        while i < self.n:
            if self.ents[i]:
                j = i + 1
                while j < self.n and self.ents[j] == self.ents[i] and not self.ent_starts[j]:
                    j += 1
                spans.append((i, j, self.ents[i]))
                i = j
            else:
                i += 1
        return spans


def _sent_from_doc(doc, tagged: bool) -> _Sent:
    texts, ws, tags, ents, starts, deps = [], [], [], [], [], []
    has_dep = doc.has_annotation("DEP")
    for t in doc:  # one pass: creating Token objects is the cost here
        texts.append(t.text)
        ws.append(t.whitespace_)
        tags.append(_norm_tag(t.tag_) if tagged else None)
        ents.append(t.ent_type_)
        starts.append(t.ent_iob == 3)
        if has_dep:
            deps.append(t.dep_ or None)
    return _Sent(texts=texts, ws=ws, tags=tags, ents=ents, ent_starts=starts, deps=deps if has_dep else None)


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
class _Pending:
    """A sentence rendered except for its name slots, waiting for its document's name decisions."""

    tokens: list[str]                            # output token texts (swapped where decided)
    ws: list[str]                                # each token's original trailing whitespace
    name_slots: list[tuple[int, str]]            # (token index, lower-case name)
    title_slots: list[tuple[int, list[str], tuple, int]]  # (index, swapped title tokens, linked names, length)
    given: set[str]
    surnames: set[str]
    original: str
    coref_slots: list[tuple[int, str, tuple[str, ...], bool]] = field(default_factory=list)  # (index, swapped
    # token, its name's lower-case words, is a pronoun): flipped only if the name is swapped (names=True)


# --------------------------------------------------------------------------------------------- swapper

class Swapper:
    """Apply one intervention to texts, spaCy docs, or pre-tokenised (CoNLL) sentences.

    nlp: a spaCy Language (lmbias.corpora.nlp.load_spacy()); loaded on demand when None (`spacy_model`; naive
    without names: a blank English tokenizer). The grammatical intervention uses the tagger, the parser on
    texts containing "her", and NER on texts holding a capitalised gendered word or name; naive needs only
    the tokenizer (plus NER for names=True). ``stats`` (SwapStats) counts what was swapped.
    """

    def __init__(self, lexicon: SwapLexicon, intervention: str = "grammatical", names: bool = False, nlp=None,
                 spacy_model: str = "en_core_web_sm"):
        if intervention not in INTERVENTIONS:
            raise ConfigError(f"intervention: {intervention!r} is not one of {', '.join(INTERVENTIONS)}")
        if names and not lexicon.name_pairs:
            raise ConfigError("names: names=True needs a lexicon loaded with a name-pair list "
                              "(load_lexicon(names=...))")
        self.lexicon = lexicon
        self.intervention = intervention
        self.names = bool(names)
        self.grammatical = intervention == "grammatical"
        self.stats = SwapStats()
        self._words = lexicon.word_pairs
        self._name_pairs = lexicon.name_pairs
        self._nlp = nlp
        self._spacy_model = spacy_model
        self._setup_done = False
        # multi-token dictionary entries ("son-in-law", "ma'am"), keyed by their first token
        self._phrases: dict[str, list[tuple[tuple[str, ...], str]]] = {}

    # ---- pipeline set-up
    @property
    def nlp(self):
        if self._nlp is None:
            if self.grammatical or self.names:
                from lmbias.corpora.nlp import load_spacy
                self._nlp = load_spacy(self._spacy_model)
            else:
                import spacy
                self._nlp = spacy.blank("en")
        if not self._setup_done:
            self._setup()
        return self._nlp

    def _setup(self) -> None:
        nlp = self._nlp
        self._setup_done = True
        names = set(nlp.pipe_names)
        if self.grammatical and "tagger" not in names:
            raise ConfigError(f"the grammatical intervention needs a spaCy pipeline with a tagger; "
                              f"got {nlp.pipe_names}")
        need_ner = self.names or self.grammatical
        self._ner = nlp.get_pipe("ner") if ("ner" in names and need_ner) else None
        # the parser's "poss" arc is a second opinion on "her" (en_core_web_sm tags "kept her promise" PRP);
        # it runs only on documents that contain "her", reading the tok2vec tensor the tagger pass left
        self._parser = nlp.get_pipe("parser") if ("parser" in names and self.grammatical) else None
        if self.names and self._ner is None:
            raise ConfigError(f"names=True needs a spaCy pipeline with 'ner'; got {nlp.pipe_names}")
        # nlp.pipe runs the tagger (grammatical) and what it listens to; parser and NER run afterwards on the
        # documents that need them, so whatever *they* listen to (en_core_web_sm: the tagger and parser share
        # tok2vec; NER has its own) must run in the first pass too: they read the doc.tensor it leaves
        used = {"tagger"} if self.grammatical else set()
        later = {n for n, c in (("parser", self._parser), ("ner", self._ner)) if c is not None}
        keep = set(used)
        for name in names:
            listeners = set(getattr(nlp.get_pipe(name), "listening_components", None) or [])
            if listeners & (used | later):
                keep.add(name)
        # attribute_ruler is not needed: en_core_web_sm's only sets POS/MORPH (and TAG "_SP" on spaces)
        self._disable = [n for n in nlp.pipe_names if n not in keep]
        self._build_phrases()

    def _build_phrases(self) -> None:
        tokenizer = self._nlp.tokenizer if self._nlp is not None else None
        for key, partner in self._words.items():
            if key.isalnum():
                continue
            splits = {tuple(_SPLIT_RE.findall(key))}
            if tokenizer is not None:
                splits.add(tuple(t.text.lower() for t in tokenizer(key)))
            for toks in splits:
                if len(toks) > 1:
                    self._phrases.setdefault(toks[0], []).append((toks, key))
        for entries in self._phrases.values():
            entries.sort(key=lambda e: -len(e[0]))

    # ---- public API
    def swap_text(self, text: str) -> str:
        """Counterfactual of one text (one document for name consistency)."""
        return self.swap_texts([text])[0]

    def swap_doc(self, doc) -> str:
        """Counterfactual of a spaCy Doc (already processed; the grammatical rules need its tags)."""
        self.nlp  # set-up
        if self.grammatical and not doc.has_annotation("TAG"):
            raise ValueError("swap_doc: the grammatical intervention needs a tagged Doc (run the tagger)")
        if self._needs_ner(doc) and not doc.has_annotation("ENT_IOB"):
            doc = self._ner(doc)
        pending = self._analyse(_sent_from_doc(doc, self.grammatical), doc.text)
        return self._finish_group([pending])[0]

    def swap_texts(self, texts: Iterable[str], batch_size: int = 256, doc_ids: Sequence | None = None,
                   protect: Sequence | None = None) -> list[str]:
        """Counterfactuals of many texts through nlp.pipe (unused components disabled).

        Each text is its own document for name consistency, unless `doc_ids` (one per text) groups them:
        texts with the same doc id share name decisions. `protect` (one entry per text): character spans
        ``(start, end)`` or ``(start, end, name)`` whose tokens are not flipped (gold coreference with a
        proper noun; see the module docstring for spans that name their proper noun).
        """
        texts = list(texts)
        if doc_ids is not None and len(doc_ids) != len(texts):
            raise ValueError(f"doc_ids has {len(doc_ids)} entries for {len(texts)} texts")
        if protect is not None and len(protect) != len(texts):
            raise ValueError(f"protect has {len(protect)} entries for {len(texts)} texts")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} is {type(t).__name__}, not str")
        if not texts:
            return []
        nlp = self.nlp
        pending: list[_Pending] = []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            docs = list(nlp.pipe(chunk, disable=self._disable, batch_size=batch_size))
            if self._parser is not None:
                need = [i for i, text in enumerate(chunk) if _HER_RE.search(text)]
                for i, d in zip(need, self._parser.pipe([docs[i] for i in need], batch_size=batch_size)):
                    docs[i] = d
            need = [i for i, d in enumerate(docs) if self._needs_ner(d)]
            if need:
                for i, d in zip(need, self._ner.pipe([docs[i] for i in need], batch_size=batch_size)):
                    docs[i] = d
            for j, (d, text) in enumerate(zip(docs, chunk)):
                sent = _sent_from_doc(d, self.grammatical)
                spans = protect[start + j] if protect is not None else None
                if spans:
                    kept, linked = _span_tokens(sent, spans, len(text))
                    pending.append(self._analyse(sent, text, protect=kept, name_links=linked))
                else:
                    pending.append(self._analyse(sent, text))
        if doc_ids is None:
            return [self._finish_group([p])[0] for p in pending]
        groups: dict[object, list[int]] = {}
        for i, key in enumerate(doc_ids):
            groups.setdefault(key, []).append(i)
        out: list[str] = [""] * len(texts)
        for indices in groups.values():
            for i, s in zip(indices, self._finish_group([pending[i] for i in indices])):
                out[i] = s
        return out

    def swap_tokens(self, words: Sequence[str], tags: Sequence[str] | None = None,
                    ner: Sequence[str] | None = None, protect: Iterable[int] = ()) -> list[str]:
        """Counterfactual of one pre-tokenised sentence (the CoNLL path); returns one token per input token.

        tags: gold PTB tags (e.g. OntoNotes' POS column). None (or all '-', as in WinoBias's CoNLL files):
        a grammatical swapper tags the given tokens with its spaCy tagger; a naive one uses its naive rules.
        ner: per-token entity labels (BIO "B-PERSON", plain "PERSON"/"O", or CoNLL "(PERSON*", "*", "*)").
        protect: token indices never to flip (e.g. pronouns in a coreference cluster with a proper noun,
        Lu et al.'s rule when gold clusters exist).
        """
        words = [str(w) for w in words]
        n = len(words)
        if tags is not None and len(tags) != n:
            raise ValueError(f"tags has {len(tags)} entries for {n} tokens")
        norm_tags = [_norm_tag(t) for t in tags] if tags is not None else [None] * n
        labels, starts = _parse_ner(ner, n)
        deps = None
        if self.grammatical and all(t is None for t in norm_tags) and n:
            norm_tags, spacy_labels, spacy_starts, deps = self._tag_words(words, ner is None)
            if ner is None:
                labels, starts = spacy_labels, spacy_starts
        elif self.names and ner is None and n:
            _, labels, starts, _ = self._tag_words(words, True, tag=False)
        self.nlp  # set-up (phrase table)
        sent = _Sent(texts=words, ws=[""] * n, tags=norm_tags, ents=labels, ent_starts=starts, deps=deps)
        pending = self._analyse(sent, " ".join(words), protect=set(protect))
        out = self._finish_group([pending], tokens=True)[0]
        return out

    @property
    def changed_count(self) -> int:
        """Number of texts this swapper changed so far."""
        return self.stats.changed_texts

    # ---- internals
    def _tag_words(self, words, with_ner: bool, tag: bool = True):
        from spacy.tokens import Doc

        nlp = self.nlp
        doc = Doc(nlp.vocab, words=words)
        if tag:
            for name, proc in nlp.pipeline:
                if name not in self._disable:
                    doc = proc(doc)
            if self._parser is not None and any(w.lower() == "her" for w in words):
                doc = self._parser(doc)
        if with_ner and self._ner is not None:
            doc = self._ner(doc)
        tags = [_norm_tag(t.tag_) for t in doc] if tag else [None] * len(words)
        deps = [(t.dep_ or None) for t in doc] if doc.has_annotation("DEP") else None
        return tags, [t.ent_type_ for t in doc], [t.ent_iob_ == "B" for t in doc], deps

    def _needs_ner(self, doc) -> bool:
        """NER matters only for capitalised gendered words / pronouns mid-sentence, and for names."""
        if self._ner is None:
            return False
        words, names = self._words, self._name_pairs
        prev = None
        for t in doc:
            text = t.text
            if text[:1].isupper():
                low = text.lower()
                if self.names and low in names:
                    return True
                if self.grammatical:
                    if low in words or low in self._phrases:
                        return True
                    if low in PRONOUNS and prev is not None and prev.text not in _SENTENCE_START_PREV \
                            and "\n" not in prev.text:
                        return True
            if not t.is_space:
                prev = t
        return False

    def _match_word(self, sent: _Sent, i: int, lows: list[str]) -> tuple[int, str] | None:
        """(number of tokens, dictionary key) of the gendered word starting at token i, longest first."""
        low = lows[i]
        for toks, key in self._phrases.get(low, ()):
            k = len(toks)
            if i + k <= sent.n and tuple(lows[i:i + k]) == toks and not any(sent.ws[i:i + k - 1]):
                return k, key
        if low in self._words:
            return 1, low
        return None

    def _her_is_possessive(self, sent: _Sent, i: int) -> bool:
        """Possessive ("her dog" -> his) or object ("saw her" -> him): tag and parse, checked by what follows."""
        if self._no_noun_follows(sent, i):
            return False                      # "saw her.", "made her happy.", "leave her alone", "gave her the"
        tag, dep = sent.tags[i], sent.deps[i]
        if tag == "PRP$" or dep == "poss":
            return True
        if tag == "PRP":
            return False
        # odd tag (e.g. NN in all-caps text): a following noun/adjective/number reads as possessive
        nxt = self._next_token(sent, i)
        return nxt is not None and (sent.tags[nxt] or "").startswith(("NN", "JJ", "CD", "VBG"))

    def _his_is_predicative(self, sent: _Sent, i: int) -> bool:
        """Predicative ("is his" -> hers) or determiner ("his dog" -> her)."""
        return sent.tags[i] == "PRP" or self._no_noun_follows(sent, i)

    @staticmethod
    def _next_token(sent: _Sent, i: int) -> int | None:
        j = i + 1
        while j < sent.n and not sent.texts[j].strip():
            j += 1
        return j if j < sent.n else None

    def _no_noun_follows(self, sent: _Sent, i: int) -> bool:
        """True when no noun phrase can follow token i: a possessive determiner there has nothing to determine.

        Adjectives and adverbs are looked past ("her very old car" vs "found her asleep."); superlatives,
        ordinals and "own" count as heads ("did his best", "her third to a peer", "of her own").
        """
        j = self._next_token(sent, i)
        while j is not None:
            if not sent.ws[j] and j + 1 < sent.n and sent.texts[j + 1] in ("-", "‐"):
                return False                  # a hyphenated compound: "her half-brother", "his so-called friend"
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

    def _proper_title(self, sent: _Sent, i: int, k: int, lows: list[str], ent_spans) -> tuple | None:
        """Linked name token indices when the gendered word at i..i+k is a title inside a proper name."""
        end = i + k
        label = sent.ents[i]
        if label == "PERSON":
            start, stop = next(((s, e) for s, e, _ in ent_spans if s <= i < e), (i, end))
            others = [j for j in range(start, stop) if not (i <= j < end) and sent.texts[j][:1].isalpha()
                      and lows[j] not in self._words and lows[j] not in HONORIFICS]
            if others:
                return tuple(others)
        if sent.tags[i] not in _PROPER_TAGS or not _is_capitalised(sent.texts[i]):
            return None
        j = end
        if j < sent.n and lows[j] in ("'s", "’s", "'") and not sent.ws[j - 1]:
            j += 1
        linked = []
        while j < sent.n and sent.tags[j] in _PROPER_TAGS and _is_capitalised(sent.texts[j]) \
                and lows[j] not in self._words and lows[j] not in HONORIFICS:
            linked.append(j)
            if sent.ws[j] == "" and j + 1 < sent.n and not sent.texts[j + 1][:1].isalpha():
                break
            j += 1
        return tuple(linked) if linked else None

    def _analyse(self, sent: _Sent, original: str, protect: set[int] = frozenset(),
                 name_links: dict[int, tuple[str, ...]] | None = None) -> _Pending:
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
            text = "".join(sent.texts[i:i + k])
            if key in TITLE_ONLY and not (_is_capitalised(text) and (
                    not grammatical or sent.tags[i] in _PROPER_TAGS or sent.tags[i] is None)):
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
        # is swapped in the document (_finish_group)
        for j in sorted(conditional):
            if out[j] is not None:
                coref_slots.append((j, out[j], name_links[j], lows[j] in PRONOUNS))
                out[j] = None
        tokens = [sent.texts[j] if out[j] is None else out[j] for j in range(n)]
        return _Pending(tokens=tokens, ws=list(sent.ws), name_slots=name_slots, title_slots=title_slots, given=given,
                        surnames=surnames, original=original, coref_slots=coref_slots)

    def _is_name_word(self, sent: _Sent, j: int, lows: list[str]) -> bool:
        """A capitalised proper-noun token that is not itself gendered or a function word."""
        text = sent.texts[j]
        if not text[:1].isupper() or not any(c.isalpha() for c in text):
            return False
        low = lows[j]
        if low in self._words or low in HONORIFICS or low in PRONOUNS or low in _FUNCTION_WORDS:
            return False
        tag = sent.tags[j]
        return tag is None or tag in _PROPER_TAGS or tag.startswith(("NN", "CD", "JJ"))

    def _replacement(self, sent: _Sent, i: int, k: int, partner: str) -> list[str]:
        """Per-token replacement of the k tokens at i (a phrase keeps its own token split when it can)."""
        if k == 1:
            return [match_case(sent.texts[i], partner)]
        parts = _SPLIT_RE.findall(partner)
        if len(parts) == k:
            return [match_case(sent.texts[i + j], parts[j]) for j in range(k)]
        whole = "".join(sent.texts[i:i + k])
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
                if sent.texts[j][:1].isalpha() and lows[j] not in self._words and lows[j] not in HONORIFICS \
                        and lows[j] not in PRONOUNS:
                    toks.append(j)
            # a hyphenated name ("Glen-Coats", "Jean-Paul") is one unit: never swapped piecewise
            hyphenated = {j for j in toks if (not sent.ws[j] and j + 1 < sent.n and sent.texts[j + 1] == "-")
                          or (j >= 2 and sent.texts[j - 1] == "-" and not sent.ws[j - 2])}
            surnames.update(lows[j] for j in hyphenated)
            toks = [j for j in toks if j not in hyphenated]
            if not toks:
                continue
            prev = s - 1
            while prev >= 0 and not sent.texts[prev].strip():
                prev -= 1
            titled = (prev >= 0 and lows[prev] in SURNAME_TITLES) or \
                any(lows[j] in SURNAME_TITLES for j in range(s, toks[0]))
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

    def _finish_group(self, group: list[_Pending], tokens: bool = False):
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
                        toks[j:j + k] = replacement
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


def _span_tokens(sent: _Sent, spans, length: int) -> tuple[set[int], dict[int, tuple[str, ...]]]:
    """Token indices overlapping the character spans, and those whose span names a proper noun -> its words."""
    starts, pos = [], 0
    for t, w in zip(sent.texts, sent.ws):
        starts.append(pos)
        pos += len(t) + len(w)
    kept: set[int] = set()
    linked: dict[int, tuple[str, ...]] = {}
    for span in spans:
        start, end = int(span[0]), int(span[1])
        name = span[2] if len(span) > 2 else None
        if not 0 <= start < end <= length:
            raise ValueError(f"protect span {start}..{end} is outside its text ({length} characters)")
        for j, s in enumerate(starts):
            if s < end and start < s + len(sent.texts[j]):
                kept.add(j)
                if name:
                    linked[j] = tuple(w.lower() for w in _SPLIT_RE.findall(name))
    return kept, linked


def split_long_text(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """`text` cut into pieces of at most `max_chars` that join back to it: after the last sentence end
    (., !, ?, ;, : and the whitespace after it) inside the window, else after the last whitespace, else
    (one word that long) at `max_chars`."""
    pieces, start = [], 0
    while len(text) - start > max_chars:
        window = text[start:start + max_chars]
        cut = max((m.end() for m in _CUT_AFTER.finditer(window)), default=0)
        if cut == 0:
            space = max(window.rfind(" "), window.rfind("\t"))
            cut = space + 1 if space > 0 else max_chars
        pieces.append(text[start:start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def swap_lines(swapper: "Swapper", texts: Sequence[str], batch_size: int = 256,
               max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """swapper.swap_texts for texts of any length: one longer than `max_chars` is swapped in pieces
    (split_long_text) that stay one document, so its names are swapped consistently across pieces."""
    pieces, owners = [], []
    for i, text in enumerate(texts):
        for piece in split_long_text(text, max_chars):
            pieces.append(piece)
            owners.append(i)
    out = [""] * len(texts)
    for i, swapped in zip(owners, swapper.swap_texts(pieces, batch_size=batch_size, doc_ids=owners)):
        out[i] += swapped
    return out
