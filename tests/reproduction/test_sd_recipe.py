"""SentenceDebias as the DA-Gender authors ran it (mulinShi/DA-Gender): their pair list and its prefix, their
whitespace matching, their fit (transcribed here from their formulas), their normalise-project-normalise
application to logits and to SEAT's pooled embeddings, the options' validation, and the engine's import
direction (the engine applies a fitted subspace and never imports the training package)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from lmbias.engine import debias_projection, embeddings
from lmbias.engine.debias_projection import INFO_FILE, install_projection
from lmbias.engine.method_folders import load_method_model
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.methods import resolution
from lmbias.training import sentence_debias as sd

FAMILY = {"bert": "mlm", "gpt2": "clm", "bart": "seq2seq"}
PRONOUNS = {"he", "she", "him", "his", "her", "hers", "himself", "herself"}
#: Their pooling per family (bert_sent_debias.py: mean over 128 padded positions; gpt2: the last state; bart:
#: the decoder's mean) -- also the SEAT poolings their evaluation reads.
THEIR_POOLING = {"bert": "mean_padded", "gpt2": "last", "bart": "decoder_mean"}
DAGENDER = {
    "pair_list": "dagender",
    "pair_selection": "prefix",
    "pair_matching": "whitespace_case_sensitive",
    "precision": "fp32",
    "application": "normalise_project_normalise",
}
TEXTS = [
    "my father is a doctor and my mother is a nurse .",
    "the prince met the princess at the castle .",
    "her nephew and his niece left early .",
    "Father and the manager talked to the wizard .",
    "the baron , a hero , loved his wife and his husband jokes .",
    "the goddess and the god met the shepherd .",
    "nothing gendered here .",
]


@pytest.fixture(scope="module")
def cds_files(shared_data):
    folder = shared_data / "cds"
    return {"words": folder / "cda_default_pairs.json", "names": folder / "names_pairs_1000_scaled.json"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """{arch: (spec, base model, tokenizer)} of tiny models (random weights, fixed seed)."""
    root = tmp_path_factory.mktemp("sd-recipe")
    out = {}
    for arch in FAMILY:
        folder = build_tiny_model(arch, root / arch, seed=0)
        spec = model_spec(f"tiny-{arch}", {"path": str(folder), "family": FAMILY[arch], "revision": "local"})
        model, tok = load_model(spec)
        out[arch] = (spec, model, tok)
    return out


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def _their_debias(h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Their per-vector ``emb /= norm; emb = dropspace(emb, gender_dir); emb /= norm`` (dropspace: u minus the
    sum over rows V_i of (V_i . u / |V_i|^2) V_i)."""
    u = _unit(h.double())
    u = u - sum(((u @ vi) / (vi @ vi))[..., None] * vi for vi in v.double())
    return _unit(u).float()


def _direction(hidden: int, seed: int) -> torch.Tensor:
    v = torch.randn(1, hidden, generator=torch.Generator().manual_seed(seed))
    return v / v.norm()


def _fitted_folder(tmp_path, v, application):
    """A fitted folder as fit_job writes it (components + sentence_debias.json with the settings)."""
    sd.save_subspace(
        tmp_path,
        v.numpy(),
        {"application": application, "settings": {**sd.SDSettings().to_dict(), "application": application}},
    )
    return tmp_path


# --------------------------------------------------------------------------- (a) pair list and matching


def test_dagender_pair_list_is_their_1128_pairs_and_the_bert_prefix_has_no_pronoun(cds_files):
    pairs = sd.dagender_pair_list(cds_files["words"], cds_files["names"])
    words = [tuple(p) for p in json.loads(cds_files["words"].read_text())]
    names = [tuple(p) for p in json.loads(cds_files["names"].read_text())]
    extras = [("guy", "gal"), ("his", "her"), ("himself", "herself"), ("guys", "gals")]
    assert len(pairs) == 1128 and pairs == words + names + extras
    assert pairs[0] == ("gods", "goddesses") and pairs[124] == ("james", "barbara")
    bert = sd.prefix_pairs(pairs, 0.05)  # int(56.4)
    assert bert == pairs[:56] and not {w for p in bert for w in p} & PRONOUNS
    bart = sd.prefix_pairs(pairs, 0.07)  # int(78.96)
    assert len(bart) == 78 and not {w for p in bart for w in p} & PRONOUNS and pairs[86] == ("he", "she")
    assert sd.prefix_pairs(pairs, 1.0) == pairs  # GPT-2
    settings = sd.SDSettings.from_dict({**DAGENDER, "ratio_of_pairs": 0.05})
    assert sd.select_pairs(settings, cds_files) == (pairs, pairs[:56])


