"""bias-bench's (Meade et al. 2022) training data: packed blocks, and CDA applied to the blocks.

Their experiments/run_mlm.py and run_clm.py (HF's language-modeling examples with their additions) do not
train on sentences: every text is tokenised WITH special tokens, the token stream is concatenated and cut
into blocks of max_seq_length (run_clm: block_size) tokens (`pack_blocks`). Their gender CDA then works on
those blocks (`augment_blocks`): each block is decoded to text, split on whitespace, every word of their
list swapped to its partner, and only the blocks with at least one swap are kept, each twice (swapped and
original), re-tokenised.

Settings: TrainingSettings.pack_texts, block_augmentation, block_augmentation_words.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lmbias.errors import DataError
from lmbias.training.objectives import Encoded

log = logging.getLogger(__name__)

#: Texts per group: HF `datasets.Dataset.map(batched=True)` hands group_texts 1,000 texts at a time, and each
#: group's remainder (its last tokens short of a whole block) is dropped.
PACK_GROUP_TEXTS = 1000
#: The marks bias-bench appends to every listed word (_create_bias_attribute_words): "he." <-> "she." etc.
BIAS_BENCH_PUNCTUATION = (".", ",", "?", "!", ";", ":")
#: The list of their JSON file the gender augmentation reads (their --counterfactual_augmentation gender).
BIAS_BENCH_GENDER_KEY = "gender"


def pack_blocks(tokenizer, texts: list[str], block_length: int, group_texts: int = PACK_GROUP_TEXTS) -> list[Encoded]:
    """HF group_texts as bias-bench runs it: every text tokenised with the tokenizer's special tokens (BERT:
    [CLS] x [SEP]; GPT-2: none) and never truncated; in corpus order, each run of `group_texts` texts is
    concatenated and cut into blocks of exactly `block_length` tokens, the group's remainder (< block_length
    tokens) DROPPED. A group shorter than one block in all is kept whole, as one short block (theirs:
    `if total_length >= max_seq_length` guards the cut). Blocks keep the tokenizer's special-tokens mask.

    Their `--preprocessing_num_workers 4` first splits the corpus into 4 contiguous shards, so their group
    boundaries (and the up to 4 extra remainders dropped) differ slightly from one run of groups here."""
    blocks: list[Encoded] = []
    for start in range(0, len(texts), group_texts):
        enc = tokenizer(texts[start : start + group_texts], return_special_tokens_mask=True, verbose=False)
        ids = [t for row in enc["input_ids"] for t in row]
        special = [t for row in enc["special_tokens_mask"] for t in row]
        total = len(ids)
        if total >= block_length:
            total -= total % block_length
        blocks += [
            Encoded(ids=ids[i : i + block_length], special=special[i : i + block_length])
            for i in range(0, total, block_length)
        ]
    return blocks


def load_bias_bench_pairs(path, key: str = BIAS_BENCH_GENDER_KEY) -> list[tuple[str, str]]:
    """The (male, female) word pairs of bias-bench's data/bias_attribute_words.json ({"gender": [[m, f], ...]});
    DataError naming the file for a missing file, bad JSON or a list that is not pairs of words."""
    path = Path(path)
    if not path.is_file():
        raise DataError("bias attribute word list not found", path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"not a JSON file ({exc})", path) from None
    pairs = data.get(key) if isinstance(data, dict) else None
    if not isinstance(pairs, list) or not pairs:
        raise DataError(f"expected an object with a non-empty list {key!r} of [male, female] word pairs", path)
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(w, str) and w and not any(c.isspace() for c in w) for w in pair)
        ):
            raise DataError(f"{key}[{i}]: expected a pair of words (no whitespace), got {pair!r}", path)
    return [(m, f) for m, f in pairs]


def bias_bench_swap_map(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """word -> partner for their list and its punctuated forms (each pair again with one of . , ? ! ; :
    appended to both words). Where a word is in several pairs the LAST pair of their list wins, as their
    loop over all pairs overwrites earlier swaps: her -> his (not him), lady -> lord, girl -> guy, sir -> miss,
    mr. -> ms."""
    entries = list(pairs) + [(m + p, f + p) for p in BIAS_BENCH_PUNCTUATION for m, f in pairs]
    swap: dict[str, str] = {}
    for male, female in entries:
        swap[male] = female
        swap[female] = male
    return swap


def clean_up_tokenization(text: str) -> str:
    """transformers' clean-up of decoded text, which their pinned transformers 4.16.2 applies in every
    tokenizer's decode by default (newer versions skip it for BPE tokenizers): no space before . ? ! , and
    English contractions; so "he ." decodes as "he." and their punctuated forms can match."""
    for spaced, joined in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        text = text.replace(spaced, joined)
    return text


def augment_blocks(tokenizer, blocks: list[Encoded], swap: dict[str, str], max_length: int) -> list[Encoded]:
    """bias-bench's gender CDA on packed blocks (gender_counterfactual_augmentation of run_mlm.py). Each block
    is decoded WITH its special tokens ([CLS] ... [SEP] [CLS] ... stay in the text), cleaned up as
    transformers 4.16.2 decodes, and split on whitespace; a block with no word of `swap` is DROPPED; a block
    with one gives two examples, in this order: its words with every listed word replaced by its partner,
    joined by single spaces, then the decoded text as is. Both are re-tokenised without adding special tokens
    (those of the text are kept), truncated to max_length. The special-tokens mask is the re-tokenisation's,
    as theirs: a fast tokenizer marks none of the special tokens written in the text, so the MLM noise may
    mask [CLS]/[SEP] there. Their padding (to the longest of 1,000 blocks) is left to the batches: pads are
    neither attended to nor loss targets."""
    texts: list[str] = []
    for block in blocks:
        text = clean_up_tokenization(
            tokenizer.decode(block.ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        )
        words = text.split()
        if any(w in swap for w in words):
            texts += [" ".join(swap.get(w, w) for w in words), text]
    if not texts:
        return []
    enc = tokenizer(
        texts, add_special_tokens=False, truncation=True, max_length=max_length, return_special_tokens_mask=True
    )
    return [
        Encoded(ids=list(ids), special=list(mask)) for ids, mask in zip(enc["input_ids"], enc["special_tokens_mask"])
    ]


def bias_bench_examples(tokenizer, texts: list[str], settings, where) -> list[Encoded]:
    """The training examples for settings.pack_texts (and block_augmentation): packed blocks of
    settings.max_length tokens, augmented as bias-bench where asked. DataError naming `where` (the corpus)
    when nothing is left."""
    blocks = pack_blocks(tokenizer, texts, settings.max_length)
    log.info("%s: %d texts packed into %d blocks of %d tokens", where, len(texts), len(blocks), settings.max_length)
    if settings.block_augmentation is None:
        return blocks
    swap = bias_bench_swap_map(load_bias_bench_pairs(settings.block_augmentation_words))
    examples = augment_blocks(tokenizer, blocks, swap, settings.max_length)
    log.info(
        "%s: %d of %d blocks hold a word of %s: %d examples (each swapped and original)",
        where,
        len(examples) // 2,
        len(blocks),
        settings.block_augmentation_words,
        len(examples),
    )
    if not examples:
        raise DataError(
            f"block_augmentation {settings.block_augmentation}: no block of {settings.max_length} "
            f"tokens holds a word of {settings.block_augmentation_words}; nothing to train on",
            where,
        )
    return examples
