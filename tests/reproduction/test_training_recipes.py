"""Trainer options that reproduce the DA-Gender authors' fine-tuning scripts (gpt2_CDS.py, bart_CDS.py,
*_ER.py): each is checked against the authors' computation, transcribed here from their formulas, on tiny
models and a few sentences (eval mode, so dropout does not enter)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError
from lmbias.methods import resolution, sweeps
from lmbias.training.data import Corpus
from lmbias.training.objectives import draw_masked_words, example_generator, mask_words
from lmbias.training.settings import FAMILY_OBJECTIVE, TrainingSettings
from lmbias.training.trainer import Trainer, make_accelerator

GPT2_TEMPLATE = "<|startoftext|>{text}<|endoftext|>"
LENGTH = 128  # their max_length and padding length
ORIGINALS = [
    "The doctor said he was tired.",
    "She asked her brother about the new house in the city.",
    "The nurse went home early.",
]
SWAPS = ["The doctor said she was tired.", "He asked his sister about the new house in the city.", None]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-recipes")
    return {arch: build_tiny_model(arch, root / arch, seed=0) for arch in ("bert", "gpt2", "bart")}


def make_trainer(tiny, arch: str, texts, swaps=None, **options) -> Trainer:
    model, tok = load_model(model_spec(f"tiny-{arch}", {"path": str(tiny[arch]), "family": FAMILY_OF[arch]}))
    settings = TrainingSettings.from_dict(
        {"objective": FAMILY_OBJECTIVE[FAMILY_OF[arch]], "batch_size": len(texts), "epochs": 1, **options}
    )
    trainer = Trainer(
        model,
        tok,
        FAMILY_OF[arch],
        Corpus(list(texts), swaps=swaps),
        settings,
        0,
        None,
        "test",
        make_accelerator("fp32"),
    )
    trainer.model.eval()
    return trainer


def one_step_loss(trainer: Trainer, epoch: int = 0) -> tuple[torch.Tensor, float, float, dict]:
    """(loss, LM token-loss sum, ER sum, batch) of one micro-batch of every example, without a gradient."""
    idx = list(range(len(trainer.examples)))
    batch = trainer._micro(idx, epoch)
    with torch.no_grad():
        loss, lm_sum, er_sum = trainer._forward_loss(batch, trainer._count_targets(batch), len(idx))
    return loss, lm_sum, er_sum, batch


def one_step_inputs(trainer: Trainer) -> tuple[tuple, dict]:
    """one_step_loss and the tensors the model was called with (the LM rows, then the ER sentences)."""
    seen: dict = {}
    forward = trainer.model.forward

    def spy(**inputs):
        seen.update(inputs)
        return forward(**inputs)

    trainer.model.forward = spy
    try:
        return one_step_loss(trainer), seen
    finally:
        del trainer.model.forward


def padded(tok, texts, **kw):
    enc = tok(list(texts), truncation=True, max_length=LENGTH, padding="max_length", return_tensors="pt", **kw)
    return enc["input_ids"], enc["attention_mask"]


# ------------------------------------------------------------------------------ theirs, transcribed


def their_noise(sentence: str, positions) -> str:
    """bart_CDS.py noise_sentence with the positions its random.sample drew: the drawn words become <mask>
    unless they are ".", then two regex passes merge "<mask> <mask>" pairs."""
    words = sentence.split(" ")
    for pos in positions:
        if words[pos] != ".":
            words[pos] = "<mask>"
    out = re.sub(r" {2,5}", " ", " ".join(words))
    out = re.sub(r"<mask> <mask>", "<mask>", out)
    return re.sub(r"<mask> <mask>", "<mask>", out)


def their_gpt2_lm_loss(model, tok, texts) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt2_CDS.py: '<|startoftext|>' + s + '<|endoftext|>' padded with end-of-text to 128 (pads masked from
    attention), labels = the padded input ids, HF's mean over every shifted position. (loss, hidden states)"""
    ids, mask = padded(tok, [GPT2_TEMPLATE.replace("{text}", t) for t in texts])
    out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    logits = out.logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1)), out.hidden_states[-1]


