"""bias-bench's further methods: INLP (Ravfogel et al. 2020; kind `inlp`) and Dropout (Webster et al. 2020;
kind `dropout`). Known-answer tests on synthetic representations and tiny models; cheap."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from safetensors.torch import load_file

from helpers.paths import REPO_ROOT
from lmbias.engine.debias_projection import load_projection_matrix
from lmbias.engine.method_folders import load_method_model
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError
from lmbias.methods import resolution
from lmbias.training import inlp
from lmbias.training.dropout import set_dropout
from lmbias.training.jobs import train_job

MALE = ["he", "his", "him", "man", "father", "son", "brother", "husband", "boy"]
FEMALE = ["she", "her", "woman", "mother", "daughter", "sister", "wife", "girl"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("inlp-tiny")
    return {arch: build_tiny_model(arch, root / arch, seed=0) for arch in ("bert", "gpt2", "bart")}


def _spec(tiny, arch):
    return model_spec(f"tiny-{arch}", {"path": str(tiny[arch]), "family": FAMILY_OF[arch], "revision": "local"})


@pytest.fixture(scope="module")
def gap_texts(shared_data):
    """The sentences of 500 real GAP texts (development split)."""
    with open(shared_data / "gap" / "gap-development.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))[:500]
    return [s for r in rows for s in re.split(r"(?<=\.) ", r["Text"]) if len(s.split()) <= 40]


def _planted_gender(n: int, d: int, seed: int):
    """(x, y): labels 1/0/-1 (male/female/neutral) decodable along two directions, plus isotropic noise."""
    rng = np.random.default_rng(seed)
    y = rng.choice([1, 0, -1], size=n)
    g = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    signal = np.where(y[:, None] == 1, 3.0 * g[:, 0], np.where(y[:, None] == 0, -3.0 * g[:, 0], 3.0 * g[:, 1]))
    return rng.normal(size=(n, d)) + signal, y


# ----------------------------------------------------------------------------------------------- INLP


@pytest.mark.parametrize("classifier", inlp.CLASSIFIERS)
def test_inlp_removes_a_planted_gender_signal_to_chance(classifier):
    x, y = _planted_gender(600, 24, seed=1)
    x_train, y_train, x_dev, y_dev = x[:400], y[:400], x[400:], y[400:]
    P, rows = inlp.fit_projection(x_train, y_train, x_dev, y_dev, n_iterations=4, classifier=classifier, seed=0)
    chance = inlp.majority_rate(y_dev)
    assert rows[0]["dev_accuracy"] > 0.9  # linearly decodable before
    assert abs(rows[-1]["dev_accuracy"] - chance) < 0.1, rows  # at chance after
    # P is an orthogonal projection (P P = P, symmetric) onto the intersection of the classifiers' null spaces
    assert np.allclose(P @ P, P, atol=1e-8) and np.allclose(P, P.T, atol=1e-10)
    assert rows[-1]["dimensions_removed"] == round(24 - np.trace(P)) <= 4 * 3
    # a fresh classifier of the same kind on the projected held-out data learns nothing either
    clf = inlp.make_classifier(classifier, 0).fit(x_train @ P, y_train)
    assert abs(clf.score(x_dev @ P, y_dev) - chance) < 0.1
    again, _ = inlp.fit_projection(x_train, y_train, x_dev, y_dev, n_iterations=4, classifier=classifier, seed=0)
    assert np.array_equal(P, again)  # seeded: the same fit twice


def test_inlp_projection_is_the_product_of_the_null_space_projections():
    """Ravfogel et al.: with each classifier trained on the previous projection's output, P = P_n ... P_1,
    P_i = I - W_i^+ W_i (the null space of classifier i); transcribed with LinearSVC as bias-bench sets it."""
    from sklearn.svm import LinearSVC

    x, y = _planted_gender(300, 12, seed=2)
    P, _ = inlp.fit_projection(x, y, x, y, n_iterations=3, classifier="linear_svc", seed=0)
    product, data = np.eye(12), x.copy()
    for _ in range(3):
        w = LinearSVC(fit_intercept=False, dual=False, random_state=0).fit(data, y).coef_
        null = np.eye(12) - np.linalg.pinv(w) @ w
        product = null @ product
        data = x @ product.T
    assert np.allclose(P, product, atol=1e-6)


def _gender_ordered(n: int, d: int, seed: int):
    """Planted data in bias-bench's row order: male rows (1), then female (0), then neutral (-1)."""
    x, y = _planted_gender(n, d, seed)
    order = np.argsort(-y, kind="stable")
    return x[order], y[order]


