"""Tiny models: byte-identical rebuilds, tokenizers that cover the benchmarks, planted bias that is exact and saved;
the tiny Llama's Llama-like tokenizer (BOS added, no pad) and its loading as a causal LM."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.planted_bias import LLAMA_PLANT_TOLERANCE, PLANTABLE, plant_bias
from lmbias.engine.tiny import ARCHITECTURES, FAMILY_OF, build_from_config, build_tiny_model
from lmbias.engine.tiny_vocab import DEFAULT_WORDS, derive_word_list, load_word_list
from lmbias.errors import ConfigError, DataError

PRONOUNS = ("he", "she", "him", "her", "his", "hers", "himself", "herself")
PLANTED = {"he": 8.0}
#: Planted exactly (an output bias or an exact bias direction); the tiny Llama within LLAMA_PLANT_TOLERANCE.
EXACT = tuple(a for a in PLANTABLE if a != "llama")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[tuple[str, bool], Path]:
    """Every architecture, seed 0, with and (where it can be planted) without a planted bias toward "he"."""
    root = tmp_path_factory.mktemp("tiny")
    out = {}
    for arch in ARCHITECTURES:
        out[(arch, False)] = build_tiny_model(arch, root / arch, seed=0)
        if arch in PLANTABLE:
            out[(arch, True)] = build_tiny_model(arch, root / f"{arch}-he", seed=0, planted_bias=PLANTED)
    return out


def _load(path: Path, arch: str):
    spec = model_spec(f"tiny-{arch}", {"path": str(path), "family": FAMILY_OF[arch], "revision": "local"})
    return load_model(spec)


def _winobias_masked(shared_data: Path) -> list[tuple[str, str]]:
    """(sentence with the bracketed pronoun replaced by {mask}, the pronoun) for every WinoBias dev line."""
    items = []
    for path in sorted((shared_data / "winobias").glob("*.txt.dev")):
        for line in path.read_text(encoding="utf-8").splitlines():
            text = line.split(" ", 1)[1]
            m = re.search(r"\[(he|she|him|her|his)\]", text, flags=re.IGNORECASE)
            if m is None:
                continue
            sentence = (text[: m.start()] + "{mask}" + text[m.end() :]).replace("[", "").replace("]", "")
            items.append((sentence, m.group(1)))
    assert len(items) > 1000
    return items


# ----------------------------------------------------------------------------------------------- determinism


def test_rebuild_in_another_process_is_byte_identical(built, tmp_path):
    code = (
        "import sys; from lmbias.engine.tiny import build_tiny_model, ARCHITECTURES\n"
        "for a in ARCHITECTURES:\n"
        "    build_tiny_model(a, sys.argv[1] + '/' + a, seed=0)\n"
        "build_tiny_model('gpt2', sys.argv[1] + '/gpt2-he', seed=0, planted_bias={'he': 8.0})\n"
        "build_tiny_model('llama', sys.argv[1] + '/llama-he', seed=0, planted_bias={'he': 8.0})\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env, capture_output=True)
    for arch, planted in [(a, False) for a in ARCHITECTURES] + [("gpt2", True), ("llama", True)]:
        first = built[(arch, planted)]
        second = tmp_path / (f"{arch}-he" if planted else arch)
        names = sorted(p.name for p in first.iterdir())
        assert names == sorted(p.name for p in second.iterdir())
        assert "model.safetensors" in names and "tokenizer.json" in names and "tokenizer_config.json" in names
        for name in names:
            assert (first / name).read_bytes() == (second / name).read_bytes(), f"{arch}/{name} differs"


def test_different_seed_gives_different_weights_same_tokenizer(built, tmp_path):
    other = build_tiny_model("bert", tmp_path / "bert-seed1", seed=1)
    base = built[("bert", False)]
    a, b = load_file(base / "model.safetensors"), load_file(other / "model.safetensors")
    assert a.keys() == b.keys()
    assert not torch.equal(a["bert.embeddings.word_embeddings.weight"], b["bert.embeddings.word_embeddings.weight"])
    assert (base / "tokenizer.json").read_bytes() == (other / "tokenizer.json").read_bytes()


def test_failed_build_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "models" / "broken"
    with pytest.raises(ConfigError, match="not a single token"):
        build_tiny_model("roberta", target, planted_bias={"zzqxqzz": 1.0})
    assert not target.exists()

    # A failure while writing: no temporary folder is left, and an older build stays as it was.
    target.mkdir(parents=True)
    (target / "old.txt").write_text("old", encoding="utf-8")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("transformers.PreTrainedModel.save_pretrained", boom)
    with pytest.raises(OSError, match="disk full"):
        build_tiny_model("bert", target)
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["broken"]
    assert [p.name for p in target.iterdir()] == ["old.txt"]


# ----------------------------------------------------------------------------------------------- tokenizers


def test_special_tokens_and_config_ids(built):
    from transformers import AutoConfig, AutoTokenizer

    expected = {
        "bert": {
            "cls_token": "[CLS]",
            "sep_token": "[SEP]",
            "mask_token": "[MASK]",
            "pad_token": "[PAD]",
            "unk_token": "[UNK]",
        },
        "roberta": {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
            "unk_token": "<unk>",
        },
        "bart": {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
            "unk_token": "<unk>",
        },
        "gpt2": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"},
        "llama": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None},
    }
    for arch in ARCHITECTURES:
        path = built[(arch, False)]
        tok = AutoTokenizer.from_pretrained(path)
        config = AutoConfig.from_pretrained(path)
        for attr, value in expected[arch].items():
            assert getattr(tok, attr) == value, (arch, attr)
        assert config.vocab_size == len(tok)
        if arch not in ("gpt2", "llama"):
            assert config.pad_token_id == tok.pad_token_id
        if arch in ("roberta", "bart"):
            assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
        if arch == "gpt2":
            assert config.eos_token_id == tok.eos_token_id
        if arch == "llama":  # Llama 2's ids; BOS is added in front of every text, EOS is not
            assert (tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
            assert (config.bos_token_id, config.eos_token_id, config.pad_token_id) == (1, 2, None)
            assert tok("He is a nurse.")["input_ids"][0] == 1 and tok("He is a nurse.")["input_ids"][-1] != 2
            assert tok("He is a nurse.", add_special_tokens=False)["input_ids"][0] != 1


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_pronouns_are_single_tokens(built, arch):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built[(arch, False)])
    for word in PRONOUNS:
        if arch == "bert":
            assert tok.tokenize(word) == [word]
            assert tok.tokenize(word.capitalize()) == [word]
        else:
            assert tok.tokenize(" " + word) == ["\u0120" + word]
            assert tok.tokenize(word) == [word]
            assert tok.tokenize(word.capitalize() + " went home")[0] == word.capitalize()


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_listed_word_is_one_token(built, arch):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built[(arch, False)])
    words = load_word_list()
    texts = words if arch == "bert" else words + [" " + w for w in words]
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    split = [t for t, i in zip(texts, ids) if len(i) != 1]
    assert split == []


def test_any_ascii_text_tokenizes_without_unk(built):
    import string

    from transformers import AutoTokenizer

    text = (
        f"{string.ascii_letters} {string.digits} {string.punctuation} "
        "Zyzzyva qxj-42 O'Brien's \u2019quoted\u201d \u2014"
    )
    for arch in ARCHITECTURES:
        tok = AutoTokenizer.from_pretrained(built[(arch, False)])
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids, arch
        if arch != "bert":
            assert tok.decode(ids) == text  # byte-level BPE round-trips exactly


def test_mask_token_keeps_the_word_boundary(built):
    from transformers import AutoTokenizer

    for arch in ("roberta", "bart"):
        tok = AutoTokenizer.from_pretrained(built[(arch, False)])
        ids = tok("because <mask> did", add_special_tokens=False)["input_ids"]
        assert tok.convert_ids_to_tokens(ids) == ["because", "<mask>", "\u0120did"]
    tok = AutoTokenizer.from_pretrained(built[("bert", False)])
    assert tok.tokenize("because [MASK] did") == ["because", "[MASK]", "did"]


def _benchmark_sentences(shared_data: Path) -> list[str]:
    sentences = [s.format(mask=p) for s, p in _winobias_masked(shared_data)]
    with open(shared_data / "crows_pairs" / "crows_pairs_anonymized.csv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["bias_type"] == "gender":
                sentences += [row["sent_more"], row["sent_less"]]
    with open(shared_data / "bec_pro" / "BEC-Pro_EN.tsv", encoding="utf-8", newline="") as handle:
        sentences += [row["Sentence"] for row in csv.DictReader(handle, delimiter="\t")][::50]
    return sentences


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_benchmark_text_has_no_unk_and_winobias_words_are_whole(built, arch, shared_data):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built[(arch, False)])
    sentences = _benchmark_sentences(shared_data)
    for sentence, ids in zip(sentences, tok(sentences)["input_ids"]):
        assert tok.unk_token_id not in ids or arch == "gpt2", sentence  # gpt2's unk is its eos
        assert len(ids) <= tok.model_max_length
    # Every word of the WinoBias sentences is a whole token (the word list was derived from them).
    words = sorted({w for s, _ in _winobias_masked(shared_data) for w in re.findall(r"[^\W\d_]+", s.format(mask=""))})
    texts = words if arch == "bert" else [" " + w for w in words]
    pieces = tok(texts, add_special_tokens=False)["input_ids"]
    assert [t for t, i in zip(texts, pieces) if len(i) != 1] == []


def test_word_list_is_what_the_derivation_gives(shared_data):
    assert load_word_list(DEFAULT_WORDS) == derive_word_list(shared_data)
    header = [line for line in DEFAULT_WORDS.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    assert any("derive_word_list" in line for line in header)


def test_word_list_errors_name_file_and_line(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("# header\nhe\nshe\nhe\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"words.txt:4: 'he' repeats line 2"):
        load_word_list(path)
    path.write_text("he\nnew york\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"words.txt:2: .*whitespace"):
        load_word_list(path)
    with pytest.raises(DataError, match="not found"):
        load_word_list(tmp_path / "absent.txt")


# ----------------------------------------------------------------------------------------------- planted bias


SENTENCES = [
    "The developer argued with the designer because he did not like the design.",
    "The mechanic gave the clerk a present because it was her birthday.",
]


@pytest.mark.parametrize("arch", EXACT)
def test_planted_bias_is_saved_and_exact(built, arch):
    (m0, tok), (m1, _) = _load(built[(arch, False)], arch), _load(built[(arch, True)], arch)
    enc = tok(SENTENCES, return_tensors="pt", padding=True)
    with torch.inference_mode():
        diff = m1(**enc).logits - m0(**enc).logits
    ids = sorted(
        {tok(" he", add_special_tokens=False)["input_ids"][0], tok("he", add_special_tokens=False)["input_ids"][0]}
    )
    assert len(ids) == (1 if arch == "bert" else 2)
    others = torch.ones(diff.shape[-1], dtype=torch.bool)
    others[ids] = False
    tol = 1e-4
    assert torch.allclose(diff[..., ids], torch.full_like(diff[..., ids], 8.0), atol=tol)
    assert diff[..., others].abs().max().item() < tol


@pytest.mark.parametrize("ln_bias_mean", [0.5, 0.02])
def test_gpt2_bias_direction_with_trained_looking_layer_norm(ln_bias_mean):
    """A real GPT-2 has ln_f weight != 1 and bias != 0: planting must still change only the chosen logits.

    ln_bias_mean 0.5 uses ln_f's own bias as the constant direction; 0.02 makes it too small, so ln_f's
    bias is moved and the head compensated (the path a fresh tiny model takes, here with u.b != 0).
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmbias.engine.tiny import build_tokenizer

    tok = build_tokenizer("gpt2", ["he", "she", "the", "doctor"])
    torch.manual_seed(3)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=16, n_layer=1, n_head=2)).eval()
    with torch.no_grad():
        model.transformer.ln_f.weight.uniform_(0.5, 1.5)
        model.transformer.ln_f.bias.normal_(ln_bias_mean, 0.01)
    ids = torch.tensor([tok("the doctor said she")["input_ids"]])
    with torch.inference_mode():
        before = model(ids).logits
    planted = plant_bias(model, tok, {"she": -3.0, "doctor": 2.5})
    with torch.inference_mode():
        after = model(ids).logits
    expected = torch.zeros(len(tok))
    for word, value in (("she", -3.0), ("doctor", 2.5)):
        expected[planted[word]] = value
    assert torch.allclose(after - before, expected.expand_as(before), atol=1e-4)
    assert model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr()
    assert model.config.tie_word_embeddings is False