def bart_inputs(tok, texts, noised) -> dict[str, torch.Tensor]:
    """bart_CDS.py's tensors: encoder noised + '</s>', decoder '<s>' + s, labels s + '</s>', each tokenised
    without special tokens and padded to 128 (labels with the pad token: pads are targets)."""
    enc, enc_mask = padded(tok, [n + "</s>" for n in noised], add_special_tokens=False)
    dec, dec_mask = padded(tok, ["<s>" + t for t in texts], add_special_tokens=False)
    labels, _ = padded(tok, [t + "</s>" for t in texts], add_special_tokens=False)
    return {
        "input_ids": enc,
        "attention_mask": enc_mask,
        "decoder_input_ids": dec,
        "decoder_attention_mask": dec_mask,
        "labels": labels,
    }


def their_bart_lm_loss(model, tok, texts, noised) -> torch.Tensor:
    """bart_CDS.py's loss: HF's mean over all 128 label positions, decoder pads masked from attention."""
    b = bart_inputs(tok, texts, noised)
    labels = b.pop("labels")
    logits = model(**b).logits
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a, b, dim=-1)


# ----------------------------------------------------------------------------------------------- GPT-2


def test_gpt2_template_and_padding_in_loss_equal_their_loss(tiny):
    trainer = make_trainer(
        tiny, "gpt2", ORIGINALS, text_template=GPT2_TEMPLATE, pad_to_length=LENGTH, padding_in_loss=True
    )
    loss, _, _, batch = one_step_loss(trainer)
    tok, model = trainer.tok, trainer.hf_model
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    ids = batch["input_ids"]
    assert ids.shape == (3, LENGTH) and (batch["labels"] == ids).all()  # labels are the padded ids, pads included
    assert ids[0, 0] != eos and tok.convert_ids_to_tokens(int(ids[0, 0])) == "<"  # <|startoftext|>: literal pieces
    real = batch["attention_mask"].sum(1)
    assert (ids[torch.arange(3), real - 1] == eos).all() and (ids[:, -1] == eos).all()
    assert trainer._count_targets(batch) == 3 * (LENGTH - 1)  # most of them pads
    their_ids, their_mask = padded(tok, [GPT2_TEMPLATE.replace("{text}", t) for t in ORIGINALS])
    assert torch.equal(ids, their_ids) and torch.equal(batch["attention_mask"], their_mask)
    with torch.no_grad():
        theirs, _ = their_gpt2_lm_loss(model, tok, ORIGINALS)
    assert loss.item() == pytest.approx(theirs.item(), rel=1e-6)
    plain = make_trainer(tiny, "gpt2", ORIGINALS)  # the default: no template, dynamic padding, pads not targets
    assert one_step_loss(plain)[0].item() != pytest.approx(theirs.item(), rel=1e-3)


# ------------------------------------------------------------------------------------------------ BART


def longest_run(positions: set[int], words: list[str]) -> int:
    best = run = 0
    for pos, word in enumerate(words):
        run = run + 1 if pos in positions and word != "." else 0
        best = max(best, run)
    return best


def test_static_word_masks_are_theirs(shared_data):
    sentences = ORIGINALS + ["Wait . for it", "word", "a b"]
    gap = (shared_data / "gap" / "gap-development.tsv").read_text(encoding="utf-8").splitlines()[1:40]
    sentences += [" ".join(line.split("\t")[1].split()) for line in gap]
    long_runs = 0
    for i, sentence in enumerate(sentences):
        words = sentence.split(" ")
        n = len(words)
        positions = draw_masked_words(n, example_generator(0, 0, i))
        assert len(positions) == math.ceil(n * 0.3)  # their count, rounded up
        assert all(0 <= p < max(1, n - 1) for p in positions)  # never the last word (unless it is the only one)
        ours = mask_words(sentence, example_generator(0, 0, i))
        theirs = their_noise(sentence, positions)
        if longest_run(positions, words) < 5:
            assert ours == theirs, sentence
        else:  # their two merge passes leave ceil(run / 4) masks; ours one per run
            long_runs += 1
            assert "<mask> <mask>" in theirs and "<mask> <mask>" not in ours
        assert ours == mask_words(sentence, example_generator(0, 0, i))  # seeded: the same every time
    assert mask_words("Wait . for it", example_generator(0, 0, 0), ratio=0.9).split()[1] == "."  # "." is kept
    assert long_runs < len(sentences) // 4