def _bias_bench_split(X, y):
    """bias-bench's _split_gender_dataset (debias/inlp/context_nullspace_projection.py), transcribed: 30 % test
    set aside, then 30 % of the rest held out as dev, both train_test_split(..., random_state=0)."""
    from sklearn.model_selection import train_test_split

    X_train_dev, X_test, y_train_dev, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    X_train, X_dev, y_train, y_dev = train_test_split(X_train_dev, y_train_dev, test_size=0.3, random_state=0)
    return X_train, X_dev, X_test, y_train, y_dev, y_test


def test_inlp_test_fraction_splits_as_bias_bench_and_the_default_splits_once():
    from sklearn.model_selection import train_test_split

    x, y = _gender_ordered(97, 5, seed=4)
    train, dev, test = inlp.split_indices(len(y), dev_fraction=0.3, test_fraction=0.3, seed=0)
    for ours, theirs in zip((x[train], x[dev], x[test], y[train], y[dev], y[test]), _bias_bench_split(x, y)):
        assert np.array_equal(ours, theirs)
    assert (len(train), len(dev), len(test)) == (46, 21, 30)  # their classifiers see 0.7 x 0.7 of the rows
    train, dev, test = inlp.split_indices(len(y), dev_fraction=0.3, test_fraction=None, seed=0)
    x_train, x_dev, _, _ = train_test_split(x, y, test_size=0.3, random_state=0)
    assert np.array_equal(x[train], x_train) and np.array_equal(x[dev], x_dev) and len(test) == 0


def _recording_classifiers(monkeypatch):
    """inlp.make_classifier, recording the rows each classifier is fitted on."""
    fitted, make = [], inlp.make_classifier

    def recording(name, seed):
        clf = make(name, seed)
        fit = clf.fit
        clf.fit = lambda X, y: (fitted.append(np.array(X)), fit(X, y))[1]
        return clf

    monkeypatch.setattr(inlp, "make_classifier", recording)
    return fitted


def test_inlp_dropout_rate_is_bias_benchs_mask_and_at_zero_only_its_scale(monkeypatch):
    """get_debiasing_projection: mask = (rand < 1 - rate) * 1 / (1 - rate + 1e-6) on the training rows each
    iteration, so at their dropout_rate=0 every row is scaled by 1 / (1 + 1e-6); dev rows are not masked."""
    x, y = _gender_ordered(300, 12, seed=5)
    fitted = _recording_classifiers(monkeypatch)
    inlp.fit_projection(x[:200], y[:200], x[200:], y[200:], n_iterations=1, dropout_rate=0)
    assert np.array_equal(fitted[-1], x[:200] * (1.0 / (1 - 0 + 1e-6)))
    inlp.fit_projection(x[:200], y[:200], x[200:], y[200:], n_iterations=1)
    assert np.array_equal(fitted[-1], x[:200])  # the default: no dropout, no scale
    inlp.fit_projection(x[:200], y[:200], x[200:], y[200:], n_iterations=1, dropout_rate=0.25)
    ratio = fitted[-1] / x[:200]
    kept = np.isclose(ratio, 1.0 / (1 - 0.25 + 1e-6), rtol=1e-12, atol=0)
    assert np.all(kept | (ratio == 0)) and abs(kept.mean() - 0.75) < 0.02


