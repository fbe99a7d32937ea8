"""Deterministic tiny models (BERT, RoBERTa, GPT-2, BART, Llama) that need no model hub.

Why: no machine here reaches the hub, yet every code path (tokenise, mask, score, fine-tune) has to
run end to end. A tiny model is a real transformers checkpoint with random weights (fixed seed) and a
tokenizer built locally from the project's own word list, ``resources/vocab/tiny_words.txt``, so that
every pronoun, gendered word, name and profession of the benchmarks is a single token. Their numbers
mean nothing, except for *planted-bias* variants, whose output bias for chosen words is raised so the
direction of every metric is known in advance.

Same arguments -> byte-identical files (weights and tokenizer): the seed fixes torch's, numpy's and
Python's RNGs, the BPE merges come from the deterministic ``tokenizers`` trainer, and the output is
written to a temporary folder that replaces ``out_dir`` in one rename.

Here: each architecture's tokenizer, config and model class, and the build (``python -m lmbias.engine.tiny``,
rule build_tiny_model). The word list is lmbias.engine.tiny_vocab's, the planting lmbias.engine.planted_bias's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import time
from pathlib import Path

from lmbias.engine.planted_bias import PLANTABLE, plant_bias
from lmbias.engine.tiny_vocab import DEFAULT_WORDS, WORD_LIST_HEADER, derive_word_list, load_word_list, write_word_list
from lmbias.errors import ConfigError
from lmbias.io import atomic_folder

log = logging.getLogger(__name__)

ARCHITECTURES = ("bert", "roberta", "gpt2", "bart", "llama")
FAMILY_OF = {"bert": "mlm", "roberta": "mlm", "gpt2": "clm", "bart": "seq2seq", "llama": "clm"}

#: Size of every tiny model: enough to run, small enough for a 2-core CI machine.
TINY_SIZE = {
    "hidden": 64,
    "layers": 2,
    "heads": 2,
    "intermediate": 128,
    "max_positions": 512,
}

#: Name of the provenance file written next to the weights.
INFO_FILE = "tiny_model.json"

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
ROBERTA_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0..3 as in roberta-base / bart-base; <mask> is last
GPT2_EOS = "<|endoftext|>"
LLAMA_SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0..2 as in Llama 2; <s> is BOS (added by the tokenizer), </s> EOS

#: Characters the uncased WordPiece vocabulary always holds (alone and as ##continuation), so any ASCII
#: text and common typographic punctuation tokenise without [UNK].
_EXTRA_CHARS = "\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u00ab\u00bb\u00b0\u00a3\u20ac\u00a7\u00df"


# --------------------------------------------------------------------------------------------------
# Tokenizers


def _bert_chars(words: list[str]) -> list[str]:
    chars = {chr(c) for c in range(33, 127)}
    chars.update(_EXTRA_CHARS)
    for word in words:
        chars.update(word)
    return sorted(ch for ch in chars if not ch.isupper())


def build_bert_tokenizer(words: list[str]):
    """Uncased WordPiece: specials, every character and its ##continuation, every listed word whole."""
    from tokenizers import normalizers
    from transformers import BertTokenizer

    normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    normalized = [normalizer.normalize_str(w) for w in words]
    chars = _bert_chars(normalized)
    tokens: list[str] = list(BERT_SPECIALS) + chars + ["##" + ch for ch in chars]
    seen = set(tokens)
    for word in sorted(set(normalized)):
        if word and word not in seen:
            tokens.append(word)
            seen.add(word)
    vocab = {tok: i for i, tok in enumerate(tokens)}
    return BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=TINY_SIZE["max_positions"])


def _train_byte_bpe(words: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Byte-level BPE trained until every listed word, bare and after a space, is one token.

    The ``tokenizers`` trainer breaks ties by pair, so the merges are the same in every process.
    Returns (tokens in id order, merges).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=10_000_000,  # never reached: training stops when every word is a single token
        min_frequency=0,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )

    def sequences():
        for word in words:
            yield word
            yield " " + word

    tok.train_from_iterator(sequences(), trainer=trainer, length=2 * len(words))
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return tokens, merges


def build_bpe_tokenizer(words: list[str], architecture: str):
    """Byte-level BPE tokenizer for roberta/bart (<s> <pad> </s> <unk> ... <mask>) or gpt2 (... <|endoftext|>)."""
    from tokenizers import AddedToken
    from transformers import GPT2Tokenizer, RobertaTokenizer

    trained, merges = _train_byte_bpe(words)
    max_len = TINY_SIZE["max_positions"]
    if architecture == "gpt2":
        tokens = trained + [GPT2_EOS]
        vocab = {tok: i for i, tok in enumerate(tokens)}
        # Like the hub's gpt2: no pad token is saved; lmbias.engine.models.load_tokenizer sets pad = eos.
        return GPT2Tokenizer(
            vocab=vocab,
            merges=merges,
            unk_token=GPT2_EOS,
            bos_token=GPT2_EOS,
            eos_token=GPT2_EOS,
            add_prefix_space=False,
            model_max_length=max_len,
        )
    tokens = list(ROBERTA_SPECIALS) + trained + ["<mask>"]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    # As in roberta-base/bart-base, <mask> absorbs the space before it, so "because <mask> did" predicts "Ġhe".
    mask = AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)
    return RobertaTokenizer(
        vocab=vocab,
        merges=merges,
        mask_token=mask,
        add_prefix_space=False,
        model_max_length=max_len,
    )