def test_bart_static_words_are_the_same_every_epoch_and_the_loss_is_theirs(tiny):
    options = dict(
        infilling_mode="static_words", infilling_layout="bos_decoder", pad_to_length=LENGTH, padding_in_loss=True
    )
    trainer = make_trainer(tiny, "bart", ORIGINALS, **options)
    loss, _, _, batch = one_step_loss(trainer, epoch=0)
    later = one_step_loss(trainer, epoch=5)[3]
    assert torch.equal(batch["input_ids"], later["input_ids"])  # static: drawn once for all epochs
    poisson = make_trainer(tiny, "bart", ORIGINALS)
    assert not torch.equal(one_step_loss(poisson, 0)[3]["input_ids"], one_step_loss(poisson, 5)[3]["input_ids"])
    tok = trainer.tok
    assert batch["input_ids"][0, 0] != tok.bos_token_id and batch["decoder_input_ids"][0, 0] == tok.bos_token_id
    assert (batch["labels"] == tok.pad_token_id).sum() > 0  # pads are targets
    noised = [mask_words(t, example_generator(0, 0, i)) for i, t in enumerate(ORIGINALS)]
    their_batch = bart_inputs(tok, ORIGINALS, noised)
    for key, value in their_batch.items():
        assert torch.equal(batch[key], value), key
    with torch.no_grad():
        theirs = their_bart_lm_loss(trainer.hf_model, tok, ORIGINALS, noised)
    assert loss.item() == pytest.approx(theirs.item(), rel=1e-6)


# -------------------------------------------------------------------------------------------------- ER


@pytest.mark.parametrize("pooling", ["pad_position", "family_padded"])
def test_er_dagender_gpt2_equals_their_loss(tiny, pooling):
    """gpt2_ER.py: LM loss on the flipped corpus (our counterfactual side), e = hidden_states[-1][:, -1] of the
    sentence padded to 128, loss = lambda * -mean(cos) + LM (ours: lambda * mean(1 - cos), lambda more)."""
    lam = 0.7
    trainer = make_trainer(
        tiny,
        "gpt2",
        ORIGINALS,
        SWAPS,
        er_lambda=lam,
        er_lm_side="counterfactual",
        er_pooling=pooling,
        text_template=GPT2_TEMPLATE,
        pad_to_length=LENGTH,
        padding_in_loss=True,
    )
    (loss, _, er_sum, _), seen = one_step_inputs(trainer)
    flipped = [s if s is not None else t for t, s in zip(ORIGINALS, SWAPS)]
    model, tok = trainer.hf_model, trainer.tok
    rows = [padded(tok, [GPT2_TEMPLATE.replace("{text}", t) for t in texts]) for texts in (flipped, flipped, ORIGINALS)]
    assert torch.equal(seen["input_ids"], torch.cat([r[0] for r in rows]))
    assert torch.equal(seen["attention_mask"], torch.cat([r[1] for r in rows]))
    with torch.no_grad():
        lm, e1 = their_gpt2_lm_loss(model, tok, flipped)
        _, e2 = their_gpt2_lm_loss(model, tok, ORIGINALS)  # the re-flip of the flipped sentence
        cos = cosines(e1[:, -1], e2[:, -1])
    assert er_sum == pytest.approx((1 - cos).sum().item(), rel=1e-4, abs=1e-7)
    assert loss.item() - lam * er_sum / 3 == pytest.approx(lm.item(), rel=1e-6)
    assert loss.item() == pytest.approx((lam * -cos.mean() + lm).item() + lam, rel=1e-6)
    family = make_trainer(tiny, "gpt2", ORIGINALS, SWAPS, er_lambda=lam)  # default: last real token, LM on originals
    assert one_step_loss(family)[2] != pytest.approx(er_sum, rel=1e-3)


