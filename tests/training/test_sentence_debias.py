"""SentenceDebias (Liang et al. 2020; method `sd`): known-answer tests on synthetic embeddings and on tiny
models with a planted gender direction, fitted on real GAP text."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from lmbias.engine import debias_projection, embeddings
from lmbias.engine.method_folders import load_method_model, load_method_tokenizer
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics import weat
from lmbias.training import sentence_debias as sd

FAMILY = {"bert": "mlm", "gpt2": "clm", "bart": "seq2seq"}
MALE = ["he", "man", "his", "boy", "father", "son", "brother", "husband"]
FEMALE = ["she", "woman", "her", "girl", "mother", "daughter", "sister", "wife"]
CAREER = ["career", "office", "salary", "business", "management", "professional"]
HOME = ["family", "home", "children", "wedding", "parents", "relatives"]


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def gap_sentences(shared_data, tmp_path_factory):
    """300 real GAP texts (development split) as a sentences parquet (doc_id, sentence_id, text)."""
    with open(shared_data / "gap" / "gap-development.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))[:300]
    table = pa.table(
        {"doc_id": [r["ID"] for r in rows], "sentence_id": [0] * len(rows), "text": [r["Text"] for r in rows]}
    )
    path = tmp_path_factory.mktemp("gap") / "sentences.parquet"
    pq.write_table(table, path)
    return path


def _planted_direction(model, tokenizer, scale: float = 3.0, seed: int = 0) -> torch.Tensor:
    """Add +scale*g to the input embeddings of male and career words, -scale*g to female and home words:
    a gender direction g in the model's input that SEAT-style career/family associations then read."""
    emb = model.get_input_embeddings().weight
    g = torch.randn(emb.shape[1], generator=torch.Generator().manual_seed(seed))
    g = g / g.norm()
    with torch.no_grad():
        for words, sign in ((MALE + CAREER, 1.0), (FEMALE + HOME, -1.0)):
            for w in words:
                ids = tokenizer(w, add_special_tokens=False)["input_ids"]
                assert len(ids) == 1 and ids[0] != tokenizer.unk_token_id, w
                emb[ids[0]] += sign * scale * g
    return g


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """{arch: folder} of tiny models with the planted gender direction (saved, so load_model reads them)."""
    root = tmp_path_factory.mktemp("sd-models")
    out = {}
    for arch in FAMILY:
        folder = build_tiny_model(arch, root / arch, seed=0)
        model, tok = load_model(_spec(arch, folder))
        _planted_direction(model, tok)
        model.save_pretrained(folder, safe_serialization=True)
        out[arch] = folder
    return out


def _spec(arch, folder):
    return model_spec(f"tiny-{arch}", {"path": str(folder), "family": FAMILY[arch], "revision": "local"})


SETTINGS = {"k": 1, "ratio_of_pairs": 1.0, "limit_sentences": 200}


@pytest.fixture(scope="module")
def fitted(planted, gap_sentences, tmp_path_factory):
    root = tmp_path_factory.mktemp("sd-fit")
    return {arch: _fit(planted[arch], arch, gap_sentences, root / arch) for arch in FAMILY}


def _fit(folder, arch, sentences, out):
    sd.fit_job(_spec(arch, folder), sentences, out, SETTINGS)
    return out


# ------------------------------------------------------------------------------------- pure functions


def test_fit_subspace_recovers_a_planted_direction():
    rng = np.random.default_rng(1)
    d, n = 64, 200
    g = rng.normal(size=d)
    g /= np.linalg.norm(g)
    base = rng.normal(size=(n, d)) * 3
    noise = lambda: rng.normal(size=(n, d)) * 0.05  # noqa: E731
    male, female = base + 1.0 * g + noise(), base - 1.0 * g + noise()
    comps, ratio = sd.fit_subspace(male, female, k=2)
    assert comps.shape == (2, d)
    assert abs(float(comps[0] @ g)) > 0.99
    assert float(comps[0] @ g) > 0  # signed towards male - female
    assert ratio[0] > 0.9 and ratio[0] > ratio[1]
    assert np.allclose(comps @ comps.T, np.eye(2), atol=1e-5)


