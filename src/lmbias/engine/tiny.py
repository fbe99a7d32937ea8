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
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import os
import random
import re
import time
from collections import Counter
from pathlib import Path

from lmbias.errors import ConfigError, DataError
from lmbias.io import atomic_folder

log = logging.getLogger(__name__)

ARCHITECTURES = ("bert", "roberta", "gpt2", "bart", "llama")
FAMILY_OF = {"bert": "mlm", "roberta": "mlm", "gpt2": "clm", "bart": "seq2seq", "llama": "clm"}
#: Architectures whose output logits plant_bias can raise (exactly; llama: within LLAMA_PLANT_TOLERANCE).
PLANTABLE = ("bert", "roberta", "gpt2", "bart", "llama")

#: A Llama-like decoder's planted logit offset is delta * rho with LLAMA_PLANT_TOLERANCE >= 1 - rho >= 0 (never
#: more than delta). Measured on the tiny Llama (seed 0) at every token of real benchmark sentences (CrowS-Pairs
#: gender, WinoBias dev, 300 GAP texts; 69k positions): 1 - rho at most 2.0e-3, 5e-4 on average; see plant_bias.
LLAMA_PLANT_TOLERANCE = 0.005

#: Default word list: resources/vocab/tiny_words.txt of this repository (the package is installed editable).
DEFAULT_WORDS = Path(__file__).resolve().parents[3] / "resources" / "vocab" / "tiny_words.txt"

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
# Word list


def load_word_list(path: str | os.PathLike | None = None) -> list[str]:
    """Read a word list: one word per line, ``#`` lines and blank lines ignored.

    A word with whitespace or a repeated word is a DataError naming file and line.
    """
    path = Path(path) if path is not None else DEFAULT_WORDS
    if not path.is_file():
        raise DataError("word list not found", path)
    words: list[str] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            word = line.strip()
            if any(ch.isspace() for ch in word):
                raise DataError(f"a word may not contain whitespace: {word!r}", path, lineno)
            if word in seen:
                raise DataError(f"{word!r} repeats line {seen[word]}", path, lineno)
            seen[word] = lineno
            words.append(word)
    if not words:
        raise DataError("word list is empty", path)
    return words


#: Project-authored core vocabulary (lower case; the word list also holds each one Capitalised).
CORE_WORDS: tuple[str, ...] = tuple(
    """
    he she him her his hers himself herself they them their theirs themselves themself it its itself
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    someone somebody anyone anybody everyone everybody nobody person people who whom whose
    man woman men women boy girl boys girls father mother fathers mothers son daughter sons daughters
    brother sister brothers sisters husband wife husbands wives uncle aunt uncles aunts nephew niece
    nephews nieces grandfather grandmother grandson granddaughter grandpa grandma king queen kings queens
    prince princess lord lady gentleman gentlemen ladies sir madam mr mrs ms miss male female males
    females masculine feminine boyfriend girlfriend groom bride dad mom mum daddy mommy papa mama guy
    guys gal lad lass actor actress waiter waitress host hostess hero heroine steward stewardess
    chairman chairwoman spokesman spokeswoman businessman businesswoman policeman policewoman fireman
    salesman saleswoman congressman congresswoman monk nun priest priestess god goddess emperor empress
    duke duchess widower widow bachelor fiance fiancee paternal maternal patriarch matriarch
    masculinity femininity manhood womanhood brotherhood sisterhood gender sex
    alice bob carol dave eve frank grace henry james john mary patricia robert jennifer michael linda
    william elizabeth david barbara richard susan joseph jessica thomas sarah charles karen paul lisa
    mike amy kevin donna steve diana greg kate jeff ann bill joan emily emma olivia sophia noah liam
    doctor nurse engineer teacher lawyer scientist programmer homemaker secretary surgeon pilot
    professor student manager assistant receptionist librarian hairdresser mechanic carpenter
    """.split()
)

_WORD_RE = re.compile(r"[^\W\d_]+")


def _words_in(text: str) -> list[str]:
    return _WORD_RE.findall(text)