@pytest.mark.parametrize("pooling", ["mean_padded", "family_padded"])
def test_er_mean_padded_bert_equals_their_embeddings(tiny, pooling):
    """bert_ER.py: e = hidden_states[-1].mean(dim=1) over all 128 positions, pads attention-masked."""
    trainer = make_trainer(tiny, "bert", ORIGINALS, SWAPS, er_lambda=1.0, er_pooling=pooling)
    _, _, er_sum, _ = one_step_loss(trainer)
    model, tok = trainer.hf_model, trainer.tok
    partners = [s if s is not None else t for t, s in zip(ORIGINALS, SWAPS)]
    with torch.no_grad():
        e = [
            model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1].mean(1)
            for ids, mask in (padded(tok, ORIGINALS), padded(tok, partners))
        ]
    has = torch.tensor([s is not None for s in SWAPS], dtype=torch.float32)
    assert er_sum == pytest.approx(((1 - cosines(*e)) * has).sum().item(), rel=1e-4, abs=1e-7)
    mean = one_step_loss(make_trainer(tiny, "bert", ORIGINALS, SWAPS, er_lambda=1.0, er_pooling="mean"))[2]
    assert one_step_loss(make_trainer(tiny, "bert", ORIGINALS, SWAPS, er_lambda=1.0))[2] == pytest.approx(
        mean, abs=1e-6
    )
    assert mean != pytest.approx(er_sum, rel=1e-3)


@pytest.mark.parametrize("pooling", ["mean_padded", "family_padded"])
def test_er_dagender_bart_equals_their_loss(tiny, pooling):
    """bart_ER.py: their static word infilling loss on the flipped sentence, e = the mean over all 128 decoder
    positions of the padded sentence fed as input_ids alone (the decoder input is it shifted right, unmasked)."""
    lam = 0.5
    trainer = make_trainer(
        tiny,
        "bart",
        ORIGINALS,
        SWAPS,
        er_lambda=lam,
        er_lm_side="counterfactual",
        er_pooling=pooling,
        infilling_mode="static_words",
        infilling_layout="bos_decoder",
        pad_to_length=LENGTH,
        padding_in_loss=True,
    )
    (loss, _, er_sum, _), seen = one_step_inputs(trainer)
    flipped = [s if s is not None else t for t, s in zip(ORIGINALS, SWAPS)]
    model, tok = trainer.hf_model, trainer.tok
    noised = [mask_words(t, example_generator(0, 0, i)) for i, t in enumerate(flipped)]
    lm_rows = bart_inputs(tok, flipped, noised)
    for key in ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"):
        assert torch.equal(seen[key][:3], lm_rows[key]), key
    er_rows = torch.cat([padded(tok, flipped)[0], padded(tok, ORIGINALS)[0]])
    assert torch.equal(seen["input_ids"][3:], er_rows)
    assert (seen["decoder_attention_mask"][3:] == 1).all()  # their ER forward passes no decoder mask
    with torch.no_grad():
        lm = their_bart_lm_loss(model, tok, flipped, noised)
        e = [
            model(input_ids=ids, attention_mask=mask, output_hidden_states=True).decoder_hidden_states[-1].mean(1)
            for ids, mask in (padded(tok, flipped), padded(tok, ORIGINALS))
        ]
        cos = cosines(*e)
    assert er_sum == pytest.approx((1 - cos).sum().item(), rel=1e-4, abs=1e-7)
    assert loss.item() - lam * er_sum / 3 == pytest.approx(lm.item(), rel=1e-6)
    assert loss.item() == pytest.approx((lam * -cos.mean() + lm).item() + lam, rel=1e-6)


# -------------------------------------------------------------------------------------------- warm-up


def test_warmup_steps_give_their_schedule(tiny):
    from transformers import get_linear_schedule_with_warmup

    texts = ORIGINALS * 2
    trainer = make_trainer(tiny, "bert", texts, warmup_steps=100, epochs=50, batch_size=1, learning_rate=1e-3)
    total = trainer.total_steps
    assert total == 300
    reference = get_linear_schedule_with_warmup(torch.optim.SGD([torch.zeros(1)], lr=1e-3), 100, total)
    ours = trainer.scheduler.lr_lambdas[0]
    for step in (0, 1, 50, 99, 100, 101, 200, 299, 300):
        theirs = step / 100 if step < 100 else max(0.0, (total - step) / (total - 100))
        assert ours(step) == pytest.approx(theirs) == pytest.approx(reference.lr_lambdas[0](step))
    default = make_trainer(tiny, "bert", texts, epochs=50, batch_size=1)
    assert default.scheduler.lr_lambdas[0](0) == 1.0  # warmup_ratio 0: no warm-up