def test_dagender_pair_files_missing_or_malformed_name_the_file(cds_files, tmp_path):
    with pytest.raises(DataError, match="nope.json"):
        sd.dagender_pair_list(tmp_path / "nope.json", cds_files["names"])
    bad = tmp_path / "bad.json"
    bad.write_text('[["a", "b"], ["c"]]')
    with pytest.raises(DataError, match="bad.json"):
        sd.dagender_pair_list(cds_files["words"], bad)


def test_whitespace_matching_builds_their_sentence_pairs():
    """Per text and pair (m, f) in list order: f present -> (f replaced by m, text); m present -> (text, m
    replaced by f); exact tokens of split(" "), so "Father" and "mother," do not match."""
    texts = ["His father met her mother .", "the prince , his nephew and the princess", "Father and mother, hi"]
    got = sd.whitespace_counterfactual_pairs(texts, [("father", "mother"), ("prince", "princess"), ("nephew", "niece")])
    assert got == [
        ("His father met her father .", "His father met her mother .", 0),
        ("His father met her mother .", "His mother met her mother .", 0),
        ("the prince , his nephew and the prince", "the prince , his nephew and the princess", 1),
        ("the prince , his nephew and the princess", "the princess , his nephew and the princess", 1),
        ("the prince , his nephew and the princess", "the prince , his niece and the princess", 1),
    ]


# --------------------------------------------------------------------------- (b) their fit, transcribed


def _their_bert_fit(model, tok, texts, pairs):
    """bert_sent_debias.py from its formulas: define_pairs (female, male); their sentence pairs; embeddings
    of input_pipeline (encode with [CLS]/[SEP], pad post to 128 with pad id, mask = ids > 0) averaged over
    all 128 positions of hidden_states[-1], one sentence at a time in float32; rows normalised, centred on
    their pair's mean, stacked; sklearn PCA's first component (column-centred SVD)."""
    define_pairs = [(f, m) for m, f in pairs]
    sent_pairs = []
    for sent in texts:
        ws = sent.split(" ")
        for female, male in define_pairs:
            if female in ws:
                sent_pairs.append((sent, " ".join(male if w == female else w for w in ws)))
            if male in ws:
                sent_pairs.append((" ".join(female if w == male else w for w in ws), sent))

    def embed(sent):
        ids = tok.encode(sent, add_special_tokens=True)[:128]
        ids = torch.tensor([ids + [tok.pad_token_id] * (128 - len(ids))])
        with torch.no_grad():
            hidden = model(ids, attention_mask=(ids > 0).long(), output_hidden_states=True).hidden_states[-1]
        return hidden.mean(1)[0].double().numpy()

    f = np.stack([embed(s) for s, _ in sent_pairs])
    m = np.stack([embed(s) for _, s in sent_pairs])
    f /= np.linalg.norm(f, axis=-1, keepdims=True)
    m /= np.linalg.norm(m, axis=-1, keepdims=True)
    mean = (f + m) / 2
    x = np.concatenate([f - mean, m - mean])
    _, _, vt = np.linalg.svd(x - x.mean(0), full_matrices=False)
    return vt[0], len(sent_pairs)


def test_our_fit_with_the_dagender_options_gives_their_direction(tiny, cds_files):
    _, model, tok = tiny["bert"]
    pairs = sd.prefix_pairs(sd.dagender_pair_list(cds_files["words"], cds_files["names"]), 0.05)
    theirs, n_pairs = _their_bert_fit(model, tok, TEXTS, pairs)
    settings = sd.SDSettings.from_dict({**DAGENDER, "ratio_of_pairs": 0.05, "fit_pooling": "mean_padded"})
    ours, info = sd.fit_sentence_debias(model, tok, "mlm", TEXTS, settings, pair_files=cds_files)
    assert info["counterfactual_pairs"] == n_pairs == 15 and info["pooling"] == "mean_padded" and info["pad_to"] == 128
    assert info["precision_used"] == "fp32" and info["word_pairs_total"] == 1128 and len(info["word_pairs_used"]) == 56
    assert abs(float(ours[0] @ theirs)) > 1 - 1e-5, float(ours[0] @ theirs)
    # The project's default recipe (random draw, word matching, real-token mean) is another direction.
    default, _ = sd.fit_sentence_debias(model, tok, "mlm", TEXTS, sd.SDSettings.from_dict({"ratio_of_pairs": 1.0}))
    assert abs(float(default[0] @ theirs)) < 0.999


# ----------------------------------------------------------------- (c) logits under their application