def _benchmark_texts(data_dir: Path):
    """Yield the benchmark texts the tiny vocabulary must cover (read in place, never copied)."""
    wino = data_dir / "winobias"
    for path in sorted(wino.glob("*.txt.dev")):
        yield path.read_text(encoding="utf-8")
    for name in ("male_occupations.txt", "female_occupations.txt", "extra_gendered_words.txt", "generalized_swaps.txt"):
        if (wino / name).is_file():
            yield (wino / name).read_text(encoding="utf-8")
    bec = data_dir / "bec_pro"
    for name in ("BEC-Pro_EN.tsv", "BEC-Pro_DE.tsv"):
        if (bec / name).is_file():
            with open(bec / name, encoding="utf-8", newline="") as handle:
                for row in csv.DictReader(handle, delimiter="\t"):
                    yield " ".join(row.get(k) or "" for k in ("Sentence", "Person", "Profession"))
    if (bec / "professions_US_DE.tsv").is_file():
        with open(bec / "professions_US_DE.tsv", encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                yield " ".join(row.get(k) or "" for k in ("simplified_professions", "german_m", "german_f"))
    for path in sorted((data_dir / "seat").glob("*.jsonl")):
        tests = json.loads(path.read_text(encoding="utf-8"))
        for part in tests.values():
            yield " ".join(part.get("examples", []))
    crows = data_dir / "crows_pairs" / "crows_pairs_anonymized.csv"
    if crows.is_file():
        with open(crows, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                if row.get("bias_type") == "gender":
                    yield row["sent_more"] + " " + row["sent_less"]


def _gap_texts(data_dir: Path):
    for path in sorted((data_dir / "gap").glob("gap-*.tsv")):
        with open(path, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                yield row.get("Text") or ""


def _forms(word: str) -> list[str]:
    return sorted({word, word.lower()})


def derive_word_list(data_dir: str | os.PathLike, max_words: int = 6000, gap: bool = True) -> list[str]:
    """Derive the tiny-model word list (how resources/vocab/tiny_words.txt was made).

    1. CORE_WORDS, each lower-case and Capitalised (always kept);
    2. every word (regex ``[^\\W\\d_]+``, frequency >= 1) of the WinoBias dev sentences and word lists,
       BEC-Pro EN/DE sentences, persons and professions, SEAT examples and CrowS-Pairs gender rows,
       each as seen and lower-cased (most frequent first if they exceed ``max_words``);
    3. when ``gap``: the most frequent GAP words (same forms) until ``max_words`` forms.
    The result is sorted by code point.
    """
    data_dir = Path(data_dir)
    chosen: set[str] = set()
    for word in CORE_WORDS:
        chosen.update({word, word[:1].upper() + word[1:]})

    def add_by_frequency(texts):
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(_words_in(text))
        for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            forms = [f for f in _forms(word) if f not in chosen]
            if len(chosen) + len(forms) > max_words:
                break
            chosen.update(forms)

    add_by_frequency(_benchmark_texts(data_dir))
    if gap:
        add_by_frequency(_gap_texts(data_dir))
    return sorted(chosen)


def write_word_list(words: list[str], path: str | os.PathLike, header: list[str] | tuple[str, ...] = ()) -> Path:
    """Write a word list (``#`` header lines, then one word per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {line}\n" for line in header) + "".join(f"{w}\n" for w in words)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


WORD_LIST_HEADER = (
    "lmbias tiny-model vocabulary: one word form per line, sorted by code point; lines starting with # are ignored.",
    "Project-authored. Made by `python -m lmbias.engine.tiny derive-words --data-dir ../shared/data --out <this file>`",
    "(lmbias.engine.tiny.derive_word_list): lmbias.engine.tiny.CORE_WORDS (pronouns, gendered word pairs, names, professions;",
    "lower-case and Capitalised) plus every word (regex [^\\W\\d_]+, frequency >= 1) of the WinoBias dev sentences",
    "and occupation/swap lists, BEC-Pro EN/DE sentences and professions, SEAT examples and CrowS-Pairs gender rows,",
    "then the most frequent GAP words, up to 6000 forms; each word as seen and lower-cased. No data file is copied.",
)


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

    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
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
        # Like the hub's gpt2: no pad token is saved; lmbias.engine.models.load_model sets pad = eos.
        return GPT2Tokenizer(
            vocab=vocab, merges=merges, unk_token=GPT2_EOS, bos_token=GPT2_EOS, eos_token=GPT2_EOS,
            add_prefix_space=False, model_max_length=max_len,
        )
    tokens = list(ROBERTA_SPECIALS) + trained + ["<mask>"]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    # As in roberta-base/bart-base, <mask> absorbs the space before it, so "because <mask> did" predicts "Ġhe".
    mask = AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)
    return RobertaTokenizer(
        vocab=vocab, merges=merges, mask_token=mask, add_prefix_space=False, model_max_length=max_len,
    )


def build_llama_tokenizer(words: list[str]):
    """A Llama-style tokenizer: <unk> <s> </s> (ids 0, 1, 2), then the byte-level BPE of the word list.

    Like the hub's Llama 3 checkpoints it is a byte-level BPE saved as a plain PreTrainedTokenizerFast
    (tokenizer.json), and like every Llama tokenizer it puts BOS (<s>) in front of every encoded text
    (transformers 5 keeps this in tokenizer.json's post-processor, not as `add_bos_token`) and no EOS; it has no pad token (lmbias.engine.models
    pads with EOS). Unlike GPT-2's, its BOS and EOS differ, so code that takes "BOS or EOS" as the start
    token gets <s>, as a real Llama needs.
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
        tokenizer_object=backend, unk_token=unk, bos_token=bos, eos_token=eos, add_bos_token=True,
        add_eos_token=False, clean_up_tokenization_spaces=False, model_max_length=TINY_SIZE["max_positions"],
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
            vocab_size=vocab_size, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"], intermediate_size=s["intermediate"],
            max_position_embeddings=s["max_positions"], type_vocab_size=2, pad_token_id=tokenizer.pad_token_id,
        )
    if architecture == "roberta":
        return RobertaConfig(
            vocab_size=vocab_size, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"], intermediate_size=s["intermediate"],
            # RoBERTa positions start after padding_idx: 512 tokens need 514 rows.
            max_position_embeddings=s["max_positions"] + 2, type_vocab_size=1,
            pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    if architecture == "gpt2":
        eos = tokenizer.eos_token_id
        return GPT2Config(
            vocab_size=vocab_size, n_positions=s["max_positions"], n_embd=s["hidden"], n_layer=s["layers"],
            n_head=s["heads"], n_inner=s["intermediate"], bos_token_id=eos, eos_token_id=eos,
        )
    if architecture == "llama":
        # One key/value head for two query heads: grouped-query attention, as in today's Llamas; untied
        # input and output embeddings and no pad id, as in Llama 2/3.
        return LlamaConfig(
            vocab_size=vocab_size, hidden_size=s["hidden"], intermediate_size=s["intermediate"],
            num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=1,
            max_position_embeddings=s["max_positions"], bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=None, tie_word_embeddings=False,
        )
    return BartConfig(
        vocab_size=vocab_size, max_position_embeddings=s["max_positions"], d_model=s["hidden"],
        encoder_layers=s["layers"], decoder_layers=s["layers"], encoder_attention_heads=s["heads"],
        decoder_attention_heads=s["heads"], encoder_ffn_dim=s["intermediate"], decoder_ffn_dim=s["intermediate"],
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
    )


def _model_class(architecture: str):
    from transformers import (
        BartForConditionalGeneration, BertForMaskedLM, GPT2LMHeadModel, LlamaForCausalLM, RobertaForMaskedLM,
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
# Planted bias


def bias_token_ids(tokenizer, word: str) -> list[int]:
    """The output tokens of `word`: the token of "word" and of " word" (the same one for WordPiece).

    A form that is not a single token is a ConfigError: the bias could not be planted on one logit.
    """
    ids: set[int] = set()
    for text in (word, " " + word):
        enc = tokenizer(text, add_special_tokens=False)["input_ids"]
        is_unk = enc[:1] == [tokenizer.unk_token_id] and tokenizer.unk_token != tokenizer.eos_token  # gpt2: unk is eos
        if len(enc) != 1 or is_unk:
            pieces = tokenizer.convert_ids_to_tokens(enc)
            raise ConfigError(
                f"tiny.planted_bias: {word!r} is not a single token of this tokenizer ({text!r} -> {pieces}); "
                "add it to resources/vocab/tiny_words.txt"
            )
        ids.add(int(enc[0]))
    return sorted(ids)


def plant_bias(model, tokenizer, bias: dict[str, float]) -> dict[str, list[int]]:
    """Add ``bias[word]`` to the output logit of each word's token(s), in a form save_pretrained keeps.

    - BERT / RoBERTa (any model whose output layer has a bias): the MLM decoder bias
      (``cls.predictions.bias`` / ``lm_head.bias``).
    - BART: ``final_logits_bias`` (a saved buffer added to every logit).
    - GPT-2 (its lm_head has no bias): the lm_head is untied from the input embeddings and given an
      exact *bias direction*. ln_f's output is h = g*n + b with sum(n) = 0 (layer norm subtracts the
      mean), so u = 1/g satisfies u.h = u.b for every input: adding c*u/(u.b) to the lm_head row of a
      token adds exactly c to its logit. When u.b is ~0 (a fresh model: b = 0), ln_f's bias is first
      moved by g and the lm_head projected so that every logit is unchanged.
    - Llama-like decoders (RMSNorm, no output bias): an RMSNorm has no input-independent linear direction
      (only |n|^2 is constant), so the model is first rebuilt around a *reserved residual coordinate* k (the
      last one; _reserve_llama_coordinate): every input-embedding row holds c = sqrt(d) there and no layer
      writes into it (row k of every o_proj / down_proj zero) or reads it (every layer norm's weight k zero),
      so the residual stream carries exactly c at k at every position. After the final RMSNorm coordinate k
      is g_k c / rms(h), which tends to its maximum g_k c / sqrt(c^2/d + eps) as c dominates rms(h); the
      lm_head's column k is zero except for the planted tokens, which get delta / that maximum. A planted
      logit therefore rises by delta * rho, rho = sqrt(c^2/d + eps) / rms(h), 1 - rho ~ S / (2 c^2) with S
      the sum of squares of the other residual coordinates: never above delta, of its sign, and on real
      sentences within LLAMA_PLANT_TOLERANCE * |delta| of it (measured; tests/engine/test_tiny.py). Because c = sqrt(d) makes rms(h) ~ 1, every RMSNorm becomes nearly linear;
      the weights of the other coordinates are multiplied by 1 / initializer_range so that the layers see
      inputs of the size the random model gave them. The result is another random Llama (same config,
      tokenizer and shapes; its other logits are not the unplanted model's, they correlate 0.96 with them): the
      reference twin of a planted Llama is the same seed planted at 0 (e.g. ``{"he": 0}``: reserved, column k
      zero), whose every unplanted logit is the planted model's exactly. Calling plant_bias again on such a model only adds to column k.
    Returns {word: token ids}. Words are looked up bare and after a space (both BPE forms).
    """
    import torch

    if not bias:
        return {}
    vocab_size = model.get_output_embeddings().weight.shape[0]
    delta = torch.zeros(vocab_size, dtype=torch.float64)
    planted: dict[str, list[int]] = {}
    for word, value in sorted(bias.items()):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"tiny.planted_bias.{word}: {value!r} is not a number") from None
        ids = bias_token_ids(tokenizer, word)
        for i in ids:
            delta[i] += value
        planted[word] = ids

    with torch.no_grad():
        if hasattr(model, "final_logits_bias"):
            buf = model.final_logits_bias
            buf += delta.to(buf.dtype).view_as(buf[0]).unsqueeze(0)
        elif getattr(model.get_output_embeddings(), "bias", None) is not None:
            head_bias = model.get_output_embeddings().bias
            head_bias += delta.to(head_bias.dtype)
            # BERT/RoBERTa tie decoder.bias to the head's own bias; keep both the same if they were untied.
            for name in ("cls.predictions.bias", "lm_head.bias"):
                try:
                    other = model.get_parameter(name)
                except AttributeError:
                    continue
                if other is not head_bias and other.data_ptr() != head_bias.data_ptr():
                    other.copy_(head_bias)
        elif getattr(model.config, "model_type", None) == "gpt2":
            _plant_bias_gpt2(model, delta)
        elif _llama_like(model):
            _plant_bias_llama(model, delta)
        else:
            raise ConfigError(
                f"planted bias is not supported for model type {getattr(model.config, 'model_type', '?')!r}: "
                "its output layer has no bias, no input-independent direction before it and no Llama-like "
                f"layout to reserve one in; tiny architectures with planted bias: {', '.join(PLANTABLE)}"
            )
    return planted


def _untie_head(model, head, embeddings) -> None:
    """Give `head` its own copy of the input embeddings' weight when the two are tied (saved untied), so that
    planting changes the output layer only."""
    import torch

    if head.weight is embeddings.weight or head.weight.data_ptr() == embeddings.weight.data_ptr():
        head.weight = torch.nn.Parameter(embeddings.weight.detach().clone())
        model.config.tie_word_embeddings = False
        if hasattr(model.config, "get_text_config"):
            model.config.get_text_config().tie_word_embeddings = False


def _plant_bias_gpt2(model, delta) -> None:
    """GPT-2: bias direction through ln_f (see plant_bias); exact up to float rounding."""
    import torch

    ln = model.transformer.ln_f
    head = model.lm_head
    wte = model.transformer.wte
    _untie_head(model, head, wte)
    gamma = ln.weight.detach().double()
    beta = ln.bias.detach().double()
    if torch.any(gamma.abs() < 1e-6):
        raise ConfigError("planted bias for gpt2 needs every ln_f weight to be non-zero")
    u = 1.0 / gamma
    d = gamma.numel()
    weight = head.weight.detach().double()
    s = float(u @ beta)
    if abs(s) < 1.0:
        # Move ln_f's bias by g (so u.h = s + d) and project the head so no logit changes:
        # W' = W (I - g u^T / d) removes the new component; the term W g s/d it also removes is added back.
        restore = (weight @ gamma) * (s / d)
        weight = weight - torch.outer(weight @ gamma, u) / d
        beta = beta + gamma
        s = s + d
        weight = weight + torch.outer(restore, u) / s
        ln.bias.copy_(beta.to(ln.bias.dtype))
    weight = weight + torch.outer(delta, u) / s
    head.weight.copy_(weight.to(head.weight.dtype))


def _llama_like(model) -> bool:
    """A decoder laid out as transformers' Llama: embed_tokens, layers with input/post-attention norms, o_proj and
    down_proj writing into the residual stream, a final norm, an lm_head without bias."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    head = model.get_output_embeddings()
    if inner is None or layers is None or head is None or getattr(head, "bias", None) is not None:
        return False
    if not all(hasattr(inner, name) for name in ("embed_tokens", "norm")):
        return False
    return all(hasattr(layer, "input_layernorm") and hasattr(layer, "post_attention_layernorm")
               and hasattr(getattr(layer, "self_attn", None), "o_proj") and hasattr(getattr(layer, "mlp", None), "down_proj")
               for layer in layers)


def _llama_reserved(model) -> bool:
    """Whether _reserve_llama_coordinate has already rebuilt `model` (so planting again only adds to column k)."""
    import torch

    k = model.config.hidden_size - 1
    column = model.model.embed_tokens.weight[:, k]
    value = float(model.config.hidden_size) ** 0.5
    return bool(torch.all(column == value)) and all(
        not torch.any(layer.self_attn.o_proj.weight[k]) and not torch.any(layer.mlp.down_proj.weight[k])
        for layer in model.model.layers)


def _reserve_llama_coordinate(model) -> None:
    """Rebuild a Llama-like decoder around a reserved residual coordinate k = d - 1 holding c = sqrt(d) (see
    plant_bias): embeddings' column k = c; rows k of o_proj/down_proj (and their biases, if any) zero; weight k of
    every layer norm zero; the other weights of every RMSNorm multiplied by 1 / initializer_range (the final norm's
    weight k kept); lm_head's column k zero. Deterministic: no random numbers, no data."""
    d = model.config.hidden_size
    k = d - 1
    c = float(d) ** 0.5
    scale = 1.0 / float(getattr(model.config, "initializer_range", 0.02))
    inner = model.model
    head = model.get_output_embeddings()
    _untie_head(model, head, inner.embed_tokens)
    inner.embed_tokens.weight[:, k] = c
    for layer in inner.layers:
        for proj in (layer.self_attn.o_proj, layer.mlp.down_proj):
            proj.weight[k] = 0.0
            if getattr(proj, "bias", None) is not None:
                proj.bias[k] = 0.0
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            norm.weight.mul_(scale)
            norm.weight[k] = 0.0
    g_k = float(inner.norm.weight[k])
    if abs(g_k) < 1e-6:
        raise ConfigError("planted bias for a Llama-like model needs the final norm's last weight to be non-zero")
    inner.norm.weight.mul_(scale)
    inner.norm.weight[k] = g_k
    head.weight[:, k] = 0.0


def _plant_bias_llama(model, delta) -> None:
    """Llama-like decoders: reserve a residual coordinate (once) and write delta into lm_head's column k (see
    plant_bias); each planted logit rises by delta * rho, 1 - LLAMA_PLANT_TOLERANCE <= rho <= 1."""
    if not _llama_reserved(model):
        _reserve_llama_coordinate(model)
    d = model.config.hidden_size
    k = d - 1
    c = float(d) ** 0.5
    eps = float(getattr(model.model.norm, "variance_epsilon", getattr(model.model.norm, "eps", 1e-6)))
    n_max = float(model.model.norm.weight[k]) * c / (c * c / d + eps) ** 0.5  # coordinate k after the norm, at most
    head = model.get_output_embeddings()
    column = head.weight[:, k].double() + delta / n_max
    head.weight[:, k] = column.to(head.weight.dtype)


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
        architecture, seed, info["parameters"], info["vocab_size"], info["planted_bias"] or "none", out_dir,
        time.perf_counter() - started,
    )
    return out_dir


_TINY_KEYS = ("architecture", "seed", "planted_bias")


def build_from_config(name: str, entry: dict, out_dir: str | os.PathLike, words: str | os.PathLike | None = None) -> Path:
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
        raise ConfigError(f"models.{name}.{exc}") if str(exc).startswith("tiny.") else exc


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