def _bias_bench_projection(X_train, Y_train, n_classifiers):
    """get_debiasing_projection (debias/inlp/debias.py) as bias-bench's _apply_nullspace_projection calls it
    (LinearSVC(fit_intercept=False, class_weight=None, dual=False, random_state=0), autoregressive,
    min_accuracy 0, dropout_rate 0), transcribed: returns the final P."""
    import scipy.linalg
    from sklearn.svm import LinearSVC

    def rowspace_projection(W):
        basis = np.zeros_like(W.T) if np.allclose(W, 0) else scipy.linalg.orth(W.T)
        return basis.dot(basis.T)

    def intersection_of_nullspaces(projections, dim):
        return np.eye(dim) - rowspace_projection(np.sum(projections, axis=0))

    dim = X_train.shape[1]
    np.random.seed(0)
    X_cp, projections = X_train.copy(), []
    for _ in range(n_classifiers):
        dropout_rate = 0
        mask = (np.random.rand(*X_train.shape) < (1 - dropout_rate)).astype(float) * (1.0 / (1 - dropout_rate + 1e-6))
        clf = LinearSVC(fit_intercept=False, class_weight=None, dual=False, random_state=0).fit(X_cp * mask, Y_train)
        projections.append(rowspace_projection(np.atleast_2d(clf.coef_)))
        X_cp = intersection_of_nullspaces(projections, dim).dot(X_train.T).T
    return intersection_of_nullspaces(projections, dim)


def test_inlp_biasbench_options_give_bias_benchs_projection():
    """Same arrays and split: with dropout_rate 0 ours equals their P to 1e-9 (3.5e-12 measured); without
    its 1 / (1 + 1e-6) scale, 10 classifiers drift apart by 1.5e-3 here."""
    x, y = _gender_ordered(900, 64, seed=3)
    X_train, X_dev, _, Y_train, Y_dev, _ = _bias_bench_split(x, y)
    theirs = _bias_bench_projection(X_train, Y_train, 10)
    ours, _ = inlp.fit_projection(X_train, Y_train, X_dev, Y_dev, 10, "linear_svc", seed=0, dropout_rate=0)
    assert np.abs(ours - theirs).max() < 1e-9
    unscaled, _ = inlp.fit_projection(X_train, Y_train, X_dev, Y_dev, 10, "linear_svc", seed=0)
    assert np.abs(unscaled - theirs).max() > 1e-4


def test_inlp_settings_load_without_torch_and_name_the_engine_files():
    from lmbias.engine import debias_projection

    assert (inlp.INLP_FILE, inlp.INLP_INFO_FILE) == (debias_projection.INLP_FILE, debias_projection.INLP_INFO_FILE)
    code = (
        "import sys; import lmbias.methods.resolution, lmbias.training.inlp; "
        "assert 'torch' not in sys.modules and 'sklearn' not in sys.modules"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")},
    )


def test_inlp_sentences_are_male_female_or_neutral():
    male, female = inlp.gender_words()
    assert {"he", "his", "father"} <= male and {"she", "her", "mother"} <= female and not male & female
    texts = [
        "He met his father at the station.",
        "She met her mother at the station.",
        "They met at the old station today.",
        "He met her at the old station.",
        "He met her.",
    ]
    assert inlp.classify_sentences(texts, male, female) == ["male", "female", "neutral", None, None]
    chosen = inlp.select_sentences(texts * 2, inlp.classify_sentences(texts * 2, male, female), 5, seed=0)
    assert {c: len(v) for c, v in chosen.items()} == {"male": 1, "female": 1, "neutral": 1}  # distinct only


