"""The gendered-pronoun-resolution (GPR) fine-tuning task of Manela et al. (2021, section 3.3,
after Zhao et al. 2019), built from anonymised CoNLL-2012 sentences (lmbias.corpora.anonymise).

One example per gendered pronoun occurrence (he, him, his, himself, she, her, hers, herself, any
case): the sentence with that pronoun replaced by PRONOUN_PLACEHOLDER (the training stage swaps in
its tokenizer's mask token) and the pronoun kept as the label. Other pronouns of the sentence stay.

- `-U` (unaugmented): the original examples.
- `-A` (augmented): -U plus, for every example, the gender-swapped copy of its sentence (every
  gendered word swapped by lmbias.corpora.counterfactual, the gold POS tags deciding her -> him/his and the
  gold NER column protecting names of places and organisations where the corpus has them; spaCy's
  tags and entities otherwise), masked at the same token; its label is the swapped pronoun. With
  `protect_proper_noun_clusters` (off by default: Manela et al. swap every pronoun of the anonymised text)
  the words of gold clusters with a proper noun are kept (Lu et al.'s rule) and such pronouns get no copy.

Train/validation: a seeded split of *documents* (`validation_fraction`, 0.2 as in Manela et al.'s
appendix A), so no document, and no swapped copy of a training sentence, reaches validation.

Manela et al.'s code (`process_ontonotes.ipynb`, `BERT_fine_tuning_full_ontonotes.ipynb`) builds the task
differently; each difference is an option (lmbias.corpora.jobs.GPR_DEFAULTS keeps the behaviour above):

- `examples: accumulated`: sentences of a document are gathered until one holds a pronoun; the example
  text is all of them joined by SENTENCE_SEPARATOR (the tokenizer's separator token at training time), at
  most `max_chars` characters, else only the last 8, 7, ..., 1 of them that fit (none fit: dropped), as
  their `compile_pronoun_strings`. One example per pronoun of the last sentence.
- `other_pronouns: masked`: the example's other pronouns are hidden too (MASKED_PRONOUN: the mask token,
  no target), as their `generate_training_data` masks every pronoun of the text.
- `pronouns`: which pronouns make examples (theirs: he, she, her, his, him).
- `deduplicate`: drop an example whose (all-pronouns-masked text, label) was seen before (their
  drop_duplicates(keep='first')), in -U and -A alike only keeping pairs whose both halves survive (their
  index intersection of the original and flipped frames).
- `split_by: example`: sklearn's train_test_split(test_size=validation_fraction, random_state=seed) over the
  examples (the -U rows). -A's original rows keep the same split and each swapped copy takes its original's.
  Their notebook splits the -A frame (originals and copies) on its own, so a validation example's swapped twin
  can sit in training, which inflates the validation accuracy that picks the epoch: a defect, not copied.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence

import pyarrow as pa

from lmbias.corpora.anonymise import AnonymisedSentence
from lmbias.corpora.conll import detokenize
from lmbias.errors import ConfigError

log = logging.getLogger(__name__)

PRONOUN_PLACEHOLDER = "[PRONOUN]"
PRONOUNS = {
    "he": "male",
    "him": "male",
    "his": "male",
    "himself": "male",
    "she": "female",
    "her": "female",
    "hers": "female",
    "herself": "female",
}
SPLITS = ("train", "validation")
EXAMPLE_UNITS = ("sentence", "accumulated")
SPLIT_UNITS = ("document", "example")
OTHER_PRONOUNS = ("visible", "masked")
# Joins the sentences of an accumulated example (Manela et al. join them with " [SEP] "); lmbias.training.data
# swaps in the tokenizer's separator token, so cased and BPE tokenizers see their own.
SENTENCE_SEPARATOR = "[SEP]"
# Another pronoun of the example hidden as well (other_pronouns: masked): the mask token, with no target.
MASKED_PRONOUN = "[MASKED_PRONOUN]"
# Manela et al.'s fallback when the gathered sentences exceed max_chars: the last 8, then 7, ..., 1 sentences.
ACCUMULATE_FALLBACK = 8

GPR_SCHEMA = pa.schema(
    [
        ("example_id", pa.string()),
        ("doc_id", pa.string()),  # document + part
        ("document", pa.string()),  # the unit of the train/validation split
        ("sentence_id", pa.int32()),
        ("token_index", pa.int32()),  # position of the masked pronoun among the sentence's tokens
        ("text", pa.string()),  # detokenised sentence holding PRONOUN_PLACEHOLDER exactly once
        ("label", pa.string()),  # the masked pronoun, lower-cased (training targets `surface`: cased tokenizers)
        ("surface", pa.string()),  # the masked pronoun as written
        ("gender", pa.string()),  # male | female
        ("tag", pa.string()),  # gold POS of the pronoun (null without gold POS)
        ("split", pa.string()),  # train | validation
        ("augmented", pa.bool_()),  # True: the gender-swapped copy
        ("source_example", pa.string()),  # for swapped copies: the original's example_id
    ]
)


def assign_splits(documents: Sequence[str], validation_fraction: float = 0.2, seed: int = 0) -> dict[str, str]:
    """document -> train | validation: a seeded shuffle of the sorted unique documents, the first
    round(n * fraction) to validation. Independent of input order."""
    if not 0.0 <= validation_fraction < 1.0:
        raise ConfigError(f"corpora.ontonotes.gpr.validation_fraction: must be in [0, 1), got {validation_fraction!r}")
    unique = sorted(set(documents))
    random.Random(seed).shuffle(unique)
    n_val = round(len(unique) * validation_fraction)
    return {doc: ("validation" if i < n_val else "train") for i, doc in enumerate(unique)}


def example_splits(n: int, validation_fraction: float = 0.2, seed: int = 0) -> list[str]:
    """train | validation per row, as scikit-learn's train_test_split(test_size=validation_fraction,
    random_state=seed, shuffle=True): ceil(fraction * n) rows to validation, the first ones of
    numpy.random.RandomState(seed).permutation(n) (ShuffleSplit), the rest to train."""
    if not 0.0 <= validation_fraction < 1.0:
        raise ConfigError(f"corpora.ontonotes.gpr.validation_fraction: must be in [0, 1), got {validation_fraction!r}")
    import numpy as np

    n_val = math.ceil(validation_fraction * n)
    out = ["train"] * n
    for i in np.random.RandomState(seed).permutation(n)[:n_val]:
        out[int(i)] = "validation"
    return out


def join_sentences(texts: Sequence[str]) -> str:
    return f" {SENTENCE_SEPARATOR} ".join(texts)


def accumulate(
    texts: Sequence[str], holds_pronoun: Sequence[bool], max_chars: int = 512
) -> tuple[list[list[int]], int]:
    """(groups of sentence indices, dropped): Manela et al.'s `compile_pronoun_strings` over one document.
    Sentences are gathered until one holds a pronoun; the group is all of them when their joined text
    (join_sentences) has at most max_chars characters, else the last ACCUMULATE_FALLBACK, ..., 1 of them
    that fit; when not even that sentence fits the group is dropped (counted). Sentences after the last
    pronoun of the document make no group (their notebook carries them into the next file)."""
    groups, pending, dropped = [], [], 0
    for i, flag in enumerate(holds_pronoun):
        pending.append(i)
        if not flag:
            continue
        chosen = None
        if len(join_sentences([texts[j] for j in pending])) <= max_chars:
            chosen = pending
        else:
            for k in range(ACCUMULATE_FALLBACK, 0, -1):
                if len(join_sentences([texts[j] for j in pending[-k:]])) <= max_chars:
                    chosen = pending[-k:]
                    break
        if chosen is None:
            dropped += 1
        else:
            groups.append(list(chosen))
        pending = []
    return groups, dropped


def gn_glove_lexicon(male_file, female_file):
    """Manela et al.'s -A word map from GN-GloVe's word lists (`flipped_gendered_words_map`): line i of the
    male file pairs with line i of the female file, both directions, plus kingdom <-> queendom; the
    pronouns are left to the grammatical rules (their POS-based pronoun map); a word listed with several
    partners takes the one their notebook picks (GN_GLOVE_CHOICES, else the first). A SwapLexicon (no names)."""
    from lmbias.corpora.swap_lexicon import PRONOUNS as SWAP_PRONOUNS
    from lmbias.corpora.swap_lexicon import SwapLexicon
    from lmbias.errors import DataError

    lists = []
    for path in (male_file, female_file):
        try:
            lists.append([line.rstrip("\n") for line in open(path, encoding="utf-8")])
        except OSError as exc:
            raise DataError(f"GN-GloVe word list not readable ({exc})", path) from None
    male, female = lists
    if len(male) != len(female):
        raise DataError(
            f"GN-GloVe word lists differ in length ({len(male)} male, {len(female)} female lines)", male_file
        )
    male, female = male + ["kingdom"], female + ["queendom"]
    partners: dict[str, list[str]] = {}
    for word, partner in list(zip(male, female)) + list(zip(female, male)):
        partners.setdefault(word, []).append(partner)
    lex = SwapLexicon(sources=[str(male_file), str(female_file)])
    for word, options in partners.items():
        if word in SWAP_PRONOUNS:
            continue
        partner = GN_GLOVE_CHOICES.get(word, options[0])
        if len(set(options)) > 1:
            lex.conflicts.append(f"{word}: {options} -> {partner}")
        lex.word_pairs[word] = partner
    return lex


# Where GN-GloVe lists a word with several partners, Manela et al.'s notebook picks one by hand; these are the
# words where their pick is not the first listed partner (every other such word keeps its first partner).
GN_GLOVE_CHOICES = {
    "bachelor": "maiden",
    "dudes": "chicks",
    "gals": "guys",
    "lady": "gentleman",
    "manservant": "maid",
    "nuns": "priests",
    "penis": "vagina",
    "priest": "priestess",
}


# Components that tag words and find entities; the swapper reads nothing else.
_TAGGING = ("tok2vec", "tagger", "attribute_ruler", "ner")


def spacy_tags(word_lists: Sequence[Sequence[str]], nlp, batch_size: int = 256) -> list[tuple[list[str], list[str]]]:
    """(PTB tags, BIO entity labels) of pre-tokenised sentences, in one nlp.pipe pass; the same values
    Swapper.swap_tokens computes for itself when it is given no tags."""
    from spacy.tokens import Doc

    disable = [name for name in nlp.pipe_names if name not in _TAGGING]
    docs = (Doc(nlp.vocab, words=list(words)) for words in word_lists)
    out = []
    for doc in nlp.pipe(docs, batch_size=batch_size, disable=disable):
        out.append(([t.tag_ for t in doc], [f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else "O" for t in doc]))
    return out


def masked_text(words: Sequence[str], index: int) -> str:
    return detokenize([PRONOUN_PLACEHOLDER if i == index else w for i, w in enumerate(words)])


def example_text(word_lists: Sequence[Sequence[str]], index: int | None, hidden: Sequence[set[int]]) -> str:
    """The sentences joined (join_sentences), the last one's word `index` as PRONOUN_PLACEHOLDER (None: no
    target) and the words at `hidden` (per sentence) as MASKED_PRONOUN."""
    last = len(word_lists) - 1
    parts = []
    for k, words in enumerate(word_lists):
        parts.append(
            detokenize(
                [
                    PRONOUN_PLACEHOLDER if k == last and i == index else MASKED_PRONOUN if i in hidden[k] else w
                    for i, w in enumerate(words)
                ]
            )
        )
    return join_sentences(parts)


def _example(s: AnonymisedSentence, words, tags, i, split, augmented, source, text=None) -> dict:
    suffix = "/swapped" if augmented else ""
    return {
        "example_id": f"{s.doc_key}/{s.sentence_id}/{i}{suffix}",
        "doc_id": s.doc_key,
        "document": s.document,
        "sentence_id": s.sentence_id,
        "token_index": i,
        "text": masked_text(words, i) if text is None else text,
        "label": words[i].lower(),
        "surface": words[i],
        "gender": PRONOUNS[words[i].lower()],
        "tag": tags[i] if tags is not None else None,
        "split": split,
        "augmented": augmented,
        "source_example": source,
    }


def _groups(sentences: Sequence[AnonymisedSentence], pronouns: frozenset, examples: str, max_chars: int):
    """(groups of sentence indices whose last sentence holds the pronouns, dropped): one sentence each, or
    accumulated per document (documents in order of first appearance)."""
    holds = [any(w.lower() in pronouns for w in s.words) for s in sentences]
    if examples == "sentence":
        return [[k] for k, flag in enumerate(holds) if flag], 0
    by_document: dict[str, list[int]] = {}
    for k, s in enumerate(sentences):
        by_document.setdefault(s.document, []).append(k)
    groups, dropped = [], 0
    for members in by_document.values():
        found, lost = accumulate(
            [detokenize(sentences[k].words) for k in members], [holds[k] for k in members], max_chars
        )
        groups += [[members[j] for j in group] for group in found]
        dropped += lost
    return groups, dropped


def gpr_examples(
    sentences: Sequence[AnonymisedSentence],
    swapper,
    validation_fraction: float = 0.2,
    seed: int = 0,
    batch_size: int = 256,
    protect: bool = False,
    *,
    examples: str = "sentence",
    max_chars: int = 512,
    other_pronouns: str = "visible",
    pronouns: Sequence[str] | None = None,
    deduplicate: bool = False,
    split_by: str = "document",
) -> tuple[pa.Table, pa.Table, dict]:
    """(U table, A table, counts). `swapper`: a lmbias.corpora.counterfactual.Swapper (its swap_tokens keeps
    the token count); given gold tags it uses them, otherwise it tags with spaCy. protect: keep the tokens
    of each sentence's `protect` (gold coreference with a proper noun, Lu et al.'s rule); a pronoun kept so
    gets no swapped copy (counted in not_swapped). The keyword options are Manela et al.'s code's choices
    (module docstring); their defaults keep one sentence, one visible-context pronoun, a document split."""
    chosen = frozenset(PRONOUNS if pronouns is None else (p.lower() for p in pronouns))
    groups, too_long = _groups(sentences, chosen, examples, max_chars)
    splits = assign_splits([s.document for s in sentences], validation_fraction, seed) if split_by == "document" else {}
    # Every sentence an example shows is swapped (accumulated: the context sentences too).
    needed = sorted({k for g in groups for k in g}) if examples == "accumulated" else [g[-1] for g in groups]
    untagged = [k for k in needed if sentences[k].tags is None]
    pretagged: dict[int, tuple[list[str], list[str]]] = {}
    if untagged and getattr(swapper, "grammatical", False):
        # One nlp.pipe over every untagged sentence instead of a tagger call per swap_tokens call.
        pretagged = dict(zip(untagged, spacy_tags([sentences[k].words for k in untagged], swapper.nlp, batch_size)))
    flipped: dict[int, list[str]] = {}
    for k in needed:
        s = sentences[k]
        keep = {"protect": s.protect} if protect and s.protect else {}
        if k in pretagged:
            tags, ner = pretagged[k]
            out = list(swapper.swap_tokens(list(s.words), tags=tags, ner=ner, **keep))
        else:
            out = list(
                swapper.swap_tokens(
                    list(s.words),
                    tags=list(s.tags) if s.tags is not None else None,
                    ner=list(s.ner) if s.ner is not None else None,
                    **keep,
                )
            )
        if len(out) != len(s.words):
            raise RuntimeError(f"swap_tokens changed the token count of {s.doc_key} sentence {s.sentence_id}")
        flipped[k] = out
    pairs: list[tuple[dict, dict | None, tuple, tuple | None]] = []
    unswapped = 0
    for group in groups:
        s = sentences[group[-1]]
        positions = [i for i, w in enumerate(s.words) if w.lower() in chosen]
        hidden_all = [{i for i, w in enumerate(sentences[k].words) if w.lower() in chosen} for k in group]
        original_words = [sentences[k].words for k in group]
        swapped_words = [flipped[k] for k in group]
        split = splits.get(s.document)
        for i in positions:
            hidden = hidden_all[:-1] + [hidden_all[-1] - {i}] if other_pronouns == "masked" else [set() for _ in group]
            text = (
                example_text(original_words, i, hidden)
                if examples == "accumulated" or other_pronouns == "masked"
                else None
            )
            row = _example(s, s.words, s.tags, i, split, False, None, text)
            key = (example_text(original_words, None, hidden_all).lower(), row["label"])
            new = flipped[group[-1]][i].lower()
            if new not in PRONOUNS or PRONOUNS[new] == row["gender"]:
                unswapped += 1  # counted and logged: the swapper left this pronoun's gender as it was
                pairs.append((row, None, key, None))
                continue
            copy_text = example_text(swapped_words, i, hidden) if text is not None else None
            copy = _example(s, flipped[group[-1]], s.tags, i, split, True, row["example_id"], copy_text)
            pairs.append((row, copy, key, (example_text(swapped_words, None, hidden_all).lower(), copy["label"])))
    duplicates = 0
    if deduplicate:
        # Their drop_duplicates(keep='first') on each frame, then the intersection of the surviving rows.
        seen_u, seen_a, kept = set(), set(), []
        for row, copy, key_u, key_a in pairs:
            new_u = key_u not in seen_u
            seen_u.add(key_u)
            new_a = key_a is None or key_a not in seen_a
            if key_a is not None:
                seen_a.add(key_a)
            if new_u and new_a:
                kept.append((row, copy, key_u, key_a))
            else:
                duplicates += 1
        pairs = kept
    original = [row for row, *_ in pairs]
    swapped = [copy for _, copy, *_ in pairs if copy is not None]
    if split_by == "example":
        u_rows = [dict(r) for r in original]
        for r, sp in zip(u_rows, example_splits(len(u_rows), validation_fraction, seed)):
            r["split"] = sp
        split_of = {r["example_id"]: r["split"] for r in u_rows}  # a swapped copy goes where its original went
        a_rows = [dict(r) for r in u_rows] + [dict(r, split=split_of[r["source_example"]]) for r in swapped]
    else:
        u_rows, a_rows = original, original + swapped
    u_table = pa.Table.from_pylist(u_rows, schema=GPR_SCHEMA)
    a_table = pa.Table.from_pylist(a_rows, schema=GPR_SCHEMA)
    counts = {
        "sentences": len(sentences),
        "sentences_with_pronoun": len(groups)
        if examples == "sentence"
        else sum(any(w.lower() in chosen for w in s.words) for s in sentences),
        "documents": len({s.document for s in sentences}),
        **({"validation_documents": sum(v == "validation" for v in splits.values())} if split_by == "document" else {}),
        "examples_u": u_table.num_rows,
        "examples_a": a_table.num_rows,
        "not_swapped": unswapped,
        **{f"u_{g}": sum(r["gender"] == g for r in u_rows) for g in ("male", "female")},
        **{f"u_{sp}": sum(r["split"] == sp for r in u_rows) for sp in SPLITS},
    }
    if examples == "accumulated":
        counts.update(groups=len(groups), too_long=too_long)
    if deduplicate:
        counts["duplicates_dropped"] = duplicates
    log.info(
        "GPR: %(sentences_with_pronoun)d of %(sentences)d sentences hold a gendered pronoun -> "
        "%(examples_u)d -U examples (%(u_male)d male, %(u_female)d female; %(u_train)d train, "
        "%(u_validation)d validation), %(examples_a)d -A examples; %(not_swapped)d pronouns the swapper "
        "left unchanged (no swapped copy)",
        counts,
    )
    if examples == "accumulated" or deduplicate:
        log.info(
            "GPR (%s examples): %s", examples, {k: counts.get(k) for k in ("groups", "too_long", "duplicates_dropped")}
        )
    return u_table, a_table, counts
