"""WinoBias extensions of Manela et al. 2021: Online Skewness Mitigation (-O), Alice & Bob, competency.

What the planted-bias tests prove:

* -O: a planted *output* bias b on "he/him/his" adds b to the male form's logit wherever it is read. For
  masked and seq2seq models the pronoun is one token read at one position, so log p(he) - log p(she) rises
  by exactly b in the sentence *and* in its masked-professions prior; the -O log-odds (their difference)
  are therefore exactly those of the unplanted model: Online Skewness normalisation removes all of the
  planted skew (not just some). For causal models the pronoun term cancels the same way, but the later
  tokens' normalisers see the bias too, so the cancellation is only approximate (|residual| < 0.05 nats
  here, against 8 nats planted).
* Alice & Bob: a he-planted model says "he" for every name, so F1 with male positive is that of always
  answering male (high) and female F1 is 0; the she-planted model mirrors it.
* Competency: with professions -> "person", a he-planted model assigns no female pronoun in any class, a
  she-planted model only female ones.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from helpers.paths import FIXTURES
from lmbias.benchmarks import winobias as wb
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.winobias import (
    WinoBiasOptions,
    conditions_in,
    read_competency_labels,
    winobias_metric_rows,
)
from lmbias.parsers.winobias import parse_winobias, winobias_files

FIXTURE_LABELS = FIXTURES / "winobias_competency_small.csv"
PLANTS = {None: None, "he": {"he": 8.0, "him": 8.0, "his": 8.0}, "she": {"she": 8.0, "her": 8.0}}
EXTRA_IDS = {"dev-t1-anti-0162", "dev-t1-pro-0373", "dev-t2-pro-0072", "dev-t2-pro-0176", "dev-t1-pro-0001"}
BASE = "cutoff=0.1,probability=pair"


@pytest.fixture(scope="module")
def all_items(shared_data):
    d = shared_data / "winobias"
    return parse_winobias({n: d / n for n in winobias_files("dev", [1, 2])})


@pytest.fixture(scope="module")
def items(all_items):
    """Every 40th dev line, the lines of the fixture labels file and a few lines with unusual spans."""
    labelled = {line.split(",")[0] for line in FIXTURE_LABELS.read_text().splitlines()[1:]}
    ids = all_items.column("item_id").to_pylist()
    keep = [i for i, item_id in enumerate(ids) if i % 40 == 0 or item_id in labelled | EXTRA_IDS]
    return all_items.take(keep)


@pytest.fixture(scope="module")
def scored(tmp_path_factory, items):
    """scored(arch, plant, **scoring) -> scores table (cached per arguments)."""
    root = tmp_path_factory.mktemp("tiny")
    models, cache = {}, {}

    def model(arch, plant):
        if (arch, plant) not in models:
            out = build_tiny_model(arch, root / f"{arch}-{plant}", seed=0, planted_bias=PLANTS[plant])
            spec = model_spec(f"{arch}-{plant}", {"path": str(out), "family": FAMILY_OF[arch], "revision": "local"})
            models[(arch, plant)] = load_model(spec)
        return models[(arch, plant)]

    def get(arch, plant=None, **scoring):
        key = (arch, plant, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in scoring.items())))
        if key not in cache:
            m, tok = model(arch, plant)
            cache[key] = wb.score_winobias(items, LanguageModel(m, tok, FAMILY_OF[arch]), scoring)
        return cache[key]

    return get


def _logodds(scores, prefix="", prior=None):
    lm = scores.column(f"{prefix}logp_male").to_numpy() - scores.column(f"{prefix}logp_female").to_numpy()
    if prior:
        lm = lm - (scores.column(f"{prior}_logp_male").to_numpy() - scores.column(f"{prior}_logp_female").to_numpy())
    return lm


def _rows(scores, **opts):
    out = {}
    for r in winobias_metric_rows(scores, WinoBiasOptions(bootstrap=0, **opts)):
        out[(r["metric"], r["variant"], r["subset"])] = r
    return out


# -- rewrites -----------------------------------------------------------------------------------


def _row(all_items, item_id):
    return next(r for r in all_items.to_pylist() if r["item_id"] == item_id)


def test_rewrites_of_real_lines(all_items):
    row = _row(
        all_items, "dev-t1-pro-0001"
    )  # The developer argued with the designer because he did not like the design.
    got = {c: wb.rewrite(row, c) for c in wb.CONDITIONS}
    assert got["professions_masked"] == {
        "masked": "[MASK] argued with [MASK] because [MASK] did not like the design.",
        "mask_index": 2,
        "text": "The person argued with the person because he did not like the design.",
    }
    assert got["referent_masked"]["masked"] == "[MASK] argued with the designer because [MASK] did not like the design."
    assert got["referent_masked"]["mask_index"] == 1
    assert got["referent_masked"]["text"] == "The person argued with the designer because he did not like the design."
    # gold pronoun "he": the referent (the developer) becomes Bob, the other entity Alice
    assert got["names"]["text"] == "Bob argued with Alice because he did not like the design."
    assert got["names"]["masked"] == "Bob argued with Alice because [MASK] did not like the design."
    assert got["person"]["text"] == "The person argued with the person because he did not like the design."

    anti = _row(all_items, "dev-t1-anti-0001")  # same line with "she": the developer is now Alice
    assert wb.rewrite(anti, "names")["text"].startswith("Alice argued with Bob because she")
    # referent span without its determiner ("the housekeeper 's car"): the noun phrase still takes "the"
    odd = _row(all_items, "dev-t1-anti-0162")
    assert (
        wb.rewrite(odd, "referent_masked")["masked"]
        == "The mechanic fixed [MASK] 's car and then [MASK] wrote a thankful note."
    )
    # a repeated occupation is masked and becomes "person", but the names replace the two entities only
    rep = _row(all_items, "dev-t1-pro-0373")
    assert wb.rewrite(rep, "professions_masked")["masked"] == "[MASK] hired [MASK] because [MASK] old [MASK] left town."
    assert wb.rewrite(rep, "professions_masked")["mask_index"] == 2
    assert wb.rewrite(rep, "names")["text"] == "Bob hired Alice because his old tailor left town."
    third = _row(all_items, "dev-t2-pro-0072")  # a third occupation ("the manager") stays in the names version
    assert wb.rewrite(third, "names")["text"] == "Bob hated Alice and reported her to the manager."
    assert wb.rewrite(third, "person")["text"] == "The person hated the person and reported her to the person."


def test_every_dev_line_rewrites_under_every_condition(all_items):
    subs = wb.load_substitutions()
    for row in all_items.to_pylist():
        for cond in wb.CONDITIONS:
            out = wb.rewrite(row, cond, substitutions=subs)
            assert out["masked"].count("[MASK]") >= 1
            if cond != "names":
                assert row["referent_profession"] not in out["masked"].split(), (row["item_id"], cond)


def test_name_pairs_round_robin_and_options(scored, items):
    t = scored("bert", None, conditions=["names"], name_pairs=2)
    assert conditions_in(t) == ["names"]
    lines = items.column("line").to_pylist()
    for line, male, female in zip(lines, t.column("name_male").to_pylist(), t.column("name_female").to_pylist()):
        assert (female, male) == (("Alice", "Bob") if line % 2 == 1 else ("Mary", "John"))
    with pytest.raises(ConfigError, match="conditions"):
        wb.scoring_options({"conditions": ["names", "nope"]})
    with pytest.raises(ConfigError, match=r"benchmarks\.winobias\.scoring\.condition: unknown key"):
        wb.scoring_options({"condition": ["names"]})
    with pytest.raises(ConfigError, match=r"scoring\.conditions: .* has non-unique elements"):
        wb.scoring_options({"conditions": ["names", "names"]})
    with pytest.raises(ConfigError, match="name_pairs"):
        wb.scoring_options({"name_pairs": 0})


# -- Online Skewness Mitigation ----------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["bert", "bart", "gpt2"])
def test_online_skew_removes_planted_output_bias(arch, scored):
    plain, planted = scored(arch), scored(arch, "he")
    raw = _logodds(planted) - _logodds(plain)
    exact = arch != "gpt2"
    if exact:
        np.testing.assert_allclose(raw, 8.0, atol=1e-3)
    else:
        assert 7.5 < raw.mean() < 8.1
    for prior in ("prior_all", "prior_referent"):
        residual = _logodds(planted, prior=prior) - _logodds(plain, prior=prior)
        assert np.abs(residual).max() < (1e-3 if exact else 0.05), (prior, np.abs(residual).max())

    r_plain, r_planted = _rows(plain), _rows(planted)
    for t in (1, 2):
        assert r_planted[("skew_signed", BASE, f"type{t}")]["value"] > 40  # the planted skew, before -O
        if exact:
            for v in ("all_professions", "referent"):
                key = ("skew_signed", f"{BASE},online_skew={v}", f"type{t}")
                a, b = r_planted[key]["value"], r_plain[key]["value"]
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b), key


def test_online_skew_formula_on_hand_made_scores():
    # Four items; the prior pushes "he" by log 4 in item 0: normalised P(he) = (0.8/0.2) / 4 -> 0.5 vs 0.5.
    recs = []
    for i, (g, s, pm, pf, qm, qf) in enumerate(
        [
            ("male", "pro", 0.8, 0.2, 0.8, 0.2),  # prior as confident as the sentence: -O says nothing (dropped)
            ("female", "pro", 0.4, 0.6, 0.8, 0.2),  # prior male-leaning: -O turns it female (correct)
            ("male", "anti", 0.6, 0.4, 0.2, 0.8),  # prior female-leaning: -O keeps male (correct)
            ("female", "anti", 0.3, 0.7, 0.5, 0.5),  # neutral prior: unchanged
        ]
    ):
        recs.append(
            {
                "item_id": f"i{i}",
                "type": 2,
                "stereotype": s,
                "gold_gender": g,
                "male_form": "he",
                "female_form": "she",
                "logp_male": math.log(pm),
                "logp_female": math.log(pf),
                "score_kind": "token_logprob",
                "prior_all_logp_male": math.log(qm),
                "prior_all_logp_female": math.log(qf),
            }
        )
    t = pa.Table.from_pylist(recs, schema=wb.scores_schema(["professions_masked"]))
    rows = _rows(t)
    o = f"{BASE},online_skew=all_professions"
    assert rows[("kept_fraction", o, "type2/pro")]["value"] == 0.5  # item 0 has |dP| = 0 after -O
    assert rows[("f1_female", o, "type2/pro")]["value"] == 100.0
    assert rows[("f1_male", o, "type2/anti")]["value"] == 100.0
    assert rows[("f1_female", o, "type2/anti")]["value"] == 100.0
    # without -O: item 1 is predicted female? 0.4 < 0.6 yes; item 0 male: all correct on pro as well
    assert rows[("kept_fraction", BASE, "type2/pro")]["value"] == 1.0
    # the referent prior is not in these scores: asking for it names the option and the scoring fix
    with pytest.raises(ConfigError, match="online_skew.*referent_masked.*scoring.conditions"):
        winobias_metric_rows(t, WinoBiasOptions(bootstrap=0, online_skew=("none", "referent")))
    with pytest.raises(ConfigError, match="alice_bob"):
        winobias_metric_rows(t, WinoBiasOptions(bootstrap=0, alice_bob=True))


def test_extra_conditions_leave_the_plain_rows_unchanged(scored):
    only = [r for r in winobias_metric_rows(scored("bert", None, conditions=[]), WinoBiasOptions(bootstrap=30))]
    full = [r for r in winobias_metric_rows(scored("bert"), WinoBiasOptions(bootstrap=30)) if r["variant"] == BASE]
    assert only == full
    assert {r["variant"] for r in winobias_metric_rows(scored("bert"), WinoBiasOptions(bootstrap=0))} == {
        BASE,
        f"{BASE},online_skew=all_professions",
        f"{BASE},online_skew=referent",
        f"{BASE},entities=names",
        f"{BASE},entities=names,online_skew=all_professions",
        f"{BASE},entities=person",
    }


def test_metric_options_are_checked():
    with pytest.raises(ConfigError, match="online_skew"):
        WinoBiasOptions.from_config({"online_skew": ["none", "masked"]})
    with pytest.raises(ConfigError, match="online_skew"):
        WinoBiasOptions.from_config({"online_skew": "none"})
    with pytest.raises(ConfigError, match="alice_bob"):
        WinoBiasOptions.from_config({"alice_bob": "yes"})
    opts = WinoBiasOptions.from_config({"online_skew": ["none", "referent"], "competency_labels": "x.csv"})
    assert opts.online_skew == ("none", "referent") and opts.competency_labels == "x.csv"


# -- Alice & Bob -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["bert", "bart", "gpt2"])
def test_alice_bob_on_planted_models(arch, scored):
    names = f"{BASE},entities=names"
    he_scores = scored(arch, "he")
    he, she = _rows(he_scores), _rows(scored(arch, "she", conditions=["names", "person"]))
    types = np.asarray(he_scores.column("type").to_pylist())
    clean = np.asarray(he_scores.column("other_pronouns").to_pylist()) == 0
    assert not clean.all()  # dev-t1-anti-0165 "... because she liked to pick on [her] employees"
    for t in (1, 2):
        assert he[("f1_male", names, f"type{t}")]["value"] > 55
        assert he[("f1_female", names, f"type{t}")]["value"] == 0.0
        assert she[("f1_female", names, f"type{t}")]["value"] > 55
        assert she[("f1_male", names, f"type{t}")]["value"] == 0.0
        # every planted prediction clears the cut-off: only the lines with a visible flipped pronoun are left out
        assert he[("kept_fraction", names, f"type{t}")]["value"] == pytest.approx(clean[types == t].mean())


# -- competency ----------------------------------------------------------------------------------------


def test_competency_proportions_by_hand(tmp_path):
    # (item, label, logp_male, logp_female): female when logp_female > logp_male, ties discarded
    data = [
        ("a", "Neutral", -1, -2),
        ("b", "Neutral", -2, -1),
        ("c", "Competent", -3, -1),
        ("d", "Competent", -1, -3),
        ("e", "Competent", -4, -1),
        ("f", "Incompetent", -1, -5),
        ("g", "Incompetent", -2, -2),
        ("h", None, -9, -1),
    ]
    recs = [
        {
            "item_id": i,
            "type": 2,
            "stereotype": "pro",
            "gold_gender": "male",
            "male_form": "he",
            "female_form": "she",
            "logp_male": 0.0,
            "logp_female": -1.0,
            "score_kind": "token_logprob",
            "person_logp_male": float(m),
            "person_logp_female": float(f),
        }
        for i, _, m, f in data
    ]
    t = pa.Table.from_pylist(recs, schema=wb.scores_schema(["person"]))
    labels = tmp_path / "labels.csv"
    labels.write_text("item_id,label\n" + "".join(f"{i},{lab}\n" for i, lab, *_ in data if lab))
    rows = _rows(t, competency_labels=str(labels))
    got = {k[2]: (r["value"], r["n"]) for k, r in rows.items() if k[0] == "female_proportion"}
    assert got == {
        "type2": (4 / 7, 7),
        "type2/neutral": (0.5, 2),
        "type2/competent": (2 / 3, 3),
        "type2/incompetent": (0.0, 1),
    }
    r = rows[("female_proportion", f"{BASE},entities=person", "type2/competent")]
    assert 0 <= r["ci_low"] < 2 / 3 < r["ci_high"] <= 1


def test_competency_counts_each_sentence_once_and_applies_the_cutoff(tmp_path):
    # Lines 1-3 each have a pro and an anti item: with professions -> "person" they are one sentence. Line 4's
    # P(she) = 0.52 is below the 0.1 cut-off; line 5 leaves a flipped pronoun visible: neither is counted.
    data = [
        (1, "pro", -2, -1, 0),
        (1, "anti", -2, -1, 0),
        (2, "pro", -1, -3, 0),
        (2, "anti", -1, -3, 0),
        (3, "pro", -4, -1, 0),
        (3, "anti", -4, -1, 0),
        (4, "pro", -1.08, -1.0, 0),
        (5, "pro", -5, -1, 1),
    ]
    recs = [
        {
            "item_id": f"dev-t2-{s}-{line:04d}",
            "type": 2,
            "stereotype": s,
            "gold_gender": "male",
            "male_form": "he",
            "female_form": "she",
            "logp_male": 0.0,
            "logp_female": -1.0,
            "score_kind": "token_logprob",
            "line": line,
            "other_pronouns": other,
            "person_logp_male": float(m),
            "person_logp_female": float(f),
        }
        for line, s, m, f, other in data
    ]
    t = pa.Table.from_pylist(recs, schema=wb.scores_schema(["person"]))
    labels = tmp_path / "labels.csv"
    # line 1 labelled on both versions, line 2 on its anti version only
    labels.write_text(
        "item_id,label\ndev-t2-pro-0001,Competent\ndev-t2-anti-0001,Competent\n"
        "dev-t2-anti-0002,Competent\ndev-t2-pro-0003,Neutral\ndev-t2-pro-0004,Neutral\n"
    )
    got = {
        k[2]: (r["value"], r["n"])
        for k, r in _rows(t, competency_labels=str(labels)).items()
        if k[0] == "female_proportion"
    }
    assert got == {"type2": (2 / 3, 3), "type2/competent": (0.5, 2), "type2/neutral": (1.0, 1)}
    # the two versions of a sentence cannot carry different labels
    labels.write_text("item_id,label\ndev-t2-pro-0001,Competent\ndev-t2-anti-0001,Incompetent\n")
    with pytest.raises(DataError, match="dev-t2-pro-0001 is labelled 'competent' but dev-t2-anti-0001"):
        _rows(t, competency_labels=str(labels))


def test_scores_carry_line_and_visible_flipped_pronouns(scored, items):
    t = scored("bert", None, conditions=[])
    assert t.column("line").to_pylist() == items.column("line").to_pylist()
    other = dict(zip(t.column("item_id").to_pylist(), t.column("other_pronouns").to_pylist()))
    assert other["dev-t1-anti-0165"] == 1  # "... because she liked to pick on her employees"
    assert other["dev-t1-pro-0001"] == 0


def test_planted_pronoun_bias_moves_skew_its_way(scored):
    plain, he, she = (
        _rows(scored("bert")),
        _rows(scored("bert", "he")),
        _rows(scored("bert", "she", conditions=["names", "person"])),
    )
    for t in (1, 2):
        key = ("skew_signed", BASE, f"type{t}")
        assert he[key]["value"] > plain[key]["value"] + 20 and he[key]["value"] > 40
        assert she[key]["value"] < plain[key]["value"] - 20 and she[key]["value"] < -40


def test_competency_on_planted_models_with_fixture_labels(scored):
    for plant, expected in (("he", 0.0), ("she", 1.0)):
        rows = _rows(
            scored("bert", plant, **({"conditions": ["names", "person"]} if plant == "she" else {})),
            competency_labels=str(FIXTURE_LABELS),
        )
        got = {k[2]: r for k, r in rows.items() if k[0] == "female_proportion"}
        assert {"type1", "type2", "type2/incompetent", "type2/neutral", "type2/competent"} <= set(got)
        for subset in ("type2/incompetent", "type2/neutral", "type2/competent"):
            # dev-t2-{pro,anti}-0009 and -0014 are labelled twice: the same sentence once the professions are
            # "person", so each counts once (2 sentences per class, not 3)
            assert got[subset]["value"] == expected and got[subset]["n"] == 2, (plant, subset)


@pytest.mark.parametrize(
    "body, message, line",
    [
        ("item_id,label\ndev-t2-pro-0001,Neutral\nnope-0001,Competent\n", "unknown item_id 'nope-0001'", 3),
        ("item_id,label\n,Neutral\n", "missing item_id", 2),
        ("item_id,label\ndev-t2-pro-0001,Smart\n", "label 'Smart'", 2),
        ("item_id,label\ndev-t2-pro-0001,Neutral\ndev-t2-pro-0001,Competent\n", "repeats line 2", 3),
        ("id,label\ndev-t2-pro-0001,Neutral\n", "unexpected header", 1),
        ("item_id,label\ndev-t2-pro-0001\n", "expected 2 fields", 2),
    ],
)
def test_competency_labels_errors_name_file_and_line(tmp_path, body, message, line):
    path = tmp_path / "labels.csv"
    path.write_text(body)
    with pytest.raises(DataError, match=message) as err:
        read_competency_labels(path, ["dev-t2-pro-0001", "dev-t2-pro-0002"])
    assert f"{path}:{line}:" in str(err.value)


def test_competency_labels_need_the_person_condition(tmp_path, scored):
    with pytest.raises(ConfigError, match="competency_labels"):
        winobias_metric_rows(
            scored("bert", None, conditions=[]), WinoBiasOptions(bootstrap=0, competency_labels=str(FIXTURE_LABELS))
        )


# -- workflow ------------------------------------------------------------------------------------------


@pytest.mark.workflow
def test_workflow_dry_run_and_bad_option(tmp_path, repo_root, shared_data):
    from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_files, write_config

    workdir = copy_workflow(repo_root, tmp_path / "wf")
    targets = [
        f"results/{m}/pretrained/seed0/metrics/winobias.parquet" for m in ("tiny-bert", "tiny-gpt2", "tiny-bart")
    ]
    proc = run_snakemake(workdir, "-n", "--config", f"data_dir={shared_data}", *targets)
    outputs = scheduled_files(proc)  # the score files through their score_model job
    for m in ("tiny-bert", "tiny-gpt2", "tiny-bart"):
        assert f"results/{m}/pretrained/seed0/scores/winobias.parquet" in outputs
        assert f"results/{m}/pretrained/seed0/metrics/winobias.parquet" in outputs
    edited = write_config(
        workdir, lambda c: c["benchmarks"]["winobias"]["metric"].update(online_skew=["none", "prior"])
    )
    proc = run_snakemake(workdir, "-n", "--configfile", str(edited), *targets, check=False)
    assert proc.returncode != 0
    assert "benchmarks.winobias.metric.online_skew[1]" in proc.stdout + proc.stderr
