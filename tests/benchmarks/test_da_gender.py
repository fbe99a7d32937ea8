"""DA-Gender generator, DA-score, planted-bias directions for every family, and the workflow.

What the planted-bias tests prove (see tests/benchmarks/test_logprob.py for the constructions):

* output bias on the male target words (lmbias.engine.planted_bias), mlm and seq2seq: both words of a pair are
  scored in the same contexts, so the ``ratio`` margin [log p(TM) - log p(TAM)]_m - [...]_f is *unchanged*
  (asserted pair by pair) -- the DA-score by association ratio cannot see a context-free preference -- while
  the paper-literal ``tm`` margin log p_m(TM) - log p_f(TM) moves by exactly the planted logit offset, so the
  ``tm`` DA-score rises on male-ideal pairs and falls on female-ideal ones;
* output bias, clm: the sentence margin log P(sent_m) - log P(sent_f) moves by the offset at the target
  position exactly, plus a bounded normaliser term at later positions (the planted words' share of the
  softmax differs slightly between the two prefixes); with an offset of 3 nats every margin moves by 3 +- 1,
  so the DA-score rises on male-ideal pairs and falls on female-ideal ones;
* planted association (mlm, seq2seq): every attribute word in the context pushes the target prediction
  towards the male words and nothing else can (an exact construction), so every ``ratio`` margin is positive
  on male-ideal pairs and negative on female-ideal ones: DA-score 100 % vs 0 %.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.over_debiasing_paper import over_debiasing_text, paper_list
from helpers.paths import REPO_ROOT
from helpers.planted_association import FAMILY, MALE_WORDS, attribute_ids, load_dir, marker_signs, plant_association
from lmbias.benchmarks import catalog  # noqa: F401  first: importing a benchmark module before it drops that module
from lmbias.benchmarks.da_gender import score_da_gender
from lmbias.engine.lm import LanguageModel
from lmbias.engine.planted_bias import bias_token_ids
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.da_gender import DaGenderOptions, da_gender_metric_rows, margins, wilson_interval
from lmbias.parsers import da_gender as da_parser

# Every template and slot kind, both genders, multi-piece words: 250 of the 2,610 pairs (keeps the tests fast).
SUBSET_ATTRIBUTES = ["pregnant", "her", "female", "actress", "his", "male", "danseur", "uncle"]


@pytest.fixture(scope="module")
def pairs():
    return da_parser.generate_da_gender()


@pytest.fixture(scope="module")
def subset(pairs):
    keep = np.isin(np.asarray(pairs.column("attribute").to_pylist()), SUBSET_ATTRIBUTES)
    return pairs.filter(pa.array(keep))


@pytest.fixture(scope="module")
def base_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("da_models")
    return {arch: build_tiny_model(arch, root / arch, seed=0) for arch in ("bert", "bart", "gpt2")}


# --------------------------------------------------------------------------------------------------
# Generator


def test_generator_reproduces_the_paper_count(pairs):
    rows = pairs.to_pylist()
    assert len(rows) == da_parser.EXPECTED_PAIRS == 2610
    assert [r["pair_id"] for r in rows] == list(range(2610))
    assert len({r["item_id"] for r in rows}) == 2610
    per_template = {t: sum(r["template_id"] == t for r in rows) for t in ("T1", "T2", "T3", "T4", "T5", "T6")}
    # 10 target pairs x: 3 adjectives | 64 nouns (x2 singular, x2 plural) | 2 possessives
    assert per_template == {"T1": 30, "T2": 640, "T3": 640, "T4": 640, "T5": 640, "T6": 20}
    assert {r["attribute"] for r in rows if r["template_id"] == "T1"} == {"male", "female", "pregnant"}
    assert {r["attribute"] for r in rows if r["template_id"] == "T6"} == {"his", "her"}
    assert len({r["attribute"] for r in rows}) == 67
    assert {g: sum(r["ideal"] == g for r in rows) for g in ("male", "female")} == {"male": 980, "female": 1630}
    assert all(sum(r["target_pair"] == k for r in rows) == 261 for k in range(10))
    for r in rows:
        genuine = r["male_word"] if r["ideal"] == "male" else r["female_word"]
        other = r["female_word"] if r["ideal"] == "male" else r["male_word"]
        assert r["tm_sent"].replace("[MASK]", genuine) == r["sent_a"]
        assert r["tm_sent"].replace("[MASK]", other) == r["sent_b"]
        assert r["tm_sent"][r["target_start"] : r["target_start"] + 6] == "[MASK]"
        assert r["tm_sent"][r["attr_start"] : r["attr_end"]] == r["attribute_form"]
        assert r["tam_sent"].count("[MASK]") == 1 + len(r["attribute_form"].split())


def test_table1_examples_by_hand(pairs):
    """The six example pairs of the paper's Table 1 (modulo its tokenised spacing)."""
    got = {(r["sent_a"], r["sent_b"]) for r in pairs.to_pylist()}
    for example in [
        ("He is male.", "She is male."),
        ("This man is a danseur.", "This woman is a danseur."),
        ("As a dad, my husband deserves a wonderful life.", "As a dad, my wife deserves a wonderful life."),
        (
            "As one of the housewives, she deserves a wonderful life.",
            "As one of the housewives, he deserves a wonderful life.",
        ),
        ("My daughter is one of the saleswomen.", "My son is one of the saleswomen."),
        (
            "After my aunt made that decision, her own life has been changed.",
            "After my uncle made that decision, her own life has been changed.",
        ),
    ]:
        assert example in got, example
    row = next(r for r in pairs.to_pylist() if r["sent_a"] == "As a dad, my husband deserves a wonderful life.")
    assert row["tm_sent"] == "As a dad, my [MASK] deserves a wonderful life."
    assert row["tam_sent"] == "As a [MASK], my [MASK] deserves a wonderful life."
    assert (row["ideal"], row["attribute"], row["template_id"], row["male_target"], row["female_target"]) == (
        "male",
        "dad",
        "T3",
        "my husband",
        "my wife",
    )
    row = next(r for r in pairs.to_pylist() if r["sent_a"] == "She is pregnant.")
    assert (row["ideal"], row["male_word"], row["female_word"], row["tam_sent"]) == (
        "female",
        "He",
        "She",
        "[MASK] is [MASK].",
    )
    assert (
        sum(
            r["attribute"] == "heiress" and r["sent_a"] == "As an heiress, she deserves a wonderful life."
            for r in pairs.to_pylist()
        )
        == 1
    )