def test_pair_draw_and_counterfactuals_are_deterministic():
    pairs = sd.word_pair_list()
    assert pairs[:4] == list(sd.PRONOUN_PAIRS) and ("father", "mother") in pairs and len(pairs) >= 4 + 124
    drawn = sd.draw_pairs(pairs, 0.05)
    assert len(drawn) == round(0.05 * len(pairs)) and drawn == sd.draw_pairs(pairs, 0.05)
    assert set(drawn) <= set(pairs) and len(sd.draw_pairs(pairs, 0.001)) == 1 and sd.draw_pairs(pairs, 1.0) == pairs
    got = sd.counterfactual_pairs(
        ["She met HIS Father. Shepherd", "No gender here."], [("he", "she"), ("father", "mother")]
    )
    assert got == [
        ("He met HIS Father. Shepherd", "She met HIS Father. Shepherd", 0),
        ("She met HIS Father. Shepherd", "She met HIS Mother. Shepherd", 0),
    ]


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"k": 0}, "methods.sd.k"),
        ({"k": 1.5}, "methods.sd.k"),
        ({"ratio_of_pairs": 0}, "methods.sd.ratio_of_pairs"),
        ({"ratio_of_pairs": 1.2}, "methods.sd.ratio_of_pairs"),
        ({"ratio_of_pairs": "all"}, "methods.sd.ratio_of_pairs"),
        ({"kk": 1}, "methods.sd.kk"),
    ],
)
def test_bad_settings_name_the_key(settings, key):
    with pytest.raises(ConfigError, match=rf"^{key}: "):
        sd.SDSettings.from_dict({"kind": "sd", **settings}, "methods.sd")


# ------------------------------------------------------------------------------------ on tiny models