def build_llama_tokenizer(words: list[str]):
    """A Llama-style tokenizer: <unk> <s> </s> (ids 0, 1, 2), then the byte-level BPE of the word list.

    Like the hub's Llama 3 checkpoints it is a byte-level BPE saved as a plain PreTrainedTokenizerFast
    (tokenizer.json), and like every Llama tokenizer it puts BOS (<s>) in front of every encoded text
    (transformers 5 keeps this in tokenizer.json's post-processor, not as `add_bos_token`) and no EOS; it has no
    pad token (lmbias.engine.models pads with EOS). Unlike GPT-2's, its BOS and EOS differ, so code that takes "BOS or
    EOS" as the start token gets <s>, as a real Llama needs.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    trained, merges = _train_byte_bpe(words)
    tokens = list(LLAMA_SPECIALS) + trained
    vocab = {tok: i for i, tok in enumerate(tokens)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA_SPECIALS])
    unk, bos, eos = LLAMA_SPECIALS
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=unk,
        bos_token=bos,
        eos_token=eos,
        add_bos_token=True,
        add_eos_token=False,
        clean_up_tokenization_spaces=False,
        model_max_length=TINY_SIZE["max_positions"],
    )


def build_tokenizer(architecture: str, words: list[str]):
    _check_architecture(architecture)
    if architecture == "bert":
        return build_bert_tokenizer(words)
    if architecture == "llama":
        return build_llama_tokenizer(words)
    return build_bpe_tokenizer(words, architecture)


# --------------------------------------------------------------------------------------------------
# Models


def _check_architecture(architecture: str) -> None:
    if architecture not in ARCHITECTURES:
        raise ConfigError(f"tiny.architecture: {architecture!r} is not one of {', '.join(ARCHITECTURES)}")


def tiny_config(architecture: str, tokenizer):
    """The transformers config of a tiny model whose vocabulary and special ids match `tokenizer`."""
    from transformers import BartConfig, BertConfig, GPT2Config, LlamaConfig, RobertaConfig

    _check_architecture(architecture)
    s = TINY_SIZE
    vocab_size = len(tokenizer)
    if architecture == "bert":
        return BertConfig(
            vocab_size=vocab_size,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["intermediate"],
            max_position_embeddings=s["max_positions"],
            type_vocab_size=2,
            pad_token_id=tokenizer.pad_token_id,
        )
    if architecture == "roberta":
        return RobertaConfig(
            vocab_size=vocab_size,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["intermediate"],
            # RoBERTa positions start after padding_idx: 512 tokens need 514 rows.
            max_position_embeddings=s["max_positions"] + 2,
            type_vocab_size=1,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    if architecture == "gpt2":
        eos = tokenizer.eos_token_id
        return GPT2Config(
            vocab_size=vocab_size,
            n_positions=s["max_positions"],
            n_embd=s["hidden"],
            n_layer=s["layers"],
            n_head=s["heads"],
            n_inner=s["intermediate"],
            bos_token_id=eos,
            eos_token_id=eos,
        )
    if architecture == "llama":
        # One key/value head for two query heads: grouped-query attention, as in today's Llamas; untied
        # input and output embeddings and no pad id, as in Llama 2/3.
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=s["hidden"],
            intermediate_size=s["intermediate"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            num_key_value_heads=1,
            max_position_embeddings=s["max_positions"],
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=None,
            tie_word_embeddings=False,
        )
    return BartConfig(
        vocab_size=vocab_size,
        max_position_embeddings=s["max_positions"],
        d_model=s["hidden"],
        encoder_layers=s["layers"],
        decoder_layers=s["layers"],
        encoder_attention_heads=s["heads"],
        decoder_attention_heads=s["heads"],
        encoder_ffn_dim=s["intermediate"],
        decoder_ffn_dim=s["intermediate"],
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
    )


def _model_class(architecture: str):
    from transformers import (
        BartForConditionalGeneration,
        BertForMaskedLM,
        GPT2LMHeadModel,
        LlamaForCausalLM,
        RobertaForMaskedLM,
    )

    return {
        "bert": BertForMaskedLM,
        "roberta": RobertaForMaskedLM,
        "gpt2": GPT2LMHeadModel,
        "bart": BartForConditionalGeneration,
        "llama": LlamaForCausalLM,
    }[architecture]


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# --------------------------------------------------------------------------------------------------
# Build


def build_tiny_model(
    architecture: str,
    out_dir: str | os.PathLike,
    seed: int = 0,
    planted_bias: dict[str, float] | None = None,
    words: str | os.PathLike | None = None,
) -> Path:
    """Build a tiny `architecture` model (bert|roberta|gpt2|bart|llama) into `out_dir` (replaced atomically).

    Random init under `seed`, then `planted_bias` ({word: logit offset}) if given; saved with
    save_pretrained (safetensors) plus tokenizer files and tiny_model.json (how it was built).
    `words` is the word list (default resources/vocab/tiny_words.txt).
    """
    import torch

    _check_architecture(architecture)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"tiny.seed: {seed!r} is not an integer")
    if planted_bias is not None and not isinstance(planted_bias, dict):
        raise ConfigError(f"tiny.planted_bias: {planted_bias!r} is not a mapping of word -> number")
    if planted_bias and architecture not in PLANTABLE:
        raise ConfigError(
            f"tiny.planted_bias: not supported for architecture {architecture!r}; use one of {', '.join(PLANTABLE)}"
        )
    started = time.perf_counter()
    words_path = Path(words) if words is not None else DEFAULT_WORDS
    word_list = load_word_list(words_path)
    out_dir = Path(out_dir)

    tokenizer = build_tokenizer(architecture, word_list)
    config = tiny_config(architecture, tokenizer)
    seed_everything(seed)
    with torch.device("cpu"):
        model = _model_class(architecture)(config)
    model.eval()
    planted = plant_bias(model, tokenizer, planted_bias or {})

    with atomic_folder(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        info = {
            "architecture": architecture,
            "seed": seed,
            "planted_bias": {w: float(v) for w, v in sorted((planted_bias or {}).items())},
            "planted_token_ids": planted,
            "words_sha256": hashlib.sha256(words_path.read_bytes()).hexdigest(),
            "n_words": len(word_list),
            "vocab_size": len(tokenizer),
            "parameters": sum(p.numel() for p in model.parameters()),
            "size": TINY_SIZE,
        }
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    log.info(
        "built tiny %s (seed %d, %d parameters, vocab %d, planted %s) in %s in %.1f s",
        architecture,
        seed,
        info["parameters"],
        info["vocab_size"],
        info["planted_bias"] or "none",
        out_dir,
        time.perf_counter() - started,
    )
    return out_dir


_TINY_KEYS = ("architecture", "seed", "planted_bias")


def build_from_config(
    name: str, entry: dict, out_dir: str | os.PathLike, words: str | os.PathLike | None = None
) -> Path:
    """Build the tiny model of ``config["models"][name]`` (its ``tiny`` block) into `out_dir`.

    Checks the block (keys, architecture, and that the architecture fits the entry's family) and
    raises ConfigErrors naming the key, e.g. ``models.tiny-bert.tiny.architecture``.
    """
    key = f"models.{name}.tiny"
    tiny = entry.get("tiny") if isinstance(entry, dict) else None
    if not isinstance(tiny, dict):
        raise ConfigError(f"{key}: missing; only models with a tiny block are built locally")
    unknown = sorted(set(tiny) - set(_TINY_KEYS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (allowed: {', '.join(_TINY_KEYS)})")
    architecture = tiny.get("architecture")
    if architecture not in ARCHITECTURES:
        raise ConfigError(f"{key}.architecture: {architecture!r} is not one of {', '.join(ARCHITECTURES)}")
    family = entry.get("family")
    if family != FAMILY_OF[architecture]:
        raise ConfigError(
            f"models.{name}.family: {family!r} does not fit tiny architecture {architecture!r} "
            f"(expected {FAMILY_OF[architecture]!r})"
        )
    seed = tiny.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{key}.seed: {seed!r} is not an integer")
    planted = tiny.get("planted_bias")
    if planted is not None:
        if not isinstance(planted, dict):
            raise ConfigError(f"{key}.planted_bias: expected a mapping word -> logit offset, got {planted!r}")
        for word, value in planted.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{key}.planted_bias.{word}: {value!r} is not a number")
    try:
        return build_tiny_model(architecture, out_dir, seed=seed, planted_bias=planted, words=words)
    except ConfigError as exc:
        if not str(exc).startswith("tiny."):
            raise
        raise ConfigError(f"models.{name}.{exc}") from exc


def main(argv: list[str] | None = None) -> int:
    """``python -m lmbias.engine.tiny derive-words --data-dir DIR --out FILE`` | ``build ARCH OUT [--seed N]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lmbias.engine.tiny", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    derive = sub.add_parser("derive-words", help="derive the tiny word list from the benchmark data")
    derive.add_argument("--data-dir", required=True)
    derive.add_argument("--out", default=str(DEFAULT_WORDS))
    derive.add_argument("--max-words", type=int, default=6000)
    derive.add_argument("--no-gap", action="store_true")
    build = sub.add_parser("build", help="build one tiny model")
    build.add_argument("architecture", choices=ARCHITECTURES)
    build.add_argument("out_dir")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--words", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "derive-words":
        words = derive_word_list(args.data_dir, max_words=args.max_words, gap=not args.no_gap)
        write_word_list(words, args.out, WORD_LIST_HEADER)
        log.info("wrote %d words to %s", len(words), args.out)
    else:
        build_tiny_model(args.architecture, args.out_dir, seed=args.seed, words=args.words)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