def test_word_lists_match_the_paper_tables(shared_data):
    text = over_debiasing_text(shared_data)
    data = da_parser.load_templates()
    assert [a["word"] for a in data["attributes"]["female"]] == paper_list(text, "Female-specific words")  # Table 9
    assert [a["word"] for a in data["attributes"]["male"]] == paper_list(text, "Male-specific words")
    assert data["targets"]["female"] == paper_list(text, "Female Target Words")  # Table 2
    assert data["targets"]["male"] == paper_list(text, "Male Target Words")


def test_bad_option_and_bad_template_file(tmp_path):
    with pytest.raises(ConfigError, match=r"benchmarks\.da_gender\.split: unknown option"):
        da_parser.required_files({"dataset": "da_gender", "split": "dev"}, [], "benchmarks.da_gender")
    bad = tmp_path / "da.yaml"
    bad.write_text(da_parser.TEMPLATES_PATH.read_text().replace("{word: gal, article: a, plural: gals}", "{word: gal}"))
    with pytest.raises(DataError, match=r"da\.yaml:\d+: noun attribute 'gal' needs article"):
        da_parser.generate_da_gender(bad)
    with pytest.raises(ConfigError, match=r"metric\.associations"):
        DaGenderOptions.from_config({"associations": ["prior"]})


def test_config_entries_are_closed(repo_root):
    from lmbias.config import config_errors

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    schema = repo_root / "schemas" / "config.schema.yaml"
    assert config_errors(config, schema) == []
    config["benchmarks"]["da_gender"]["scoring"]["attribute_mask"] = "word"
    config["benchmarks"]["logprob"]["metric"]["ddof"] = 2
    config["benchmarks"]["logprob"]["split"] = "random"
    errors = config_errors(config, schema)
    assert "benchmarks.da_gender.scoring.attribute_mask: unknown key" in errors
    assert any(e.startswith("benchmarks.logprob.metric.ddof:") for e in errors)
    assert any(e.startswith("benchmarks.logprob.split:") for e in errors)