# ------------------------------------------------------------------------- options a family ignores


def test_options_of_other_families_leave_mlm_batches_alone(tiny):
    plain = make_trainer(tiny, "bert", ORIGINALS, pad_to_length=LENGTH)
    other = make_trainer(
        tiny,
        "bert",
        ORIGINALS,
        pad_to_length=LENGTH,
        text_template=GPT2_TEMPLATE,
        padding_in_loss=True,
        infilling_mode="static_words",
        infilling_layout="bos_decoder",
    )
    a, b = plain._micro([0, 1, 2], 0), other._micro([0, 1, 2], 0)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------------- bad values

MODEL = {"family": "clm", "path": "x", "training": {"er_lambda": 0.5, "swap_rate": 0.9, "warmup_ratio": 0.1}}


@pytest.mark.parametrize(
    "training, message",
    [
        (
            {"text_template": "<|startoftext|>"},
            "methods.m.training.text_template: expected a string holding {text} exactly once",
        ),
        (
            {"er_pooling": "max"},
            "methods.m.training.er_pooling: expected one of family, mean, mean_padded, pad_position, family_padded",
        ),
        ({"er_lm_side": "flipped"}, "methods.m.training.er_lm_side: expected one of original, counterfactual"),
        ({"infilling_mode": "words"}, "methods.m.training.infilling_mode: expected one of poisson_spans, static_words"),
        (
            {"infilling_layout": "dagender"},
            "methods.m.training.infilling_layout: expected one of shift_right, bos_decoder",
        ),
        ({"pad_to_length": 64}, "methods.m.training.pad_to_length: 64 is below max_length 128"),
        ({"pad_to_length": 0}, "methods.m.training.pad_to_length: expected null or an integer >= 1"),
        ({"padding_in_loss": True}, "methods.m.training.padding_in_loss: true needs pad_to_length"),
        (
            {"padding_in_loss": "yes", "pad_to_length": 128},
            "methods.m.training.padding_in_loss: expected true or false",
        ),
        ({"warmup_steps": -1, "warmup_ratio": 0}, "methods.m.training.warmup_steps: expected null or an integer >= 0"),
        ({"warmup_steps": 100}, "methods.m.training.warmup_steps: 100 together with warmup_ratio 0.1"),
        ({"er_lambda": 0}, "methods.m.training.er_lambda: expected null or a number > 0"),
    ],
)
def test_bad_values_are_named_when_the_method_resolves(training, message):
    with pytest.raises(ConfigError) as error:
        resolution.resolve_method("gpt2", MODEL, "m", {"kind": "er", "corpus": "c", "training": training})
    assert message in str(error.value)


def test_a_bad_model_default_names_the_model_block():
    model = {**MODEL, "training": {"er_lambda": 0.5, "er_pooling": "max"}}
    with pytest.raises(ConfigError, match=r"models\.gpt2\.training\.er_pooling"):
        resolution.resolve_method("gpt2", model, "er", {"kind": "er", "corpus": "c"})


def test_a_zero_lambda_sweep_fails_when_the_dag_is_built():
    with pytest.raises(
        ConfigError, match=re.escape("methods.er.sweep.er_lambda[0]: 0.0 is out of range; er_lambda must be > 0")
    ):
        sweeps.expand_sweeps({"er": {"kind": "er", "corpus": "c", "sweep": {"er_lambda": [0, 0.5]}}})


# ------------------------------------------------------------------ the recipe blocks, end to end

#: the method entries' training blocks that reproduce gpt2_CDS.py / bart_CDS.py and *_ER.py (one block for
#: every family: the options of another family are ignored; bert_*.py use no warm-up, hence warmup_steps 0 there)
CDS_DAGENDER = {
    "text_template": GPT2_TEMPLATE,
    "pad_to_length": 128,
    "padding_in_loss": True,
    "infilling_mode": "static_words",
    "infilling_layout": "bos_decoder",
    "warmup_steps": 100,
}
ER_DAGENDER = {**CDS_DAGENDER, "er_lm_side": "counterfactual", "er_pooling": "family_padded"}