def test_fit_job_writes_folder_with_provenance(fitted, planted, gap_sentences):
    folder = fitted["bert"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([sd.SUBSPACE_FILE, sd.INFO_FILE])
    info = json.loads((folder / sd.INFO_FILE).read_text())
    assert info["settings"]["k"] == 1 and info["base_model"]["family"] == "mlm"
    assert info["counterfactual_pairs"] > 100 and info["sentences"] == 200 and info["pooling"] == "mean"
    assert set(info["library_versions"]) >= {"torch", "transformers", "lmbias"}
    assert not [p for p in folder.parent.iterdir() if p.name.endswith(".tmp")]
    # Deterministic: a refit gives the same bytes.
    again = folder.parent / "again"
    sd.fit_job(_spec("bert", planted["bert"]), gap_sentences, again, SETTINGS)
    assert (again / sd.SUBSPACE_FILE).read_bytes() == (folder / sd.SUBSPACE_FILE).read_bytes()


def _linear_gender_bert(folder, out, c: float = 1.0, seed: int = 0):
    """A tiny BERT whose final hidden states carry gender along one known direction g, and nothing else of it.

    Exact by construction: g is zero-mean and unit; every word, position and token-type embedding is
    projected orthogonal to g; each (male, female) word pair shares one base vector b (b + c g, b - c g), the
    career words get + c g, the home words - c g; every sub-layer's output projection is zero and every
    LayerNorm the identity map (gain 1, bias 0). A token's final state is then LN(x +- c g) = (x - mean(x) +- c g)
    / sigma with sigma the same for both signs, so a sentence and its counterfactual differ only along g.
    """
    import shutil

    shutil.copytree(folder, out)
    spec = _spec("bert", out)
    model, tok = load_model(spec)
    emb = model.bert.embeddings
    g = torch.randn(emb.word_embeddings.weight.shape[1], generator=torch.Generator().manual_seed(seed))
    g -= g.mean()
    g /= g.norm()
    ids = lambda w: tok(w, add_special_tokens=False)["input_ids"][0]  # noqa: E731
    with torch.no_grad():
        for table in (emb.word_embeddings.weight, emb.position_embeddings.weight, emb.token_type_embeddings.weight):
            table -= torch.outer(table @ g, g)
        E = emb.word_embeddings.weight
        for m, f in zip(MALE, FEMALE):
            base = E[ids(m)].clone()
            E[ids(m)], E[ids(f)] = base + c * g, base - c * g
        E[ids("him")] = E[ids("his")]  # pairs him-her and his-her share her
        for w in CAREER:
            E[ids(w)] += c * g
        for w in HOME:
            E[ids(w)] -= c * g
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        for layer in model.bert.encoder.layer:
            for dense in (layer.attention.output.dense, layer.output.dense):
                dense.weight.zero_()
                dense.bias.zero_()
    model.save_pretrained(out, safe_serialization=True)
    return spec, g


@pytest.fixture(scope="module")
def linear_bert(planted, gap_sentences, tmp_path_factory):
    root = tmp_path_factory.mktemp("sd-linear")
    spec, g = _linear_gender_bert(build_tiny_model("bert", root / "base", seed=0), root / "model")
    sd.fit_job(spec, gap_sentences, root / "sd", SETTINGS)
    return spec, g, root / "sd"


def _effect_size(model, tok, family):
    pooling = embeddings.DEFAULT_POOLING[family]

    def emb(words):
        return embeddings.sentence_embeddings(model, tok, [f"this is {w} ." for w in words], [pooling], family)[pooling]

    a, b = emb(CAREER), emb(HOME)
    return weat.effect_size(weat.associations(emb(MALE), a, b), weat.associations(emb(FEMALE), a, b))


def test_planted_gender_direction_is_found_and_its_seat_effect_removed(linear_bert):
    spec, g, fitted = linear_bert
    v, info = debias_projection.load_subspace(fitted)
    assert abs(float(v[0] @ g)) > 0.99, float(v[0] @ g)
    assert info["explained_variance_ratio"][0] > 0.9
    base, tok = load_method_model(spec, None)
    debiased, _ = load_method_model(spec, fitted)
    es_before, es_after = _effect_size(base, tok, "mlm"), _effect_size(debiased, tok, "mlm")
    assert es_before > 1.5, es_before
    assert abs(es_after) < 0.1 * es_before, (es_before, es_after)
    # With g itself as the subspace, male and female sentences embed identically: the effect is exactly gone.
    exact, _ = load_method_model(spec, None)
    debias_projection.install_projection(exact, g[None, :])
    assert abs(_effect_size(exact, tok, "mlm")) < 1e-3


@pytest.mark.parametrize("arch", list(FAMILY))
def test_projection_removes_the_subspace_from_sentence_embeddings(fitted, planted, arch):
    spec = _spec(arch, planted[arch])
    family = FAMILY[arch]
    base, tok = load_method_model(spec, None)
    debiased, _ = load_method_model(spec, fitted[arch])
    v, _ = debias_projection.load_subspace(fitted[arch])
    pooling = sd.SD_POOLING[family]
    texts = ["he is here .", "she is here .", "his father is a doctor .", "her mother is a nurse ."]
    after = embeddings.sentence_embeddings(debiased, tok, texts, [pooling], family)[pooling]
    before = embeddings.sentence_embeddings(base, tok, texts, [pooling], family)[pooling]
    assert np.abs(after @ v.numpy().T).max() < 1e-4 * np.abs(before).max()
    assert np.abs(before @ v.numpy().T).max() > 1e-2


@pytest.mark.parametrize("arch", list(FAMILY))
def test_logits_and_hidden_states_see_only_the_projection(fitted, planted, arch):
    """Both outputs.hidden_states[-1] (decoder_hidden_states for BART) and the logits come from the projected
    state; the logits equal the LM head applied to the base model's state minus its subspace component."""
    spec = _spec(arch, planted[arch])
    base, tok = load_method_model(spec, None)
    debiased, _ = load_method_model(spec, fitted[arch])
    v, _ = debias_projection.load_subspace(fitted[arch])
    enc = tok(["his father is a doctor .", "she is here ."], return_tensors="pt", padding=True)
    with torch.no_grad():
        out_b = base(**enc, output_hidden_states=True)
        out_d = debiased(**enc, output_hidden_states=True)
    name = "decoder_hidden_states" if arch == "bart" else "hidden_states"
    h = getattr(out_b, name)[-1]
    projected = h - (h @ v.T) @ v
    assert torch.allclose(getattr(out_d, name)[-1], projected, atol=1e-5)
    assert torch.allclose(getattr(out_d, name)[0], getattr(out_b, name)[0])  # earlier layers untouched
    head = base.get_output_embeddings()
    logits = head(projected) if arch != "bert" else base.cls(projected)
    if arch == "bart":
        logits = logits + base.final_logits_bias
    assert torch.allclose(out_d.logits, logits, atol=1e-4)
    assert not torch.allclose(out_d.logits, out_b.logits, atol=1e-3)


def test_load_method_model_folders(planted, fitted, tmp_path):
    spec = _spec("bert", planted["bert"])
    with pytest.raises(DataError, match="method model folder not found"):
        load_method_model(spec, tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=rf"{empty}: not a model folder of models.tiny-bert"):
        load_method_model(spec, empty)
    # A fine-tuned folder (as the trainer writes it) loads with the spec's family; without tokenizer files
    # the base's tokenizer is used.
    tuned = tmp_path / "tuned"
    model, tok = load_model(spec)
    with torch.no_grad():
        model.cls.predictions.bias += 1.0
    model.save_pretrained(tuned, safe_serialization=True)
    got, got_tok = load_method_model(spec, tuned)
    assert torch.equal(got.cls.predictions.bias, model.cls.predictions.bias)
    assert got_tok.get_vocab() == tok.get_vocab() and load_method_tokenizer(spec, tuned).get_vocab() == tok.get_vocab()
    tok.save_pretrained(tuned)
    assert load_method_model(spec, tuned)[1].get_vocab() == tok.get_vocab()


def test_cli_fit_sd(planted, gap_sentences, tmp_path, repo_root):
    entry = {"path": str(planted["gpt2"]), "family": "clm", "revision": "local"}
    out = tmp_path / "sd"
    cmd = [
        sys.executable,
        "-m",
        "lmbias.cli",
        "fit-sd",
        "--model-name",
        "tiny-gpt2",
        "--model-entry",
        json.dumps(entry),
        "--sentences",
        str(gap_sentences),
        "--out",
        str(out),
        "--settings",
        json.dumps({"ratio_of_pairs": 1.0, "limit_sentences": 50}),
    ]
    env = {"PYTHONPATH": str(repo_root / "src"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / sd.INFO_FILE).read_text())["pooling"] == "last"
    bad = subprocess.run(
        cmd[:-1] + [json.dumps({"k": 0}), "--settings-key", "methods.sd"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and "methods.sd.k: 0 is not an integer >= 1" in bad.stderr


def test_scoring_engine_sees_the_debiased_model(fitted, planted):
    """The engine's fast paths (BERT: base model + head on the gathered rows; GPT-2: batched sentence
    log-probabilities) give the debiased model's numbers, equal to its one-at-a-time full forward pass."""
    from lmbias.engine import oracles, scoring

    spec = _spec("bert", planted["bert"])
    base, tok = load_method_model(spec, None)
    debiased, _ = load_method_model(spec, fitted["bert"])
    cands = tuple(tok.convert_tokens_to_ids(["he", "she"]))
    reqs = [
        scoring.MaskedRequest(f"{tok.mask_token} is a doctor .", cands),
        scoring.MaskedRequest(f"{tok.mask_token} works at home .", cands),
    ]
    fast = np.array(scoring.masked_logprobs(debiased, tok, reqs))
    assert fast == pytest.approx(np.array(oracles.naive_masked_logprobs(debiased, tok, reqs)), abs=1e-4)
    assert not np.allclose(fast, np.array(scoring.masked_logprobs(base, tok, reqs)), atol=1e-3)

    spec = _spec("gpt2", planted["gpt2"])
    base, tok = load_method_model(spec, None)
    debiased, _ = load_method_model(spec, fitted["gpt2"])
    texts = ["he is a doctor .", "she works at home today ."]
    fast = scoring.sentence_logprobs(debiased, tok, texts)
    assert fast == pytest.approx(oracles.naive_sentence_logprobs(debiased, tok, texts), abs=1e-3)
    assert not np.allclose(fast, scoring.sentence_logprobs(base, tok, texts), atol=1e-3)