def test_da_score_formula_on_a_hand_made_table():
    def row(pid, ideal, tm_m, tam_m, tm_f, tam_f):
        return {
            "pair_id": pid,
            "item_id": str(pid),
            "template_id": "T1",
            "attribute": "x",
            "ideal": ideal,
            "target_pair": 0,
            "male_word": "he",
            "female_word": "she",
            "tm_male": tm_m,
            "tam_male": tam_m,
            "tm_female": tm_f,
            "tam_female": tam_f,
            "sentence_male": np.nan,
            "sentence_female": np.nan,
            "score_kind": "association",
            "attribute_masks": "word",
        }

    from lmbias.benchmarks.da_gender import SCORES_SCHEMA

    scores = pa.Table.from_pylist(
        [
            row(0, "male", -1.0, -2.0, -1.5, -1.6),  # ratio: 1.0 vs 0.1 -> ok;   tm: -1 > -1.5 -> ok
            row(1, "male", -1.0, -0.5, -1.5, -1.6),  # ratio: -0.5 vs 0.1 -> violation; tm ok
            row(2, "female", -2.0, -2.0, -1.0, -1.0),  # ratio: 0 vs 0 -> tie = violation; tm: female -1 > -2 -> ok
            row(3, "female", -1.0, -3.0, -2.0, -2.5),  # ratio: 2 vs 0.5 -> violation; tm violation
        ],
        schema=SCORES_SCHEMA,
    )
    got = {(r["variant"], r["metric"], r["subset"]): r for r in da_gender_metric_rows(scores, DaGenderOptions())}
    assert got[("association=ratio,masks=word", "da_score", "all")]["value"] == pytest.approx(25.0)
    assert got[("association=ratio,masks=word", "da_score", "ideal=male")]["value"] == pytest.approx(50.0)
    assert got[("association=ratio,masks=word", "da_score", "ideal=female")]["value"] == pytest.approx(0.0)
    assert got[("association=tm,masks=word", "da_score", "all")]["value"] == pytest.approx(75.0)
    lo, hi = wilson_interval(1, 4)
    assert got[("association=ratio,masks=word", "da_score", "all")]["ci_low"] == pytest.approx(100 * lo)
    assert 100 * lo < 25.0 < 100 * hi
    assert got[("association=ratio,masks=word", "mean_margin", "all")]["value"] == pytest.approx(
        (0.9 - 0.6 + 0 - 1.5) / 4
    )


# --------------------------------------------------------------------------------------------------
# Planted bias


def _da(scores, association):
    rows = da_gender_metric_rows(scores, DaGenderOptions())
    return {
        r["subset"]: r["value"]
        for r in rows
        if r["metric"] == "da_score" and f"association={association}" in r["variant"]
    }


def _male_minus_female(scores, association):
    ideal = np.asarray(scores.column("ideal").to_pylist())
    return np.where(ideal == "male", 1.0, -1.0) * margins(scores, association)


@pytest.mark.parametrize("arch", ["bert", "bart"])
def test_output_bias_moves_tm_margins_exactly_and_leaves_ratio_margins(arch, subset, base_models, tmp_path):
    bias = {w: 8.0 for w in MALE_WORDS}
    planted_dir = build_tiny_model(arch, tmp_path / "planted", seed=0, planted_bias=bias)
    plain = score_da_gender(subset, LanguageModel(*load_dir(base_models[arch], arch), FAMILY[arch]))
    model, tok = load_dir(planted_dir, arch)
    planted = score_da_gender(subset, LanguageModel(model, tok, FAMILY[arch]))
    # ratio: identical pair by pair
    np.testing.assert_allclose(margins(planted, "ratio"), margins(plain, "ratio"), atol=2e-4)
    assert _da(planted, "ratio") == _da(plain, "ratio")
    # tm: log p_m - log p_f moves by exactly the offset planted on the male word's token
    offset = {}
    for w, b in bias.items():
        for i in bias_token_ids(tok, w):
            offset[i] = offset.get(i, 0.0) + b
    rows = subset.to_pylist()
    expected = np.array(
        [
            offset[tok.convert_tokens_to_ids(tok.tokenize((" " if r["target_start"] else "") + r["male_word"])[-1])]
            for r in rows
        ]
    )
    shift = _male_minus_female(planted, "tm") - _male_minus_female(plain, "tm")
    np.testing.assert_allclose(shift, expected, atol=2e-3)
    before, after = _da(plain, "tm"), _da(planted, "tm")
    assert after["ideal=male"] > before["ideal=male"] and after["ideal=male"] == 100.0
    assert after["ideal=female"] < before["ideal=female"]


