"""The trainer (lmbias.training): objectives on their tiny families, noise statistics, the ER term, exact
kill-and-resume, determinism, a real 2-process gloo launch, bias during training, bad input."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from helpers.gap_corpora import gap_sentences, write_cda, write_gpr
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.swap_lexicon import load_lexicon
from lmbias.engine.distributed import launch_command, launch_env
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.training.data import encode, encode_gpr, global_batches
from lmbias.training.jobs import train_job
from lmbias.training.objectives import IGNORE, Encoded, collate, er_terms, example_generator, infill, mask_mlm
from lmbias.training.settings import TrainingSettings
from lmbias.training.trainer import EXIT_ENV

ARCH_OBJECTIVE = {"bert": "mlm", "roberta": "mlm", "gpt2": "clm", "bart": "infilling"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-train")
    return {arch: build_tiny_model(arch, root / arch, seed=0) for arch in ARCH_OBJECTIVE}


def entry(tiny, arch) -> dict:
    return {"path": str(tiny[arch]), "family": FAMILY_OF[arch]}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, shared_data) -> dict[str, Path]:
    """A CDA-shaped corpus of real GAP sentences with naive dictionary swaps, and a GPR corpus made from the
    GAP sentences holding he/she/his/her (the first such pronoun -> [PRONOUN])."""
    root = tmp_path_factory.mktemp("train-corpora")
    texts = gap_sentences(shared_data, 48)
    swapper = Swapper(load_lexicon(cds_pairs=shared_data / "cds" / "cda_default_pairs.json"), intervention="naive")
    write_cda(texts, swapper.swap_texts(texts), root / "cda.parquet")
    write_gpr(shared_data, 400, 64, root / "gpr.parquet")
    return {"cda": root / "cda.parquet", "gpr": root / "gpr.parquet"}


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def _log(folder: Path) -> list[dict]:
    return pq.read_table(folder / "train_log.parquet").to_pylist()


# ---------------------------------------------------------------------------------------------- settings


def test_settings_validate_and_round_trip():
    s = TrainingSettings.from_dict({"objective": "mlm", "max_steps": 3, "er_lambda": 0.5}, "methods.er.training")
    assert TrainingSettings.from_dict(s.to_dict()) == s
    assert s.batch_size == 16 and s.mlm_probability == 0.15 and s.precision == "auto"
    with pytest.raises(ConfigError, match=r"methods\.er\.training\.learning_rat\b"):
        TrainingSettings.from_dict({"objective": "mlm", "learning_rat": 1e-4}, "methods.er.training")
    with pytest.raises(ConfigError, match=r"settings\.batch_size"):
        TrainingSettings.from_dict({"objective": "mlm", "batch_size": 0})
    with pytest.raises(ConfigError, match=r"settings\.objective"):
        TrainingSettings.from_dict({"objective": "mlmm"})
    with pytest.raises(ConfigError, match=r"settings\.objective"):
        TrainingSettings.from_dict({})
    with pytest.raises(ConfigError, match=r"settings\.select_epoch"):
        TrainingSettings.from_dict({"objective": "mlm", "select_epoch": "validation_accuracy"})


# ------------------------------------------------------------------------------------------- noise stats


def _long_example(n=400) -> Encoded:
    ids = [101] + list(range(1000, 1000 + n)) + [102]
    return Encoded(ids=ids, special=[1] + [0] * n + [1], words=[None] + [i // 2 for i in range(n)] + [None])


def test_mlm_masking_is_15_percent_80_10_10():
    ex = _long_example()
    chosen = masked = random = kept = 0
    for i in range(200):
        x, y = mask_mlm(ex, example_generator(0, 0, i), mask_id=103, vocab_size=30000)
        assert y[0] == IGNORE and y[-1] == IGNORE and x[0] == 101 and x[-1] == 102  # specials never chosen
        for orig, new, lab in zip(ex.ids, x, y):
            if lab == IGNORE:
                assert new == orig
                continue
            assert lab == orig
            chosen += 1
            masked += new == 103
            kept += new == orig
            random += new not in (103, orig)
    assert abs(chosen / (200 * 400) - 0.15) < 0.005
    assert abs(masked / chosen - 0.8) < 0.01 and abs(kept / chosen - 0.1) < 0.01 and abs(random / chosen - 0.1) < 0.01
    # the same (seed, epoch, example) gives the same noise; another epoch other noise
    assert mask_mlm(ex, example_generator(0, 1, 5), 103, 30000) == mask_mlm(ex, example_generator(0, 1, 5), 103, 30000)
    assert mask_mlm(ex, example_generator(0, 1, 5), 103, 30000) != mask_mlm(ex, example_generator(0, 2, 5), 103, 30000)


def test_whole_word_masking_masks_words_whole():
    ex = _long_example()
    chosen = 0
    for i in range(50):
        _, y = mask_mlm(ex, example_generator(0, 0, i), 103, 30000, whole_word=True)
        body = y[1:-1]
        for w in range(0, 400, 2):  # the two pieces of every word are chosen together
            assert (body[w] == IGNORE) == (body[w + 1] == IGNORE)
        chosen += sum(v != IGNORE for v in body)
    assert abs(chosen / (50 * 400) - 0.15) < 0.02


def test_infilling_masks_30_percent_in_poisson_spans_one_mask_each():
    ex = _long_example()
    lengths, ratios = [], []
    for i in range(200):
        noised, labels, drawn = infill(ex, example_generator(0, 0, i), mask_id=7, ratio=0.3, poisson_lambda=3.0)
        assert labels == ex.ids
        assert noised[0] == 101 and noised[-1] == 102
        assert all(not (a == 7 and b == 7) for a, b in zip(noised, noised[1:]))  # each span is ONE mask
        kept = [t for t in noised if t != 7]
        it = iter(ex.ids)
        assert all(t in it for t in kept)  # unmasked tokens keep their order
        ratios.append(1 - (len(kept) - 2) / 400)
        lengths += drawn
    assert abs(np.mean(ratios) - 0.3) < 0.005
    assert abs(np.mean(lengths) - 3.0) < 0.15 and abs(np.var(lengths) - 3.0) < 0.5  # Poisson(3): mean = var = 3


def test_length_grouped_batches_are_seeded_and_tile_the_data():
    lengths = list(np.random.default_rng(0).integers(5, 100, size=203))
    a = global_batches(lengths, 8, seed=1, epoch=0, group_by_length=True)
    assert a == global_batches(lengths, 8, seed=1, epoch=0, group_by_length=True)
    assert a != global_batches(lengths, 8, seed=1, epoch=1, group_by_length=True)
    assert sorted(i for b in a for i in b) == list(range(203))
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in a])
    plain = global_batches(lengths, 8, seed=1, epoch=0, group_by_length=False)
    assert spread < 0.2 * np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in plain])


# ------------------------------------------------------------------------------------------- GPR and ER


def test_gpr_loss_only_at_the_pronoun(tiny):
    model, tok = load_model(model_spec("tiny-bert", entry(tiny, "bert")))
    texts = ["Yesterday [PRONOUN] said the doctor was late .", "The nurse thinks [PRONOUN] is right ."]
    ex = encode_gpr(tok, texts, ["she", "he"], 64, "t")
    batch = collate("gpr", ex, [0, 1], 0, 0, tok, TrainingSettings.from_dict({"objective": "gpr"}))
    for row, (ids, labels) in enumerate(zip(batch["input_ids"].tolist(), batch["labels"].tolist())):
        at = [i for i, v in enumerate(labels) if v != IGNORE]
        assert at == [ids.index(tok.mask_token_id)]
        assert tok.convert_ids_to_tokens(labels[at[0]]) == ["she", "he"][row]
    # one target per example in the loss
    from lmbias.training.objectives import lm_loss_sum

    _, n = lm_loss_sum(
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, batch["labels"], "gpr"
    )
    assert n == 2


@pytest.mark.parametrize("arch", ["bert", "gpt2", "bart"])
def test_er_term_zero_for_identical_sentences_and_gradient_through_both(tiny, arch):
    model, tok = load_model(model_spec(f"tiny-{arch}", entry(tiny, arch)))
    s = ["The doctor said he would come back tomorrow ."]
    c = ["The doctor said she would come back tomorrow ."]
    enc = lambda t: tok(t, return_tensors="pt")  # noqa: E731
    zero = er_terms(model, enc(s), enc(s), FAMILY_OF[arch])
    assert abs(float(zero.detach())) < 1e-6
    term = er_terms(model, enc(s), enc(c), FAMILY_OF[arch]).sum()
    assert float(term.detach()) > 1e-6
    term.backward()
    grad = model.get_input_embeddings().weight.grad
    he, she = (tok(w if arch == "bert" else " " + w, add_special_tokens=False)["input_ids"][0] for w in ("he", "she"))
    assert grad[he].abs().sum() > 0 and grad[she].abs().sum() > 0  # both sentences get gradients


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_lm_head_at_target_positions_only_equals_the_full_model_loss(tiny, arch):
    from lmbias.training.objectives import lm_loss_sum
    from lmbias.training.trainer import TrainModule

    model, tok = load_model(model_spec(f"tiny-{arch}", entry(tiny, arch)))
    ex = encode(tok, ["The nurse said he was late for the meeting .", "She is a doctor ."], 32)
    batch = collate(
        "mlm", ex, [0, 1], 0, 0, tok, TrainingSettings.from_dict({"objective": "mlm", "mlm_probability": 0.5})
    )
    wrapped = TrainModule(model, "mlm")
    assert wrapped.head_name in ("cls", "lm_head")
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    full, n = lm_loss_sum(wrapped(**inputs).logits, batch["labels"], "mlm")
    logits, _ = wrapped(**inputs, targets=batch["labels"] != IGNORE)
    labels = batch["labels"][batch["labels"] != IGNORE]
    assert logits.shape[0] == n > 0
    part = torch.nn.functional.cross_entropy(logits.detach(), labels, reduction="sum")
    full = float(full.detach())
    assert abs(float(part) - full) < 1e-4 * max(1.0, abs(full))


# --------------------------------------------------------------------------------- training end to end


def _settings(objective, **kw) -> dict:
    base = {
        "objective": objective,
        "batch_size": 4,
        "max_steps": 4,
        "epochs": 50,
        "learning_rate": 1e-3,
        "max_length": 48,
        "precision": "fp32",
    }
    base.update(kw)
    return base


@pytest.mark.parametrize(
    "arch,objective", [("bert", "mlm"), ("roberta", "mlm"), ("gpt2", "clm"), ("bart", "infilling"), ("bert", "gpr")]
)
def test_loss_falls_on_a_repeated_small_batch(tiny, corpora, tmp_path, arch, objective):
    corpus = corpora["gpr" if objective == "gpr" else "cda"]
    out = tmp_path / "model"
    train_job(
        entry(tiny, arch),
        f"tiny-{arch}",
        str(corpus),
        str(out),
        0,
        _settings(objective, limit_examples=4, max_steps=12, dropout=0.0, learning_rate=1e-2),
    )
    losses = [r["loss"] for r in _log(out)]
    assert len(losses) == 12
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 2.0, losses  # nats
    info = json.loads((out / "training.json").read_text())
    assert info["settings"]["objective"] == objective and info["world_size"] == 1 and info["steps"] == 12
    load_model(model_spec("trained", {"path": str(out), "family": FAMILY_OF[arch]}))  # a loadable model folder
    assert not Path(str(out) + ".checkpoints").exists()


@pytest.mark.parametrize("arch", ["bert", "gpt2", "bart"])
def test_er_training_logs_the_regulariser_and_lowers_it(tiny, corpora, tmp_path, arch):
    out = tmp_path / "er"
    train_job(
        entry(tiny, arch),
        f"tiny-{arch}",
        str(corpora["cda"]),
        str(out),
        0,
        _settings(ARCH_OBJECTIVE[arch], er_lambda=50.0, max_steps=8, limit_examples=8, dropout=0.0),
    )
    er = [r["er_loss"] for r in _log(out)]
    assert all(v is not None and v >= 0 for v in er)
    assert np.mean(er[-2:]) < np.mean(er[:2]), er  # a heavy lambda pulls the pairs' embeddings together


def test_gpr_selects_the_epoch_with_best_validation_accuracy(tiny, corpora, tmp_path):
    out = tmp_path / "gpr"
    train_job(
        entry(tiny, "bert"),
        "tiny-bert",
        str(corpora["gpr"]),
        str(out),
        0,
        _settings(
            "gpr",
            max_steps=None,
            epochs=4,
            batch_size=16,
            dropout=0.1,
            learning_rate=3e-3,
            select_epoch="validation_accuracy",
        ),
    )
    acc = {r["epoch"]: r["validation_metric"] for r in _log(out) if r["validation_metric"] is not None}
    assert sorted(acc) == [1, 2, 3, 4]
    info = json.loads((out / "training.json").read_text())
    assert info["selected_epoch"] == max(acc, key=lambda e: (acc[e], -e))


@pytest.fixture(scope="module")
def uninterrupted(tiny, corpora, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "model"
    train_job(entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(out), 3, RESUME_SETTINGS)
    return out


#: dropout stays on (0.1): the resumed run must restore torch's RNG state to match
RESUME_SETTINGS = _settings("mlm", max_steps=7, checkpoint_every_steps=2, epochs=3, eval_bias_every_steps=3)


def test_same_seed_same_weights_other_seed_other_weights(tiny, corpora, uninterrupted, tmp_path):
    again = tmp_path / "again"
    train_job(entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(again), 3, RESUME_SETTINGS)
    assert_same_weights(uninterrupted, again)
    other = tmp_path / "other"
    train_job(entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(other), 4, RESUME_SETTINGS)
    assert not torch.equal(
        weights(other)["bert.embeddings.word_embeddings.weight"],
        weights(again)["bert.embeddings.word_embeddings.weight"],
    )


def test_bias_metric_logged_during_training(tiny, uninterrupted):
    rows = _log(uninterrupted)
    assert [r["step"] for r in rows if r["bias_metric"] is not None] == [3, 6]
    assert all(r["bias_metric"] > 0 for r in rows if r["bias_metric"] is not None)
    assert all(r["tokens_per_second"] > 0 and r["learning_rate"] > 0 for r in rows)


def test_killed_job_resumes_to_the_same_weights(tiny, corpora, uninterrupted, tmp_path, repo_root, caplog):
    out = tmp_path / "model"
    cmd = [
        sys.executable,
        "-m",
        "lmbias.cli",
        "train",
        "--model-name",
        "tiny-bert",
        "--model-entry",
        json.dumps(entry(tiny, "bert")),
        "--corpus",
        str(corpora["cda"]),
        "--out",
        str(out),
        "--seed",
        "3",
        "--settings",
        json.dumps(RESUME_SETTINGS),
    ]
    # the intra-op thread count of this process (the uninterrupted run's): another count sums in another
    # order (1-ulp drift). Not always 1: a scoring job run in process earlier in the session sets its own.
    env = dict(launch_env(), **{EXIT_ENV: "5", "OMP_NUM_THREADS": str(torch.get_num_threads())})
    proc = subprocess.run(cmd, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 75, proc.stderr[-3000:]
    assert not out.exists()  # nothing half-written
    ckpt = Path(str(out) + ".checkpoints")
    # only the newest complete checkpoint kept (beside the job's LOCK, lmbias.training.output_lock)
    assert sorted(p.name for p in ckpt.iterdir()) == ["LOCK", "step-00000004"]
    spare = tmp_path / "spare"
    shutil.copytree(ckpt, spare)
    # an incomplete newer checkpoint (no marker) is skipped
    (ckpt / "step-00000006").mkdir()
    train_job(entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(out), 3, RESUME_SETTINGS)
    assert json.loads((out / "training.json").read_text())["resumed_from_step"] == 4
    assert_same_weights(uninterrupted, out)
    assert [r["step"] for r in _log(out)] == list(range(1, 8))
    assert not ckpt.exists()

    # a corrupt checkpoint is refused with a message; training restarts (here from scratch) to the same weights
    with open(spare / "step-00000004" / "model.pt", "r+b") as f:
        f.seek(200)
        f.write(b"\x00garbage\x00")
    caplog.set_level(logging.WARNING, logger="lmbias.training.checkpoints")
    again = tmp_path / "again"
    train_job(
        entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(again), 3, RESUME_SETTINGS, checkpoint_dir=str(spare)
    )
    assert "model.pt is missing or corrupt" in caplog.text and "step-00000004" in caplog.text
    assert json.loads((again / "training.json").read_text())["resumed_from_step"] is None
    assert_same_weights(uninterrupted, again)


def test_checkpoint_of_another_configuration_is_refused(tiny, corpora, tmp_path, caplog):
    from lmbias.training import checkpoints

    class _OneProcess:  # what checkpoints.save needs of an Accelerator
        is_main_process, process_index = True, 0

        def wait_for_everyone(self):
            pass

        def unwrap_model(self, m):
            return m

    ckpt = tmp_path / "ckpt"
    model, _ = load_model(model_spec("tiny-bert", entry(tiny, "bert")))
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    checkpoints.save(
        ckpt,
        2,
        "fingerprint-of-another-run",
        _OneProcess(),
        model,
        opt,
        sched,
        {"step": 2, "epoch": 0, "next_batch": 2, "log": [], "best_accuracy": None, "best_epoch": None},
    )
    assert (ckpt / "step-00000002" / checkpoints.MARKER).is_file()
    caplog.set_level(logging.WARNING, logger="lmbias.training.checkpoints")
    train_job(
        entry(tiny, "bert"),
        "tiny-bert",
        str(corpora["cda"]),
        str(tmp_path / "b"),
        0,
        _settings("mlm", max_steps=3, checkpoint_every_steps=2),
        checkpoint_dir=str(ckpt),
    )
    assert "belongs to another configuration" in caplog.text
    assert json.loads((tmp_path / "b" / "training.json").read_text())["resumed_from_step"] is None


# ----------------------------------------------------------------------------------------- two processes

#: 2 processes x batch 2 against 1 process x batch 4 (same global batches, dropout off). The gradients are
#: the same sums in another order, so weights agree to float32 rounding amplified by a few Adam steps.
TWO_PROCESS_ATOL = 1e-5


def test_two_gloo_processes_match_one_process(tiny, corpora, tmp_path, repo_root):
    settings = _settings("mlm", max_steps=4, dropout=0.0, learning_rate=1e-3)
    two = tmp_path / "two"
    args = [
        "--model-name",
        "tiny-bert",
        "--model-entry",
        json.dumps(entry(tiny, "bert")),
        "--corpus",
        str(corpora["cda"]),
        "--out",
        str(two),
        "--seed",
        "0",
        "--settings",
        json.dumps(dict(settings, batch_size=2)),
    ]
    from lmbias.engine.distributed import main_process_port

    cmd = launch_command(2, main_process_port(str(two)), args, cpu=True, subcommand="train")
    proc = subprocess.run(cmd, cwd=repo_root, env=launch_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    info = json.loads((two / "training.json").read_text())
    assert info["world_size"] == 2
    # the main process alone shows the progress bar (plain lines: stderr is not a terminal) and the summary line
    log = proc.stdout + proc.stderr
    bars = [line for line in log.split("\n") if "training:" in line]
    assert bars and all(line.startswith("training:") and "\r" not in line for line in bars), bars
    assert len([line for line in bars if line.startswith("training: 100%") and "4/4" in line]) == 1, log[-3000:]
    assert log.count("trained 4 steps, ") == 1
    assert len(info["rank_weights_sha256"]) == 2 and len(set(info["rank_weights_sha256"])) == 1
    one = tmp_path / "one"
    train_job(entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(one), 0, dict(settings, batch_size=4))
    w1, w2 = weights(one), weights(two)
    base = load_file(str(tiny["bert"] / "model.safetensors"))
    for k in w1:
        np.testing.assert_allclose(w2[k].numpy(), w1[k].numpy(), atol=TWO_PROCESS_ATOL, rtol=0, err_msg=k)
    moved = max(float((w1[k] - base[k]).abs().max()) for k in w1)
    assert moved > 100 * TWO_PROCESS_ATOL  # training moved the weights far more than the tolerance
    l1, l2 = _log(one), _log(two)
    np.testing.assert_allclose([r["loss"] for r in l2], [r["loss"] for r in l1], rtol=1e-4)


def test_gradient_accumulation_equals_the_larger_batch(tiny, corpora, tmp_path):
    """batch 2 x 2 accumulation steps = batch 4 (same step batches, loss normalised over the whole step)."""
    settings = _settings("mlm", max_steps=3, dropout=0.0)
    a, b = tmp_path / "accum", tmp_path / "big"
    train_job(
        entry(tiny, "bert"),
        "tiny-bert",
        str(corpora["cda"]),
        str(a),
        0,
        dict(settings, batch_size=2, gradient_accumulation_steps=2),
    )
    train_job(entry(tiny, "bert"), "tiny-bert", str(corpora["cda"]), str(b), 0, dict(settings, batch_size=4))
    wa, wb = weights(a), weights(b)
    for k in wa:
        np.testing.assert_allclose(wa[k].numpy(), wb[k].numpy(), atol=TWO_PROCESS_ATOL, rtol=0, err_msg=k)
    np.testing.assert_allclose([r["loss"] for r in _log(a)], [r["loss"] for r in _log(b)], rtol=1e-5)


# ------------------------------------------------------------------------------------------- bad input


def test_bad_input_is_a_clear_error_and_writes_nothing(tiny, corpora, tmp_path):
    out = tmp_path / "out"
    e = entry(tiny, "bert")
    with pytest.raises(DataError, match="training corpus not found"):
        train_job(e, "tiny-bert", str(tmp_path / "missing.parquet"), str(out), 0, _settings("mlm"))
    empty = tmp_path / "empty.parquet"
    pq.write_table(pq.read_table(corpora["cda"]).slice(0, 0), empty)
    with pytest.raises(DataError, match=f"{re.escape(str(empty))}: training corpus has no training rows"):
        train_job(e, "tiny-bert", str(empty), str(out), 0, _settings("mlm"))
    no_cf = tmp_path / "no_cf.parquet"
    pq.write_table(pq.read_table(corpora["cda"]).drop(["is_counterfactual"]), no_cf)
    with pytest.raises(DataError, match="no column.*is_counterfactual"):
        train_job(e, "tiny-bert", str(no_cf), str(out), 0, _settings("mlm", er_lambda=1.0))
    with pytest.raises(DataError, match="no column.*body"):
        train_job(e, "tiny-bert", str(corpora["cda"]), str(out), 0, _settings("mlm", text_column="body"))
    with pytest.raises(DataError, match="no column.*label"):
        train_job(e, "tiny-bert", str(corpora["cda"]), str(out), 0, _settings("gpr"))
    with pytest.raises(ConfigError, match=r"settings\.bogus"):
        train_job(e, "tiny-bert", str(corpora["cda"]), str(out), 0, dict(_settings("mlm"), bogus=1))
    with pytest.raises(ConfigError, match="settings.objective.*tiny-gpt2"):
        train_job(entry(tiny, "gpt2"), "tiny-gpt2", str(corpora["cda"]), str(out), 0, _settings("mlm"))
    with pytest.raises(ConfigError, match="gpr.*needs an mlm model"):
        train_job(entry(tiny, "gpt2"), "tiny-gpt2", str(corpora["gpr"]), str(out), 0, _settings("gpr"))
    no_weights = tmp_path / "no-weights"
    shutil.copytree(tiny["bert"], no_weights)
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="models.tiny-bert: cannot load the weights"):
        train_job(
            {"path": str(no_weights), "family": "mlm"}, "tiny-bert", str(corpora["cda"]), str(out), 0, _settings("mlm")
        )
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())