def test_planted_bias_turns_winobias_male(built, shared_data):
    """tiny-bert + {he: 8}: p(he) > p(she) at the [MASK] of (nearly) every WinoBias sentence; not so without."""
    fractions, gaps = {}, {}
    sentences = [s.format(mask="[MASK]") for s, _ in _winobias_masked(shared_data)]
    for planted in (False, True):
        model, tok = _load(built[("bert", planted)], "bert")
        enc = tok(sentences, return_tensors="pt", padding=True)
        with torch.inference_mode():
            logits = model(**enc).logits[enc["input_ids"] == tok.mask_token_id]
        assert logits.shape[0] == len(sentences)
        he, she = tok.convert_tokens_to_ids(["he", "she"])
        gap = logits[:, he] - logits[:, she]
        fractions[planted], gaps[planted] = (gap > 0).float().mean().item(), gap
    assert fractions[True] >= 0.99
    assert fractions[False] < 0.95
    assert gaps[False].abs().max().item() < 1.0  # unbiased: p(he)/p(she) within e^+-1 everywhere
    assert torch.allclose(gaps[True] - gaps[False], torch.full_like(gaps[False], 8.0), atol=1e-4)


# ----------------------------------------------------------------------------------------------- config


# ----------------------------------------------------------------------------------------------- tiny Llama