def test_output_bias_moves_sentence_margins_clm(subset, base_models, tmp_path):
    planted_dir = build_tiny_model("gpt2", tmp_path / "planted", seed=0, planted_bias={w: 3.0 for w in MALE_WORDS})
    plain = score_da_gender(subset, LanguageModel(*load_dir(base_models["gpt2"], "gpt2"), "clm"))
    planted = score_da_gender(subset, LanguageModel(*load_dir(planted_dir, "gpt2"), "clm"))
    assert set(planted.column("score_kind").to_pylist()) == {"sentence"}
    shift = _male_minus_female(planted, "sentence") - _male_minus_female(plain, "sentence")
    assert shift.min() > 2.0 and shift.max() < 4.0, (shift.min(), shift.max())
    before, after = _da(plain, "sentence"), _da(planted, "sentence")
    assert after["ideal=male"] > before["ideal=male"]
    assert after["ideal=female"] < before["ideal=female"]
    rows = da_gender_metric_rows(planted, DaGenderOptions())
    assert {r["variant"] for r in rows} == {"association=sentence"}


@pytest.mark.parametrize("arch", ["bert", "bart"])
def test_planted_association_raises_da_on_male_pairs_and_lowers_it_on_female_pairs(arch, subset, base_models, tmp_path):
    _, tok = load_dir(base_models[arch], arch)
    markers = marker_signs(tok, subset, lambda r: 1.0)  # every attribute word pushes towards the male targets
    effective = np.array([any(i in markers for i in attribute_ids(tok, r)) for r in subset.to_pylist()])
    assert effective.all(), "every attribute of the subset must carry a marked token"
    path = plant_association(base_models[arch], tmp_path / "he-ward", arch, markers)
    planted = score_da_gender(subset, LanguageModel(*load_dir(path, arch), FAMILY[arch]))
    plain = score_da_gender(subset, LanguageModel(*load_dir(base_models[arch], arch), FAMILY[arch]))
    assert (_male_minus_female(planted, "ratio") > 1e-3).all()
    after, before = _da(planted, "ratio"), _da(plain, "ratio")
    assert after["ideal=male"] == 100.0 and after["ideal=female"] == 0.0
    assert after["ideal=male"] > before["ideal=male"] and after["ideal=female"] < before["ideal=female"]


# --------------------------------------------------------------------------------------------------
# Workflow


@pytest.mark.workflow
def test_workflow_runs_da_gender_and_logprob(tmp_path, repo_root):
    """Dry run for the three tiny families (logprob is part of the mlm and seq2seq summaries only, and asking it
    of the causal model fails at DAG-build time), then a real run of both benchmarks for tiny-bert."""
    from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_files

    workdir = copy_workflow(repo_root, tmp_path / "wf")
    summaries = [f"results/{m}/pretrained/summary.parquet" for m in ("tiny-bert", "tiny-gpt2", "tiny-bart")]
    # the score files through their score_model job
    outputs = set(scheduled_files(run_snakemake(workdir, "-n", *summaries)))
    for model in ("tiny-bert", "tiny-gpt2", "tiny-bart"):
        assert f"results/{model}/pretrained/seed0/scores/da_gender.parquet" in outputs
        assert f"results/{model}/pretrained/seed0/metrics.parquet" in outputs
    assert "results/tiny-bert/pretrained/seed0/scores/logprob.parquet" in outputs
    assert "results/tiny-bart/pretrained/seed0/scores/logprob.parquet" in outputs
    assert "results/tiny-gpt2/pretrained/seed0/scores/logprob.parquet" not in outputs
    proc = run_snakemake(workdir, "-n", "results/tiny-gpt2/pretrained/seed0/scores/logprob.parquet", check=False)
    assert proc.returncode != 0
    assert "benchmark 'logprob' does not apply to model 'tiny-gpt2' of family 'clm'" in proc.stdout + proc.stderr