@pytest.mark.parametrize("arch", ["bert", "gpt2", "bart"])
def test_dagender_blocks_train_every_family(tiny, tmp_path, arch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lmbias.training.jobs import train_job

    rows = [
        {"doc_id": str(i), "sentence_id": 0, "text": text, "is_counterfactual": cf}
        for i, pair in enumerate(zip(ORIGINALS, SWAPS))
        for cf, text in zip((False, True), pair)
        if text is not None
    ]
    corpus = tmp_path / "cda.parquet"
    pq.write_table(pa.Table.from_pylist(rows), corpus)
    model = {
        "path": str(tiny[arch]),
        "family": FAMILY_OF[arch],
        "training": {"batch_size": 2, "epochs": 1, "er_lambda": 0.5, "limit_examples": 3},
    }
    for kind, block in (("cds", CDS_DAGENDER), ("er", ER_DAGENDER)):
        resolved = resolution.resolve_method(
            f"tiny-{arch}", model, f"{kind}-dagender", {"kind": kind, "corpus": str(corpus), "training": block}
        )
        out = tmp_path / kind
        train_job(model, f"tiny-{arch}", str(corpus), str(out), 0, resolved["settings"])
        log = pq.read_table(out / "train_log.parquet").to_pylist()
        assert len(log) == 2 and log[0]["learning_rate"] == 0.0  # the first of 100 warm-up steps
        assert (log[0]["er_loss"] is not None) == (kind == "er")


def test_a_per_family_training_value_resolves_to_the_model_family():
    """One recipe entry, each family its authors' value: warmup_steps 0 for BERT, 100 for GPT-2 and BART."""
    from lmbias.errors import ConfigError
    from lmbias.methods.resolution import resolve_method

    entry = {
        "kind": "cds",
        "corpus": "results/corpora/gap/cds-1.0.parquet",
        "training": {"warmup_steps": {"clm": 100, "seq2seq": 100}, "learning_rate": 2e-5},
    }
    model = {"family": "mlm", "training": {"batch_size": 8, "warmup_steps": 7}}
    assert resolve_method("m", model, "cds-x", entry)["settings"]["warmup_steps"] == 7  # mlm not named: model default
    assert resolve_method("m", {**model, "family": "clm"}, "cds-x", entry)["settings"]["warmup_steps"] == 100
    bad = {**entry, "training": {"warmup_steps": {"gpt": 100}}}
    with pytest.raises(ConfigError, match=r"methods.cds-x.training.warmup_steps.gpt: not a model family"):
        resolve_method("m", model, "cds-x", bad)
    shared = {**entry, "training": {"swap_rate": {"mlm": 1.0}}}
    with pytest.raises(ConfigError, match=r"methods.cds-x.training.swap_rate: one value for every family"):
        resolve_method("m", model, "cds-x", shared)


def test_a_configured_model_name_keys_a_value_over_its_family():
    """bias-bench's dropout: BERT 0.20, ALBERT 0.05, both masked LMs; a model-name key wins over the family."""
    from lmbias.errors import ConfigError
    from lmbias.methods.resolution import resolve_method

    entry = {
        "kind": "dropout",
        "corpus": "results/corpora/gap/sentences.parquet",
        "training": {"hidden_dropout": {"mlm": 0.2, "albert-base": 0.05}},
    }
    models = {"bert-base": {"family": "mlm"}, "albert-base": {"family": "mlm"}}
    resolve = lambda name: resolve_method(name, models[name], "dropout-x", entry, models)["settings"]  # noqa: E731
    assert resolve("bert-base")["hidden_dropout"] == 0.2 and resolve("albert-base")["hidden_dropout"] == 0.05
    with pytest.raises(
        ConfigError,
        match=r"methods.dropout-x.training.hidden_dropout.albert-base: not a model family "
        r"or a configured model",
    ):
        resolve_method("bert-base", models["bert-base"], "dropout-x", entry, {"bert-base": models["bert-base"]})