@pytest.mark.parametrize("arch", list(FAMILY))
def test_normalise_project_normalise_logits_equal_the_direct_computation(tiny, arch, tmp_path):
    spec, base, tok = tiny[arch]
    hidden = base.config.hidden_size if arch != "gpt2" else base.config.n_embd
    v = _direction(hidden, seed=3)
    debiased, _ = load_method_model(spec, _fitted_folder(tmp_path, v, "normalise_project_normalise"))
    enc = tok(["his father is a doctor .", "she is here ."], return_tensors="pt", padding=True)
    with torch.no_grad():
        got = debiased(**enc).logits
        h = base.base_model(**enc).last_hidden_state  # BART: the decoder's last hidden state
        state = _their_debias(h, v)
        if arch == "bert":
            expected = base.cls(state)
        else:
            expected = base.lm_head(state)
            if arch == "bart":
                expected = expected + base.final_logits_bias
        projected = base.get_output_embeddings()(h - (h @ v.T) @ v)
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()
    if arch == "gpt2":  # a linear head: the projected logits divided by the projected unit state's norm
        norm = (_unit(h) - (_unit(h) @ v.T) @ v).norm(dim=-1, keepdim=True)
        assert torch.allclose(got, projected / h.norm(dim=-1, keepdim=True) / norm, atol=1e-5)
    assert not torch.allclose(got, base(**enc).logits, atol=1e-3)


# ------------------------------------------------------------------ (d) SEAT's pooled embeddings


@pytest.mark.parametrize("arch", list(FAMILY))
def test_seat_embeddings_normalise_project_normalise_the_pooled_vector(tiny, arch, tmp_path):
    """As their seat_v1.py: pool the unprojected final states, then normalise, project, normalise the
    pooled vector (not the mean of per-token debiased states)."""
    spec, base, tok = tiny[arch]
    family, pooling = FAMILY[arch], THEIR_POOLING[arch]
    hidden = base.config.hidden_size if arch != "gpt2" else base.config.n_embd
    v = _direction(hidden, seed=4)
    debiased, _ = load_method_model(spec, _fitted_folder(tmp_path, v, "normalise_project_normalise"))
    texts = ["this is a man .", "this is a woman here .", "career"]
    got = embeddings.sentence_embeddings(debiased, tok, texts, [pooling], family, batch_size=2)[pooling]

    rows, per_token = [], []
    for text in texts:
        ids = tok(text)["input_ids"]
        width = 128 if pooling == "mean_padded" else len(ids)
        input_ids = torch.tensor([ids + [tok.pad_token_id] * (width - len(ids))])
        with torch.no_grad():
            h = base.base_model(
                input_ids=input_ids, attention_mask=(torch.arange(width) < len(ids)).long()[None]
            ).last_hidden_state[0]
        pooled = h[-1] if pooling == "last" else h.mean(0)
        rows.append(_their_debias(pooled[None], v)[0])
        per_token.append(_their_debias(h, v).mean(0))
    expected = torch.stack(rows).numpy()
    assert np.allclose(got, expected, atol=1e-5), np.abs(got - expected).max()
    assert np.allclose(embeddings.naive_sentence_embeddings(debiased, tok, texts, pooling, family), expected, atol=1e-5)
    if pooling != "last":  # pooling the per-token debiased states would be something else
        assert not np.allclose(got, torch.stack(per_token).numpy(), atol=1e-3)
    # The logits path is untouched by the embedding pass (the hook is active again afterwards).
    assert debiased.base_model._sentence_debias.active


# ----------------------------------------------------------------------- fitted folder, end to end


def test_fit_job_records_the_options_and_scoring_reads_them_back(tiny, cds_files, tmp_path):
    spec, base, tok = tiny["gpt2"]
    sentences = tmp_path / "sentences.parquet"
    pq.write_table(pa.table({"text": TEXTS}), sentences)
    out = tmp_path / "sd"
    settings = {"kind": "sd", **DAGENDER, "ratio_of_pairs": 0.05}
    sd.fit_job(spec, sentences, out, settings, key="methods.sd-dagender", pair_files=cds_files)
    info = json.loads((out / INFO_FILE).read_text())
    assert info["application"] == "normalise_project_normalise" == info["settings"]["application"]
    assert info["settings"]["precision"] == "fp32" == info["precision_used"] and info["pooling"] == "last"
    assert info["settings"]["pair_list"] == "dagender" and set(info["pair_files"]) == {"names", "words"}
    v, _ = debias_projection.load_subspace(out)
    debiased, _ = load_method_model(spec, out)
    enc = tok(["my father is here ."], return_tensors="pt")
    with torch.no_grad():
        expected = base.lm_head(_their_debias(base.base_model(**enc).last_hidden_state, v))
        assert torch.allclose(debiased(**enc).logits, expected, atol=1e-5)


# --------------------------------------------------------------------------------- (e) validation


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"application": "nPn"}, "application"),
        ({"pair_list": "lu"}, "pair_list"),
        ({"pair_selection": "first"}, "pair_selection"),
        ({"pair_matching": "exact"}, "pair_matching"),
        ({"fit_pooling": "average"}, "fit_pooling"),
        ({"pad_to": 0}, "pad_to"),
        ({"precision": "fp64"}, "precision"),
    ],
)
def test_bad_option_values_name_the_key(settings, key):
    with pytest.raises(ConfigError, match=rf"^methods\.sd-x\.{key}: "):
        sd.SDSettings.from_dict({"kind": "sd", **settings}, "methods.sd-x")