def _planted_tiny_bert(tiny, tmp_path):
    """tiny-bert with +g / -g added to the input embeddings of masculine / feminine words."""
    model, tok = load_model(_spec(tiny, "bert"))
    emb = model.get_input_embeddings().weight
    g = torch.randn(emb.shape[1], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for words, sign in ((MALE, 1.0), (FEMALE, -1.0)):
            for w in words:
                emb[tok(w, add_special_tokens=False)["input_ids"]] += sign * 12.0 * g / g.norm()
    folder = tmp_path / "planted"
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return model_spec("tiny-bert", {"path": str(folder), "family": "mlm", "revision": "local"})


def test_inlp_fit_on_a_tiny_bert_reaches_chance_and_scoring_applies_it(tiny, gap_texts, tmp_path):
    spec = _planted_tiny_bert(tiny, tmp_path)
    corpus = tmp_path / "sentences.parquet"
    pq.write_table(pa.table({"text": gap_texts}), corpus)
    out = tmp_path / "inlp"
    inlp.fit_job(spec, corpus, out, {"n_iterations": 6, "sentences_per_class": 200}, key="methods.inlp")
    info = json.loads((out / inlp.INLP_INFO_FILE).read_text())
    assert [r["iteration"] for r in info["iterations"]] == list(range(1, 7))
    assert info["iterations"][0]["dev_accuracy"] > info["chance_level"] + 0.2  # gender decodable at first
    assert abs(info["final_dev_accuracy"] - info["chance_level"]) <= 0.12, info["iterations"]
    assert min(info["sentences_per_class"].values()) >= 30 and "scikit-learn" in info["library_versions"]
    P, _ = load_projection_matrix(out)
    assert torch.allclose(P @ P, P, atol=1e-4) and torch.allclose(P, P.T, atol=1e-5)
    model, tok = load_method_model(spec, out)
    assert type(model).__name__ == "BertForMaskedLM"


def test_inlp_fit_reads_test_fraction_and_dropout_rate(tiny, gap_texts, monkeypatch):
    """fit_inlp passes the recipe's options on: three-way split sizes in inlp.json, scaled classifier input."""
    fitted = _recording_classifiers(monkeypatch)
    model, tok = load_model(_spec(tiny, "bert"))
    settings = inlp.INLPSettings(n_iterations=1, sentences_per_class=30, test_fraction=0.3, dropout_rate=0)
    _, info = inlp.fit_inlp(model, tok, "mlm", gap_texts, settings)
    n = sum(info["sentences_per_class"].values())
    train, dev, test = inlp.split_indices(n, 0.3, 0.3, 0)
    assert (info["train_size"], info["dev_size"], info["test_size_unused"]) == (len(train), len(dev), len(test))
    assert len(test) == -(-3 * n // 10) and len(fitted) == 1 and len(fitted[0]) == len(train)
    _, plain = inlp.fit_inlp(model, tok, "mlm", gap_texts, inlp.INLPSettings(n_iterations=1, sentences_per_class=30))
    assert plain["test_size_unused"] == 0 and plain["dev_size"] == -(-3 * n // 10)
    # a sentence in both training sets: the recipe's classifier saw it scaled by 1 / (1 + 1e-6)
    plain_train = inlp.split_indices(n, 0.3, None, 0)[0]
    row = next(r for r in train if r in set(plain_train))
    scaled, unscaled = fitted[0][list(train).index(row)], fitted[1][list(plain_train).index(row)]
    assert np.array_equal(scaled, unscaled * (1.0 / (1 + 1e-6))) and not np.array_equal(scaled, unscaled)


@pytest.mark.parametrize("arch", ["bert", "gpt2", "bart"])
def test_inlp_folder_projects_the_state_before_the_lm_head(tiny, tmp_path, arch):
    """load_method_model(inlp folder): logits = LM head(P h) of the base model's final hidden state h."""
    spec = _spec(tiny, arch)
    base, tok = load_method_model(spec, None)
    d = base.config.hidden_size
    u = np.linalg.qr(np.random.default_rng(0).normal(size=(d, 5)))[0]
    inlp.save_projection(tmp_path / "inlp", (np.eye(d) - u @ u.T).astype(np.float32), {"hidden_size": d})
    debiased, _ = load_method_model(spec, tmp_path / "inlp")
    P = load_file(str(tmp_path / "inlp" / "inlp.safetensors"))["projection"]
    enc = tok(["his father is a doctor .", "she is here ."], return_tensors="pt", padding=True)
    with torch.no_grad():
        out_b = base(**enc, output_hidden_states=True)
        out_d = debiased(**enc, output_hidden_states=True)
        name = "decoder_hidden_states" if arch == "bart" else "hidden_states"
        projected = getattr(out_b, name)[-1] @ P.T
        logits = base.cls(projected) if arch == "bert" else base.get_output_embeddings()(projected)
        if arch == "bart":
            logits = logits + base.final_logits_bias
    assert torch.allclose(getattr(out_d, name)[-1], projected, atol=1e-5)
    assert torch.allclose(out_d.logits, logits, atol=1e-4)
    assert not torch.allclose(out_d.logits, out_b.logits, atol=1e-3)


@pytest.mark.parametrize(
    "entry, key",
    [
        ({"n_iterations": 0}, "methods.inlp.n_iterations"),
        ({"classifier": "perceptron"}, "methods.inlp.classifier"),
        ({"dev_fraction": 1.0}, "methods.inlp.dev_fraction"),
        ({"test_fraction": 0}, "methods.inlp.test_fraction"),
        ({"dropout_rate": 1.0}, "methods.inlp.dropout_rate"),
        ({"dropout_rate": True}, "methods.inlp.dropout_rate"),
        ({"sentences_per_class": 1}, "methods.inlp.sentences_per_class"),
        ({"seed": -1}, "methods.inlp.seed"),
        ({"k": 1}, "methods.inlp.k"),
        ({"training": {}}, "methods.inlp.training"),
    ],
)
def test_bad_inlp_options_are_named(entry, key):
    method = {"kind": "inlp", "corpus": "results/corpora/gap/sentences.parquet", **entry}
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolution.resolve_method("tiny-bert", {"family": "mlm"}, "inlp", method)


def test_method_kinds_seeds_and_families():
    entry = {"kind": "inlp", "corpus": "results/corpora/gap/sentences.parquet", "n_iterations": 3}
    assert resolution.resolve_method("m", {"family": "seq2seq"}, "inlp", entry)["inlp_settings"] == {"n_iterations": 3}
    assert resolution.seeds_for(entry, [0, 1, 2]) == [0]
    assert resolution.seeds_for({"kind": "dropout"}, [0, 1, 2]) == [0, 1, 2]
    for kind in ("inlp", "dropout"):
        with pytest.raises(ConfigError, match="family encoder"):
            resolution.resolve_method("enc", {"family": "encoder"}, kind, {"kind": kind, "corpus": "c.parquet"})


# -------------------------------------------------------------------------------------------- Dropout

DROPOUT_TRAINING = {"hidden_dropout": {"mlm": 0.2, "clm": 0.15}, "attention_dropout": {"mlm": 0.15, "clm": 0.15}}


def test_dropout_settings_resolve_per_family_and_bad_values_are_named():
    entry = {"kind": "dropout", "corpus": "results/corpora/gap/sentences.parquet", "training": DROPOUT_TRAINING}
    got = {
        f: resolution.resolve_method("m", {"family": f}, "dropout", entry)["settings"]
        for f in ("mlm", "clm", "seq2seq")
    }
    assert (got["mlm"]["hidden_dropout"], got["mlm"]["attention_dropout"], got["mlm"]["objective"]) == (
        0.2,
        0.15,
        "mlm",
    )
    assert (got["clm"]["hidden_dropout"], got["clm"]["attention_dropout"]) == (0.15, 0.15)
    assert "hidden_dropout" not in got["seq2seq"] and got["seq2seq"]["objective"] == "infilling"  # BART keeps its own
    for bad in (1.0, -0.1, "high"):
        with pytest.raises(ConfigError, match=r"methods\.dropout\.training\.hidden_dropout"):
            resolution.resolve_method("m", {"family": "mlm"}, "dropout", {**entry, "training": {"hidden_dropout": bad}})


@pytest.mark.parametrize(
    "arch, hidden, attention",
    [
        ("gpt2", ("resid_pdrop", "embd_pdrop"), ("attn_pdrop",)),
        ("bart", ("dropout",), ("attention_dropout",)),
    ],
)
def test_set_dropout_sets_hidden_and_attention_rates_per_architecture(tiny, arch, hidden, attention):
    model, _ = load_model(_spec(tiny, arch))
    raised = set_dropout(model, hidden=0.31, attention=0.17)
    assert all(getattr(raised.config, k) == 0.31 for k in hidden) and all(
        getattr(raised.config, k) == 0.17 for k in attention
    )
    drops = {m.p for m in raised.modules() if isinstance(m, torch.nn.Dropout)}
    assert 0.31 in drops or arch == "bart"  # BART applies its rates functionally, from the config
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), raised.state_dict().values()))


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return build_tiny_model("llama", tmp_path_factory.mktemp("dropout-llama") / "tiny-llama", seed=0)