def test_tiny_llama_loads_as_a_causal_lm(built):
    """Through load_model with family clm: a LlamaForCausalLM with grouped-query attention and untied embeddings;
    the tokenizer pads right with EOS (it has no pad token), and BOS starts every encoded text, as a real
    Llama's does; padding does not change a row's logits."""
    from transformers import LlamaForCausalLM

    model, tok = _load(built[("llama", False)], "llama")
    assert isinstance(model, LlamaForCausalLM) and not model.training
    assert model.config.num_key_value_heads == 1 < model.config.num_attention_heads
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    assert (tok.pad_token, tok.padding_side) == ("</s>", "right")
    enc = tok([SENTENCES[0], "She works."], return_tensors="pt", padding=True)
    assert enc["input_ids"][:, 0].tolist() == [tok.bos_token_id] * 2
    assert enc["input_ids"][1, -1].item() == tok.eos_token_id and enc["attention_mask"][1, -1].item() == 0
    with torch.inference_mode():
        batched = model(**enc).logits
        alone = model(**tok(["She works."], return_tensors="pt")).logits
    n = alone.shape[1]
    assert torch.allclose(batched[1, :n], alone[0], atol=1e-5)
    info = (built[("llama", False)] / "tiny_model.json").read_text()
    assert '"architecture": "llama"' in info