def test_options_that_do_not_fit_the_family_or_the_files_name_the_key(tiny, cds_files, tmp_path):
    _, model, tok = tiny["bert"]
    with pytest.raises(ConfigError, match=r"^methods\.sd-x\.fit_pooling: "):
        sd.SDSettings.from_dict({"fit_pooling": "last"}).pooling("mlm", "methods.sd-x")
    entry = {"kind": "sd", "corpus": "c.parquet", "fit_pooling": "decoder_mean"}
    with pytest.raises(ConfigError, match=r"^methods\.sd-x\.fit_pooling: "):
        resolution.resolve_method("tiny-bert", {"family": "mlm", "training": {"ratio_of_pairs": 0.05}}, "sd-x", entry)
    resolved = resolution.resolve_method(
        "tiny-bert",
        {"family": "mlm"},
        "sd-x",
        {**entry, **DAGENDER, "fit_pooling": "mean_padded", "ratio_of_pairs": 0.05},
    )
    assert (
        resolved["sd_settings"]["pair_list"] == "dagender" and resolved["sd_settings"]["fit_pooling"] == "mean_padded"
    )
    # One entry for every family: {family: pooling} resolves to this model's (or its default) at DAG build.
    per_family = {**entry, "fit_pooling": {"mlm": "mean_padded", "clm": "last", "seq2seq": "decoder_mean"}}

    def resolve(family):
        return resolution.resolve_method("m", {"family": family}, "sd-x", {**per_family, "ratio_of_pairs": 1.0})

    assert [resolve(f)["sd_settings"]["fit_pooling"] for f in ("mlm", "clm", "seq2seq")] == [
        "mean_padded",
        "last",
        "decoder_mean",
    ]
    assert (
        "fit_pooling"
        not in resolution.resolve_method(
            "m", {"family": "clm"}, "sd-x", {**entry, "fit_pooling": {"mlm": "mean_padded"}, "ratio_of_pairs": 1.0}
        )["sd_settings"]
    )
    with pytest.raises(ConfigError, match=r"^methods\.sd-x\.fit_pooling\.bert: "):
        resolution.resolve_method(
            "m", {"family": "mlm"}, "sd-x", {**entry, "fit_pooling": {"bert": "mean"}, "ratio_of_pairs": 1.0}
        )
    with pytest.raises(ConfigError, match=r"^methods\.sd-x\.fit_pooling\.seq2seq: "):
        sd.SDSettings.from_dict({"fit_pooling": {"seq2seq": "mean_padded"}}, "methods.sd-x")
    assert sd.SDSettings.from_dict({"fit_pooling": {"mlm": "mean_padded"}}).pooling("clm") == "last"
    dagender = sd.SDSettings.from_dict({**DAGENDER, "ratio_of_pairs": 0.05})
    with pytest.raises(ConfigError, match=r"^methods\.sd-x\.pair_list: dagender needs"):
        sd.fit_sentence_debias(model, tok, "mlm", TEXTS, dagender, key="methods.sd-x")
    with pytest.raises(ConfigError, match=r"^methods\.sd-x\.ratio_of_pairs: "):
        sd.select_pairs(sd.SDSettings.from_dict({**DAGENDER, "ratio_of_pairs": 0.0005}), cds_files, key="methods.sd-x")
    folder = _fitted_folder(tmp_path, _direction(64, 0), "project")
    info = json.loads((folder / INFO_FILE).read_text())
    (folder / INFO_FILE).write_text(json.dumps({**info, "application": "squash"}))
    with pytest.raises(DataError, match=rf"{INFO_FILE}: application 'squash'"):
        load_method_model(tiny["bert"][0], folder)
    with pytest.raises(DataError, match="application"):
        install_projection(model, _direction(64, 0), "squash")


# ------------------------------------------------------------------------------ (f) import direction


def test_the_engine_imports_no_training_module(repo_root):
    code = (
        "import sys; sys.path.insert(0, 'src');"
        "import lmbias.engine.models, lmbias.engine.embeddings, lmbias.engine.scoring, lmbias.jobs.scoring;"
        "import lmbias.engine.tiny;"  # not debias_projection: it imports torch (3 s); the source check covers it
        "print(sorted(m for m in sys.modules if m == 'lmbias.training' or m.startswith('lmbias.training.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    # Nor inside a function (imported on first call): pyproject.toml's import-linter contract "The engine names no
    # training module" (tests/project/test_import_contracts.py, .ci/lint).
