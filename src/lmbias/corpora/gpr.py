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
"""

from __future__ import annotations

import logging
import random
from typing import Sequence

import pyarrow as pa

from lmbias.corpora.anonymise import AnonymisedSentence
from lmbias.corpora.conll import detokenize
from lmbias.errors import ConfigError

log = logging.getLogger(__name__)

PRONOUN_PLACEHOLDER = "[PRONOUN]"
PRONOUNS = {
    "he": "male", "him": "male", "his": "male", "himself": "male",
    "she": "female", "her": "female", "hers": "female", "herself": "female",
}
SPLITS = ("train", "validation")

GPR_SCHEMA = pa.schema(
    [
        ("example_id", pa.string()),
        ("doc_id", pa.string()),  # document + part
        ("document", pa.string()),  # the unit of the train/validation split
        ("sentence_id", pa.int32()),
        ("token_index", pa.int32()),  # position of the masked pronoun among the sentence's tokens
        ("text", pa.string()),  # detokenised sentence holding PRONOUN_PLACEHOLDER exactly once
        ("label", pa.string()),  # the masked pronoun, lower-cased
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


def _example(s: AnonymisedSentence, words, tags, i, split, augmented, source) -> dict:
    suffix = "/swapped" if augmented else ""
    return {
        "example_id": f"{s.doc_key}/{s.sentence_id}/{i}{suffix}",
        "doc_id": s.doc_key,
        "document": s.document,
        "sentence_id": s.sentence_id,
        "token_index": i,
        "text": masked_text(words, i),
        "label": words[i].lower(),
        "surface": words[i],
        "gender": PRONOUNS[words[i].lower()],
        "tag": tags[i] if tags is not None else None,
        "split": split,
        "augmented": augmented,
        "source_example": source,
    }


def gpr_examples(
    sentences: Sequence[AnonymisedSentence],
    swapper,
    validation_fraction: float = 0.2,
    seed: int = 0,
    batch_size: int = 256,
    protect: bool = False,
) -> tuple[pa.Table, pa.Table, dict]:
    """(U table, A table, counts). `swapper`: a lmbias.corpora.counterfactual.Swapper (its swap_tokens keeps
    the token count); given gold tags it uses them, otherwise it tags with spaCy. protect: keep the tokens
    of each sentence's `protect` (gold coreference with a proper noun, Lu et al.'s rule); a pronoun kept so
    gets no swapped copy (counted in not_swapped)."""
    splits = assign_splits([s.document for s in sentences], validation_fraction, seed)
    original, swapped = [], []
    unswapped = 0
    selected = [s for s in sentences if any(w.lower() in PRONOUNS for w in s.words)]
    untagged = [i for i, s in enumerate(selected) if s.tags is None]
    pretagged: dict[int, tuple[list[str], list[str]]] = {}
    if untagged and getattr(swapper, "grammatical", False):
        # One nlp.pipe over every untagged sentence instead of a tagger call per swap_tokens call.
        tagged = spacy_tags([selected[i].words for i in untagged], swapper.nlp, batch_size)
        pretagged = dict(zip(untagged, tagged))
    for k, s in enumerate(selected):
        positions = [i for i, w in enumerate(s.words) if w.lower() in PRONOUNS]
        split = splits[s.document]
        rows = [_example(s, s.words, s.tags, i, split, False, None) for i in positions]
        original.extend(rows)
        keep = {"protect": s.protect} if protect and s.protect else {}
        if k in pretagged:
            tags, ner = pretagged[k]
            flipped = list(swapper.swap_tokens(list(s.words), tags=tags, ner=ner, **keep))
        else:
            flipped = list(swapper.swap_tokens(list(s.words), tags=list(s.tags) if s.tags is not None else None,
                                               ner=list(s.ner) if s.ner is not None else None, **keep))
        if len(flipped) != len(s.words):
            raise RuntimeError(f"swap_tokens changed the token count of {s.doc_key} sentence {s.sentence_id}")
        for i, row in zip(positions, rows):
            new = flipped[i].lower()
            if new not in PRONOUNS or PRONOUNS[new] == row["gender"]:
                unswapped += 1  # counted and logged: the swapper left this pronoun's gender as it was
                continue
            swapped.append(_example(s, flipped, s.tags, i, split, True, row["example_id"]))
    u_table = pa.Table.from_pylist(original, schema=GPR_SCHEMA)
    a_table = pa.Table.from_pylist(original + swapped, schema=GPR_SCHEMA)
    counts = {
        "sentences": len(sentences),
        "sentences_with_pronoun": len(selected),
        "documents": len(splits),
        "validation_documents": sum(v == "validation" for v in splits.values()),
        "examples_u": u_table.num_rows,
        "examples_a": a_table.num_rows,
        "not_swapped": unswapped,
        **{f"u_{g}": sum(r["gender"] == g for r in original) for g in ("male", "female")},
        **{f"u_{sp}": sum(r["split"] == sp for r in original) for sp in SPLITS},
    }
    log.info("GPR: %(sentences_with_pronoun)d of %(sentences)d sentences hold a gendered pronoun -> "
             "%(examples_u)d -U examples (%(u_male)d male, %(u_female)d female; %(u_train)d train, "
             "%(u_validation)d validation), %(examples_a)d -A examples; %(not_swapped)d pronouns the swapper "
             "left unchanged (no swapped copy)", counts)
    return u_table, a_table, counts