def _real_sentences(shared_data: Path) -> list[str]:
    """CrowS-Pairs gender sentences (both of each pair) and every 8th WinoBias dev sentence, brackets removed."""
    with open(shared_data / "crows_pairs" / "crows_pairs_anonymized.csv", encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["bias_type"] == "gender"]
    texts = [r[k] for r in rows for k in ("sent_more", "sent_less")]
    for path in sorted((shared_data / "winobias").glob("*.txt.dev")):
        lines = [line.split(" ", 1)[1] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        texts += [line.replace("[", "").replace("]", "") for line in lines[::8]]
    return texts


def test_planted_tiny_llama_raises_the_planted_logits_by_delta_within_the_tolerance(built, shared_data, tmp_path):
    """The tiny Llama's planted bias (plant_bias: a reserved residual coordinate) against its twin planted at 0, at
    every token of ~700 real sentences: he's two tokens rise by 8 * rho, 1 - LLAMA_PLANT_TOLERANCE <= rho <= 1
    (measured: 0.9980 to 0.9998); every other logit is the twin's (observed bit for bit); the twin's unplanted
    logits are not tiny-llama's but correlate with them (per position, mean 0.96, measured). Saved as plain
    weights: the config is tiny-llama's, the lm_head's last column holds 8 / 8 at he's tokens and 0 elsewhere."""
    twin = build_tiny_model("llama", tmp_path / "llama-zero", seed=0, planted_bias={"he": 0.0})
    (planted, tok), (zero, _), (plain, _) = (
        _load(p, "llama") for p in (built[("llama", True)], twin, built[("llama", False)])
    )
    ids = sorted(
        {tok(" he", add_special_tokens=False)["input_ids"][0], tok("he", add_special_tokens=False)["input_ids"][0]}
    )
    others = torch.ones(len(tok), dtype=torch.bool)
    others[ids] = False
    texts = _real_sentences(shared_data)
    assert len(texts) > 700
    rho, other, corr = [], [], []
    for start in range(0, len(texts), 128):
        enc = tok(texts[start : start + 128], return_tensors="pt", padding=True)
        mask = enc["attention_mask"].bool()
        with torch.inference_mode():
            a, b, c = (m(**enc).logits[mask] for m in (planted, zero, plain))
        # float64 where the tolerance is read (he's columns); the rest in float32, where whole (tokens x vocab)
        # float64 copies were most of this test's time: "bit for bit" is a float32 difference of exactly 0
        rho.append((a[:, ids].double() - b[:, ids].double()) / PLANTED["he"])
        difference = a - b
        difference[:, ids] = 0
        other.append(difference.abs().max())
        x, y = b[:, others], c[:, others]
        x, y = x - x.mean(-1, keepdim=True), y - y.mean(-1, keepdim=True)
        corr.append((x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)))
    rho, corr = torch.cat(rho), torch.cat(corr)
    assert rho.shape[0] > 10_000
    assert float(rho.max()) <= 1.0 + 1e-6 and float(rho.min()) >= 1.0 - LLAMA_PLANT_TOLERANCE, (rho.min(), rho.max())
    assert float(rho.min()) < 1.0 - 1e-4  # the tolerance is needed: the offset is not exact
    assert max(float(v) for v in other) <= 1e-6
    assert float(corr.mean()) > 0.9 and float(corr.min()) > 0.6, (corr.mean(), corr.min())
    # plain weights: nothing but tensors save_pretrained writes; the config unchanged
    assert (built[("llama", True)] / "config.json").read_bytes() == (
        built[("llama", False)] / "config.json"
    ).read_bytes()
    head = load_file(built[("llama", True)] / "model.safetensors")["lm_head.weight"][:, -1]
    assert torch.allclose(head[ids], torch.full((len(ids),), 1.0), atol=1e-6) and not torch.any(head[others])


