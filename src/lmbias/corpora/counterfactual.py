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

The dictionary is ``SwapLexicon`` (lmbias.corpora.swap_lexicon, ``load_lexicon``); the rules that decide
each token are ``SwapRules`` (lmbias.corpora.swap_rules), on sentences in the form of
lmbias.corpora.swap_sentence; this module's ``Swapper`` runs them over texts through spaCy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from lmbias.corpora.swap_lexicon import PRONOUNS, SwapLexicon
from lmbias.corpora.swap_rules import PendingSentence, SwapRules
from lmbias.corpora.swap_sentence import WORD_SPLIT_RE, Sentence, norm_tag, parse_ner, sentence_from_doc, span_tokens
from lmbias.errors import ConfigError

INTERVENTIONS = ("grammatical", "naive")

_SENTENCE_START_PREV = frozenset({".", "!", "?", '"', "“", "‘", "'", ":", "(", "[", "-", "—", "–", "…"})
_HER_RE = re.compile(r"(?<![^\W_])her(?![^\W_])", re.IGNORECASE)
#: Longest piece of one text handed to spaCy. Its max_length (1,000,000) guards the parser and NER, which
#: need about 1 GB per 100,000 characters; longer texts are swapped in pieces (see swap_lines).
MAX_PIECE_CHARS = 100_000
_CUT_AFTER = re.compile(r"[.!?;:]['\")\]]*\s+|\n\s*")


# --------------------------------------------------------------------------------------------- swapper


class Swapper(SwapRules):
    """Apply one intervention to texts, spaCy docs, or pre-tokenised (CoNLL) sentences.

    nlp: a spaCy Language (lmbias.corpora.nlp.load_spacy()); loaded on demand when None (`spacy_model`; naive
    without names: a blank English tokenizer). The grammatical intervention uses the tagger, the parser on
    texts containing "her", and NER on texts holding a capitalised gendered word or name; naive needs only
    the tokenizer (plus NER for names=True). ``stats`` (SwapStats) counts what was swapped.
    """

    def __init__(
        self,
        lexicon: SwapLexicon,
        intervention: str = "grammatical",
        names: bool = False,
        nlp=None,
        spacy_model: str = "en_core_web_sm",
    ):
        if intervention not in INTERVENTIONS:
            raise ConfigError(f"intervention: {intervention!r} is not one of {', '.join(INTERVENTIONS)}")
        if names and not lexicon.name_pairs:
            raise ConfigError(
                "names: names=True needs a lexicon loaded with a name-pair list (load_lexicon(names=...))"
            )
        super().__init__(lexicon, grammatical=intervention == "grammatical", names=names)
        self.intervention = intervention
        self._nlp = nlp
        self._spacy_model = spacy_model
        self._setup_done = False

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
            raise ConfigError(
                f"the grammatical intervention needs a spaCy pipeline with a tagger; got {nlp.pipe_names}"
            )
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
        for key in self._words:
            if key.isalnum():
                continue
            splits = {tuple(WORD_SPLIT_RE.findall(key))}
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
        self.nlp  # noqa: B018  (set-up: loads the pipeline and the phrase table)
        if self.grammatical and not doc.has_annotation("TAG"):
            raise ValueError("swap_doc: the grammatical intervention needs a tagged Doc (run the tagger)")
        if self._needs_ner(doc) and not doc.has_annotation("ENT_IOB"):
            doc = self._ner(doc)
        pending = self.analyse(sentence_from_doc(doc, self.grammatical), doc.text)
        return self.finish_group([pending])[0]

    def swap_texts(
        self,
        texts: Iterable[str],
        batch_size: int = 256,
        doc_ids: Sequence | None = None,
        protect: Sequence | None = None,
    ) -> list[str]:
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
        pending: list[PendingSentence] = []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
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
                sent = sentence_from_doc(d, self.grammatical)
                spans = protect[start + j] if protect is not None else None
                if spans:
                    kept, linked = span_tokens(sent, spans, len(text))
                    pending.append(self.analyse(sent, text, protect=kept, name_links=linked))
                else:
                    pending.append(self.analyse(sent, text))
        if doc_ids is None:
            return [self.finish_group([p])[0] for p in pending]
        groups: dict[object, list[int]] = {}
        for i, key in enumerate(doc_ids):
            groups.setdefault(key, []).append(i)
        out: list[str] = [""] * len(texts)
        for indices in groups.values():
            for i, s in zip(indices, self.finish_group([pending[i] for i in indices])):
                out[i] = s
        return out

    def swap_tokens(
        self,
        words: Sequence[str],
        tags: Sequence[str] | None = None,
        ner: Sequence[str] | None = None,
        protect: Iterable[int] = (),
    ) -> list[str]:
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
        norm_tags = [norm_tag(t) for t in tags] if tags is not None else [None] * n
        labels, starts = parse_ner(ner, n)
        deps = None
        if self.grammatical and all(t is None for t in norm_tags) and n:
            norm_tags, spacy_labels, spacy_starts, deps = self._tag_words(words, ner is None)
            if ner is None:
                labels, starts = spacy_labels, spacy_starts
        elif self.names and ner is None and n:
            _, labels, starts, _ = self._tag_words(words, True, tag=False)
        self.nlp  # noqa: B018  (set-up: the phrase table)
        sent = Sentence(texts=words, ws=[""] * n, tags=norm_tags, ents=labels, ent_starts=starts, deps=deps)
        pending = self.analyse(sent, " ".join(words), protect=set(protect))
        out = self.finish_group([pending], tokens=True)[0]
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
        tags = [norm_tag(t.tag_) for t in doc] if tag else [None] * len(words)
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
                    if (
                        low in PRONOUNS
                        and prev is not None
                        and prev.text not in _SENTENCE_START_PREV
                        and "\n" not in prev.text
                    ):
                        return True
            if not t.is_space:
                prev = t
        return False


def split_long_text(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """`text` cut into pieces of at most `max_chars` that join back to it: after the last sentence end
    (., !, ?, ;, : and the whitespace after it) inside the window, else after the last whitespace, else
    (one word that long) at `max_chars`."""
    pieces, start = [], 0
    while len(text) - start > max_chars:
        window = text[start : start + max_chars]
        cut = max((m.end() for m in _CUT_AFTER.finditer(window)), default=0)
        if cut == 0:
            space = max(window.rfind(" "), window.rfind("\t"))
            cut = space + 1 if space > 0 else max_chars
        pieces.append(text[start : start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def swap_lines(
    swapper: Swapper, texts: Sequence[str], batch_size: int = 256, max_chars: int = MAX_PIECE_CHARS
) -> list[str]:
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