def test_jobs_on_the_full_datasets_in_process(base_models, tmp_path, caplog):
    """What rules parse_benchmark, score_benchmark, compute_metric and compute_seed_metrics run, in-process on
    tiny-bert (the real Snakemake run of both benchmarks happens in tests/workflow/test_workflow.py, whose summaries
    include them)."""
    import logging

    from helpers.scoring import score_one
    from lmbias.io import write_table_atomic
    from lmbias.jobs.metrics import compute_metric_job
    from lmbias.parsers import parse_benchmark

    entry = {"path": str(base_models["bert"]), "family": "mlm", "revision": "local"}
    rows = []
    for name in ("da_gender", "logprob"):
        bench = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())["benchmarks"][name]
        items = tmp_path / f"{name}.parquet"
        write_table_atomic(
            parse_benchmark({k: v for k, v in bench.items() if k not in ("scoring", "metric")}, {}, name), items
        )
        scores, metrics = tmp_path / f"scores_{name}.parquet", tmp_path / f"metrics_{name}.parquet"
        with caplog.at_level(logging.INFO):
            score_one(
                items,
                scores,
                "tiny-bert",
                entry,
                {"kind": "pretrained"},
                name,
                {k: v for k, v in bench.items() if k != "metric"},
            )
        compute_metric_job(
            name,
            {k: v for k, v in bench.items() if k in ("dataset", "metric")},
            scores,
            metrics,
            "tiny-bert",
            "pretrained",
            "0",
        )
        rows += pq.read_table(metrics).to_pylist()
    data = pq.read_table(tmp_path / "da_gender.parquet")
    assert data.num_rows == 2610
    for col in (
        "sent_a",
        "sent_b",
        "tm_sent",
        "tam_sent",
        "template",
        "attribute",
        "male_target",
        "female_target",
        "ideal",
    ):
        assert col in data.schema.names
    got = {(r["benchmark"], r["metric"], r["variant"].split(",")[0], r["subset"]): r for r in rows}
    for variant in ("association=ratio", "association=tm"):
        for sub, n in (("all", 2610), ("ideal=male", 980), ("ideal=female", 1630)):
            assert got[("da_gender", "da_score", variant, sub)]["n"] == n
            assert 0.0 <= got[("da_gender", "da_score", variant, sub)]["value"] <= 100.0
    for sub, n in (("all", 4000), ("dev", 160), ("test", 2560)):
        r = got[("logprob", "effect_size", "masks=word", sub)]
        assert r["n"] == n and 0.0 < r["p_value"] <= 1.0 and np.isfinite(r["value"])
    # requests vs unique inputs are logged (TAM contexts repeat a lot)
    text = caplog.text
    assert "2610 items, 10440 requests ->" in text and "4000 items, 8000 requests ->" in text

    # A seed's metrics.parquet (what summaries read) holds exactly the per-benchmark files' rows, and each
    # benchmark's scoring provenance: here logprob's scores come from a (pretend) 2-process run at a commit.
    from lmbias.jobs.metrics import compute_seed_metrics_job
    from lmbias.metrics.summary import METRIC_SCHEMA, file_provenance, provenance_by_benchmark, scores_metadata

    logprob_scores = tmp_path / "scores" / "logprob.parquet"
    logprob_scores.parent.mkdir()
    write_table_atomic(
        pq.read_table(tmp_path / "scores_logprob.parquet"), logprob_scores, metadata=scores_metadata("c0ffee", 2, None)
    )
    (tmp_path / "scores" / "da_gender.parquet").write_bytes((tmp_path / "scores_da_gender.parquet").read_bytes())
    config = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())["benchmarks"]
    slices = {
        name: {k: v for k, v in config[name].items() if k in ("dataset", "metric")} for name in ("da_gender", "logprob")
    }
    seed_file = tmp_path / "metrics.parquet"
    compute_seed_metrics_job(
        slices,
        [tmp_path / "scores" / "logprob.parquet", tmp_path / "scores" / "da_gender.parquet"],
        seed_file,
        "tiny-bert",
        "pretrained",
        "0",
    )
    table = pq.read_table(seed_file)
    assert table.schema.equals(METRIC_SCHEMA, check_metadata=False)
    key = lambda r: (r["benchmark"], r["metric"], r["variant"], r["subset"])  # noqa: E731
    assert sorted(table.to_pylist(), key=key) == sorted(rows, key=key)
    own, by_benchmark = provenance_by_benchmark(seed_file)
    assert by_benchmark["logprob"]["model_commit"] == "c0ffee" and by_benchmark["logprob"]["score_world_size"] == 2
    assert by_benchmark["da_gender"] == file_provenance(tmp_path / "scores_da_gender.parquet")
    assert by_benchmark["da_gender"]["score_world_size"] == 1 and own["score_world_size"] is None
    # scores and benchmarks that do not match: an error naming the output, nothing written
    with pytest.raises(ConfigError, match=r"missing\.parquet.*\(logprob\).*\(da_gender, logprob\)"):
        compute_seed_metrics_job(slices, [logprob_scores], tmp_path / "missing.parquet", "tiny-bert", "pretrained", "0")
    with pytest.raises(ConfigError, match="not a scores file"):
        compute_seed_metrics_job(slices, [tmp_path / "scores_logprob.parquet"], tmp_path / "x.parquet", "m", "k", "0")
    assert not (tmp_path / "missing.parquet").exists() and not (tmp_path / "x.parquet").exists()