def test_planting_a_llama_twice_adds_and_a_tied_head_is_untied():
    """plant_bias on an already planted Llama only adds to the head's reserved column ({he: 3} then {he: 5} ==
    {he: 8}); a Llama whose head is tied to its embeddings is untied first (the reserved column would otherwise
    be c in the head too)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lmbias.engine.tiny import build_tokenizer

    tok = build_tokenizer("llama", ["he", "she", "the", "doctor", "said"])
    models = []
    for steps in ([{"he": 0.0}], [{"he": 3.0}, {"he": 5.0}], [{"he": 8.0}]):
        config = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            tie_word_embeddings=True,
        )
        torch.manual_seed(3)
        model = LlamaForCausalLM(config).eval()  # a fresh config: planting unties the one it is given
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        for bias in steps:
            planted = plant_bias(model, tok, bias)
        assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
        assert model.config.tie_word_embeddings is False
        models.append(model)
    ids = torch.tensor([tok("the doctor said she")["input_ids"]])
    with torch.inference_mode():
        zero, twice, once = (m(ids).logits for m in models)
    assert torch.allclose(twice, once, atol=1e-5)
    rise = (once - zero)[..., planted["he"]] / 8.0
    assert float(rise.max()) <= 1.0 + 1e-6 and float(rise.min()) >= 1.0 - LLAMA_PLANT_TOLERANCE
    others = torch.ones(len(tok), dtype=torch.bool)
    others[planted["he"]] = False
    assert torch.allclose(once[..., others], zero[..., others], atol=1e-6)


def test_tiny_llama_takes_a_planted_bias_and_checks_its_family(tmp_path):
    entry = {"path": "x", "family": "clm", "tiny": {"architecture": "llama", "seed": 0, "planted_bias": {"he": 8.0}}}
    out = build_from_config("tiny-l", entry, tmp_path / "x")
    assert '"he": 8.0' in (out / "tiny_model.json").read_text()
    entry = {"path": "x", "family": "mlm", "tiny": {"architecture": "llama", "seed": 0}}
    with pytest.raises(ConfigError, match=r"models\.tiny-l\.family: 'mlm' does not fit tiny architecture 'llama'"):
        build_from_config("tiny-l", entry, tmp_path / "x")


def test_build_from_config_checks_the_entry(tmp_path):
    entry = {"path": "x", "family": "mlm", "revision": "local", "tiny": {"architecture": "gpt2", "seed": 0}}
    with pytest.raises(ConfigError, match=r"models\.tiny-x\.family: 'mlm' does not fit tiny architecture 'gpt2'"):
        build_from_config("tiny-x", entry, tmp_path / "x")
    entry = {"family": "mlm", "tiny": {"architecture": "bert", "seeds": 0}}
    with pytest.raises(ConfigError, match=r"models\.tiny-x\.tiny\.seeds: unknown key"):
        build_from_config("tiny-x", entry, tmp_path / "x")
    entry = {"family": "mlm", "tiny": {"architecture": "electra"}}
    with pytest.raises(ConfigError, match=r"models\.tiny-x\.tiny\.architecture: 'electra'"):
        build_from_config("tiny-x", entry, tmp_path / "x")
    entry = {"family": "mlm", "tiny": {"architecture": "bert", "planted_bias": {"he": "lots"}}}
    with pytest.raises(ConfigError, match=r"models\.tiny-x\.tiny\.planted_bias\.he: 'lots'"):
        build_from_config("tiny-x", entry, tmp_path / "x")
    entry = {"family": "mlm", "tiny": {"architecture": "bert", "planted_bias": {"zzqxqzz": 1.0}}}
    with pytest.raises(ConfigError, match=r"models\.tiny-x\.tiny\.planted_bias: 'zzqxqzz' is not a single token"):
        build_from_config("tiny-x", entry, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_rule_builds_only_configured_tiny_models(repo_root, tmp_path):
    """rules/models.smk: {model} takes only tiny models; one entry's edit reruns only that model."""
    snakemake = Path(sys.executable).with_name("snakemake")
    if not snakemake.exists():
        pytest.skip("snakemake is not installed next to this python")
    (tmp_path / "Snakefile").write_text(
        f'configfile: "config.yaml"\ninclude: "{repo_root}/rules/models.smk"\n', encoding="utf-8"
    )
    (tmp_path / "config.yaml").write_text(
        "models:\n"
        "  tiny-a: {path: resources/models/tiny-a, family: mlm, revision: local, tiny: {architecture: bert, seed: 0}}\n"
        "  hub-b: {hub_id: bert-base-uncased, family: mlm, revision: main}\n",
        encoding="utf-8",
    )
    for rel in (
        "resources/vocab/tiny_words.txt",
        "scripts/build_tiny_model.py",
        "src/lmbias/engine/tiny.py",
        "src/lmbias/engine/tiny_vocab.py",
        "src/lmbias/engine/planted_bias.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((repo_root / rel).read_bytes())

    def dry(target):
        return subprocess.run(
            [str(snakemake), "-n", "--cores", "1", target], cwd=tmp_path, capture_output=True, text=True
        )

    ok = dry("resources/models/tiny-a")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "build_tiny_model" in ok.stdout and "logs/models/tiny-a.log" in ok.stdout
    hub = dry("resources/models/hub-b")  # a hub model's folder is fetched (fetch_hub_model), never built
    assert hub.returncode == 0, hub.stdout + hub.stderr
    assert "fetch_hub_model" in hub.stdout and "build_tiny_model" not in hub.stdout