def _llama(folder):
    model, _ = load_model(model_spec("tiny-llama", {"path": str(folder), "family": "clm", "revision": "local"}))
    return model


def _train_and_eval_logits(model, seed: int = 0):
    """(training-mode logits, eval-mode logits) of one fixed input: equal iff no dropout acts."""
    ids = torch.arange(3, 19).reshape(2, 8)
    model.train()
    torch.manual_seed(seed)
    with torch.no_grad():
        trained = model(input_ids=ids).logits
        model.eval()
        return trained, model(input_ids=ids).logits


def test_llama_hidden_dropout_is_a_named_error_not_a_silent_no_op(tiny_llama):
    """Llama (as Qwen2, OLMo-2) has no hidden-state dropout: a hidden rate would change nothing, so it is refused
    with the key, the method, the model type and the config's own dropout keys."""
    model = _llama(tiny_llama)
    with pytest.raises(ConfigError) as error:
        set_dropout(model, hidden=0.15, attention=0.15, model_name="tiny-llama", method="dropout")
    message = str(error.value)
    for part in (
        "training.hidden_dropout",
        "methods.dropout.training.hidden_dropout",
        "llama has no hidden-state dropout",
        "dropout keys: attention_dropout",
        "hidden_dropout: null",
        "attention dropout only",
    ):
        assert part in message, (part, message)
    # attention dropout alone lands, and acts: the training-mode output changes, while the model as it was
    # (attention_dropout 0.0, no other dropout anywhere) computes the same in both modes
    plain_train, plain_eval = _train_and_eval_logits(model)
    assert torch.equal(plain_train, plain_eval)
    raised = set_dropout(model, attention=0.3, model_name="tiny-llama", method="dropout")
    assert raised.config.attention_dropout == 0.3
    train, evaluated = _train_and_eval_logits(raised)
    assert torch.allclose(evaluated, plain_eval, atol=1e-6) and not torch.allclose(train, evaluated, atol=1e-3)
    # GPR's `dropout` (every rate) lands on attention_dropout too
    assert set_dropout(model, p=0.1).config.attention_dropout == 0.1


def test_dropout_job_on_llama_names_the_method_from_the_results_layout(tiny_llama, tmp_path):
    corpus = tmp_path / "sentences.parquet"
    pq.write_table(pa.table({"text": ["He is a nurse.", "She is a doctor."] * 4}), corpus)
    out = tmp_path / "results" / "tiny-llama" / "dropout" / "seed0" / "model"
    settings = {
        "objective": "clm",
        "batch_size": 2,
        "max_steps": 1,
        "max_length": 16,
        "precision": "fp32",
        "hidden_dropout": 0.15,
        "attention_dropout": 0.15,
    }
    with pytest.raises(ConfigError, match=r"methods\.dropout\.training\.hidden_dropout.*models\.tiny-llama"):
        train_job({"path": str(tiny_llama), "family": "clm"}, "tiny-llama", str(corpus), str(out), 0, settings)
    assert not out.exists()


def _tiny_gpt_neox(hidden_dropout=0.0):
    """A GPT-NeoX (Pythia's architecture) of 2 layers and tiny width, built here from its config (no hub)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_dropout=hidden_dropout,
        attention_dropout=0.0,
    )
    return GPTNeoXForCausalLM(config)


@pytest.mark.parametrize("as_loaded", [0.0, 0])  # a config.json's `0` loads as an int: a rate all the same
def test_gpt_neox_hidden_dropout_lands(as_loaded):
    model = _tiny_gpt_neox(as_loaded)
    plain_train, plain_eval = _train_and_eval_logits(model)
    assert torch.equal(plain_train, plain_eval)
    raised = set_dropout(model, hidden=0.3, attention=0.0, model_name="tiny-neox", method="dropout")
    assert (raised.config.hidden_dropout, raised.config.attention_dropout) == (0.3, 0.0)
    drops = [m.p for m in raised.modules() if isinstance(m, torch.nn.Dropout)]
    assert drops.count(0.3) == 1 + 2 * 2  # embeddings, and after attention and after the MLP of each layer
    train, evaluated = _train_and_eval_logits(raised)
    assert torch.allclose(evaluated, plain_eval, atol=1e-6) and not torch.allclose(train, evaluated, atol=1e-3)


def test_dropout_training_uses_the_raised_rates_and_differs_from_cds(tiny, gap_texts, tmp_path):
    plain = tmp_path / "plain.parquet"
    swapped = tmp_path / "cds.parquet"
    texts = gap_texts[:16]
    pq.write_table(pa.table({"text": texts}), plain)
    swap = {" he ": " she ", " his ": " her ", " He ": " She ", " His ": " Her "}
    cds = []
    for t in texts:
        for a, b in swap.items():
            t = t.replace(a, b)
        cds.append(t)
    pq.write_table(pa.table({"text": cds}), swapped)
    entry = {"path": str(tiny["bert"]), "family": "mlm"}
    base = {
        "objective": "mlm",
        "batch_size": 4,
        "max_steps": 2,
        "learning_rate": 1e-3,
        "max_length": 128,
        "precision": "fp32",
    }
    runs = {"dropout": (plain, {"hidden_dropout": 0.2, "attention_dropout": 0.15}), "cds": (swapped, {})}
    for name, (corpus, extra) in runs.items():
        train_job(entry, "tiny-bert", str(corpus), str(tmp_path / name), 0, {**base, **extra})
    config = json.loads((tmp_path / "dropout" / "config.json").read_text())
    assert (config["hidden_dropout_prob"], config["attention_probs_dropout_prob"]) == (0.2, 0.15)
    before = json.loads((tiny["bert"] / "config.json").read_text())
    assert (before["hidden_dropout_prob"], before["attention_probs_dropout_prob"]) != (0.2, 0.15)
    a, b = (load_file(str(tmp_path / n / "model.safetensors")) for n in runs)
    assert any(not torch.equal(a[k], b[k]) for k in a)


def test_inlp_classifier_count_per_family_as_bias_bench(repo_root):
    """bias-bench fits 80 classifiers for the masked models and 10 for GPT-2 (model_to_n_classifiers)."""
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    entry, models = config["methods"]["inlp-biasbench"], config["models"]
    counts = {
        m: resolution.resolve_method(m, models[m], "inlp-biasbench", entry, models)["inlp_settings"]["n_iterations"]
        for m in ("bert-base", "albert-base", "roberta-base", "gpt2")
    }
    assert counts == {"bert-base": 80, "albert-base": 80, "roberta-base": 80, "gpt2": 10}
    for model in ("bert-base", "gpt2"):  # their split and their dropout_rate=0 scale (issue 21)
        settings = resolution.resolve_method(model, models[model], "inlp-biasbench", entry, models)["inlp_settings"]
        assert (settings["test_fraction"], settings["dropout_rate"], settings.get("dev_fraction", 0.3)) == (0.3, 0, 0.3)
        resolved = inlp.INLPSettings.from_dict(settings)
        assert (resolved.test_fraction, resolved.dropout_rate, resolved.dev_fraction) == (0.3, 0, 0.3)
    default = inlp.INLPSettings.from_dict(
        resolution.resolve_method("bert-base", models["bert-base"], "inlp", config["methods"]["inlp"], models)[
            "inlp_settings"
        ]
    )
    assert (default.test_fraction, default.dropout_rate) == (None, None)  # the default: one split, no scale
    with pytest.raises(ConfigError, match=r"methods.inlp-x.n_iterations.gpt: not a model family or a configured model"):
        resolution.resolve_method("gpt2", models["gpt2"], "inlp-x", {**entry, "n_iterations": {"gpt": 10}}, models)
