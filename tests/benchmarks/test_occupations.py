"""Occupation bias (Lu et al. 2018): generated items, scoring against naive references, the formulas, a
planted-bias construction whose direction is known for every family, and a small real workflow run.

What the planted-bias test proves. A planted output bias on "he" says nothing about this metric: it scores
the *occupation* after "He is a" vs "She is a", and a logit offset on "he" shifts both contexts' normalisers
in ways a random model decides. Instead, for each single-token occupation o we add to o's output-embedding
row a vector d_o that satisfies, for the features g (the input of the output layer) at every prefix of the
benchmark:  d_o . g(male prefix of o's article) = c  and  d_o . g(any other prefix) = 0  (a least-squares
solve, exact because there are fewer prefixes than hidden units). The features do not depend on output
rows, so after the plant o's logit is up by exactly c after every male prefix and unchanged after every
female prefix. Hence log p(o | female) is unchanged and log p(o | male) rises by c - log(1 + P (e^c - 1)),
P being the base probability of the planted occupations sharing o's article in that context: a known,
strictly positive shift of B(o) for every occupation and of the signed AOB, asserted to 1e-3 for clm
(next-word), mlm (masked occupation) and seq2seq (infill) alike.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from lmbias.benchmarks.occupations import SCORES_SCHEMA, continuation_ids, score_occupations
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.scoring import decoder_prefix
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.occupations import OccupationOptions, occupation_bias, occupation_metric_rows
from lmbias.parsers import occupations as occ_parser

ARCHS = ["bert", "gpt2", "bart"]


@pytest.fixture(scope="module")
def items():
    return occ_parser.generate_occupation_items()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-occ")
    cache = {}

    def get(arch):
        if arch not in cache:
            out = build_tiny_model(arch, root / arch, seed=0)
            cache[arch] = load_model(
                model_spec(arch, {"path": str(out), "family": FAMILY_OF[arch], "revision": "local"})
            )
        return cache[arch]

    return get


# -- generated items ------------------------------------------------------------------------------------


def test_generated_items_follow_the_paper(items):
    rows = items.to_pylist()
    occupations = sorted({r["occupation"] for r in rows})
    # 65 printed, "attorney" twice, 5 multi-word ones left out for language models
    assert len(occupations) == 59 and items.num_rows == 4 * 59
    assert not any(" " in o for o in occupations) and "physician's assistant" not in occupations
    by_id = {r["item_id"]: r for r in rows}
    assert (
        by_id["t0-accountant"]["male_prefix"] == "He is an" and by_id["t0-accountant"]["female_prefix"] == "She is an"
    )
    assert by_id["t1-nurse"]["male_prefix"] == "he is a" and by_id["t1-nurse"]["female_prefix"] == "she is a"
    assert by_id["t2-engineer"]["male_prefix"] == "The man is an"
    assert by_id["t3-engineer"]["female_prefix"] == "the woman is an"
    assert sum(r["occupation"] == "attorney" for r in rows) == 4
    multi = occ_parser.generate_occupation_items(multi_word=True)
    assert multi.num_rows == 4 * 64
    assert "t0-physician's_assistant" in multi.column("item_id").to_pylist()
    assert items.schema.equals(occ_parser.SCHEMA)


def test_template_file_errors_name_file_and_line(tmp_path):
    good = occ_parser.TEMPLATE_FILE.read_text()
    bad = tmp_path / "t.yaml"
    bad.write_text(good.replace('  - "He is a | [OCCUPATION]"', '  - "He is a [OCCUPATION]"'))
    with pytest.raises(DataError, match=r"t\.yaml:\d+: template 'He is a \[OCCUPATION\]'"):
        occ_parser.generate_occupation_items(bad)
    bad.write_text(good.replace('  - "the man is a | [OCCUPATION]"', '  - "the person is a | [OCCUPATION]"'))
    with pytest.raises(DataError, match="no gendered word"):
        occ_parser.generate_occupation_items(bad)
    bad.write_text(good.replace("  - dentist\n", "  - Dentist\n"))
    with pytest.raises(DataError, match="Dentist"):
        occ_parser.generate_occupation_items(bad)
    with pytest.raises(ConfigError, match="benchmarks.occupations.multi_words: unknown key"):
        occ_parser.parse({}, {"dataset": "occupations", "multi_words": True}, "benchmarks.occupations")
    with pytest.raises(ConfigError, match="multi_word"):
        occ_parser.parse({}, {"dataset": "occupations", "multi_word": "yes"}, "benchmarks.occupations")
    assert occ_parser.required_files({"dataset": "occupations"}, [], "benchmarks.occupations") == []


# -- scoring against independent one-pass references ------------------------------------------------------


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def _reference_logp(model, tok, family, prefix, occupation, suffix="."):
    """log p(occupation | prefix) from one full forward pass (teacher forcing), independent of the engine."""
    pieces = continuation_ids(tok, prefix, occupation, "ref")
    with torch.inference_mode():
        if family == "clm":
            bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
            ids = [bos] + _ids(tok, prefix) + pieces
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
            start = len(ids) - len(pieces)
            return float(sum(lp[start - 1 + k, t] for k, t in enumerate(pieces)))
        if family == "mlm":
            enc = tok(f"{prefix} " + " ".join([tok.mask_token] * len(pieces)) + suffix, return_tensors="pt")
            lp = torch.log_softmax(model(**enc).logits[0].double(), -1)
            where = (enc["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist()
            return float(sum(lp[p, t] for p, t in zip(where, pieces)))
        enc = tok(f"{prefix} {tok.mask_token}{suffix}", return_tensors="pt")
        dec = decoder_prefix(model, tok, _ids(tok, prefix) + pieces)
        lp = torch.log_softmax(model(**enc, decoder_input_ids=torch.tensor([dec])).logits[0].double(), -1)
        start = len(dec) - len(pieces)
        return float(sum(lp[start - 1 + k, t] for k, t in enumerate(pieces)))


@pytest.mark.parametrize("arch", ARCHS)
def test_scores_equal_one_pass_reference(arch, tiny, items):
    model, tok = tiny(arch)
    family = FAMILY_OF[arch]
    # single-token and multi-piece occupations (the tiny vocabulary lacks veterinarian and videographer)
    pick = [
        i
        for i, r in enumerate(items.to_pylist())
        if r["occupation"] in ("nurse", "engineer", "veterinarian", "videographer") and r["template_id"] in (0, 2)
    ]
    sub = items.take(pick)
    scores = score_occupations(sub, LanguageModel(model, tok, family), {})
    assert scores.schema.equals(SCORES_SCHEMA)
    assert max(scores.column("n_pieces").to_pylist()) > 1  # the multi-piece path is exercised
    for item, got in zip(sub.to_pylist(), scores.to_pylist()):
        for side in ("male", "female"):
            ref = _reference_logp(model, tok, family, item[f"{side}_prefix"], item["occupation"])
            assert got[f"logp_{side}"] == pytest.approx(ref, abs=1e-4), (item["item_id"], side)


# -- formulas -------------------------------------------------------------------------------------------------


def test_bias_and_aob_by_hand():
    recs = []
    for occ, t, lm, lf in [
        ("nurse", 0, -5.0, -3.0),
        ("nurse", 1, -4.0, -3.0),  # B = (-2 - 1) / 2 = -1.5
        ("pilot", 0, -2.0, -3.0),
        ("pilot", 1, -2.5, -3.0),  # B = (1 + 0.5) / 2 = 0.75
        ("judge", 0, -1.0, -1.25),
        ("judge", 1, -1.0, -1.25),
    ]:  # B = 0.25
        recs.append(
            {
                "item_id": f"t{t}-{occ}",
                "template_id": t,
                "occupation": occ,
                "logp_male": lm,
                "logp_female": lf,
                "n_pieces": 1,
                "score_kind": "next_word_loglik",
            }
        )
    scores = pa.Table.from_pylist(recs, schema=SCORES_SCHEMA)
    assert occupation_bias(scores) == {"nurse": (-1.5, 2), "pilot": (0.75, 2), "judge": (0.25, 2)}
    rows = {(r["metric"], r["subset"]): r for r in occupation_metric_rows(scores, OccupationOptions(bootstrap=200))}
    assert rows[("occupation_bias", "occupation/nurse")]["value"] == -1.5
    assert rows[("aob", "all")]["value"] == pytest.approx((1.5 + 0.75 + 0.25) / 3)
    assert rows[("aob_signed", "all")]["value"] == pytest.approx((-1.5 + 0.75 + 0.25) / 3)
    from scipy import stats

    assert rows[("aob_signed", "all")]["p_value"] == pytest.approx(stats.ttest_1samp([-1.5, 0.75, 0.25], 0).pvalue)
    r = rows[("aob", "all")]
    assert r["ci_low"] <= r["value"] <= r["ci_high"] and r["n"] == 3
    assert {x["variant"] for x in rows.values()} == {"scoring=next_word_loglik"}
    with pytest.raises(
        ConfigError, match=r"benchmarks\.occupations\.metric\.boot: unknown key \(known: bootstrap, seed\)"
    ):
        OccupationOptions.from_config({"boot": 3})
    with pytest.raises(ConfigError, match=r"benchmarks\.occupations\.metric\.seed: True is not of type 'integer'"):
        OccupationOptions.from_config({"seed": True})


# -- planted bias ----------------------------------------------------------------------------------------------


def _features(model, tok, family, prefix, suffix="."):
    """Input of the output layer where the occupation's first token is scored (mirrors the scorer's inputs)."""
    captured = {}
    handle = model.get_output_embeddings().register_forward_hook(lambda m, i, o: captured.__setitem__("x", i[0]))
    try:
        with torch.inference_mode():
            if family == "clm":
                bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
                model(input_ids=torch.tensor([[bos] + _ids(tok, prefix)]))
                return captured["x"][0, -1].double()
            enc = tok(f"{prefix} {tok.mask_token}{suffix}", return_tensors="pt")
            if family == "mlm":
                model(**enc)
                pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0, 0])
                return captured["x"][0, pos].double()
            model(**enc, decoder_input_ids=torch.tensor([decoder_prefix(model, tok, _ids(tok, prefix))]))
            return captured["x"][0, -1].double()
    finally:
        handle.remove()


def plant_male_context_bias(model, tok, family, items, c):
    """Raise each occupation's logit by exactly c after its male prefixes, 0 after every other prefix.

    Returns {occupation: token id}. Only single-token occupations are planted (see the module docstring).
    """
    rows = items.to_pylist()
    prefixes = sorted({r["male_prefix"] for r in rows} | {r["female_prefix"] for r in rows})
    g = torch.stack([_features(model, tok, family, p) for p in prefixes])  # [P, H]
    pinv = torch.linalg.pinv(g)
    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())  # untie from the input embeddings
    planted = {}
    with torch.no_grad():
        for occ in sorted({r["occupation"] for r in rows}):
            mine = [r for r in rows if r["occupation"] == occ]
            token = continuation_ids(tok, mine[0]["male_prefix"], occ, occ)
            if len(token) != 1:
                continue
            male = {r["male_prefix"] for r in mine}
            y = torch.tensor([c if p in male else 0.0 for p in prefixes], dtype=torch.float64)
            d = pinv @ y
            assert torch.allclose(g @ d, y, atol=1e-6), "the prefixes' features must be linearly independent"
            head.weight[token[0]] += d.to(head.weight.dtype)
            planted[occ] = token[0]
    return planted


@pytest.mark.parametrize("arch", ARCHS)
def test_planted_male_context_bias_moves_occupation_bias_male(arch, tmp_path, items):
    family, c = FAMILY_OF[arch], 3.0
    out = build_tiny_model(arch, tmp_path / arch, seed=0)
    model, tok = load_model(model_spec(arch, {"path": str(out), "family": family, "revision": "local"}))
    # float64: a random tiny model's contexts differ little, so the solved d_o is long and float32 rounding of
    # the planted rows would blur the exact prediction (the direction would survive, the 1e-3 check not)
    model.double()
    single = [
        i
        for i, r in enumerate(items.to_pylist())
        if len(continuation_ids(tok, r["male_prefix"], r["occupation"], r["item_id"])) == 1
    ]
    sub = items.take(single)
    assert sub.num_rows >= 4 * 30
    before = score_occupations(sub, LanguageModel(model, tok, family), {})
    planted = plant_male_context_bias(model, tok, family, sub, c)
    after = score_occupations(sub, LanguageModel(model, tok, family), {})
    assert set(planted) == set(sub.column("occupation").to_pylist())

    # female side unchanged; male side up by c - log(1 + P (e^c - 1)), P = base mass of the planted
    # occupations of the same article after the same male prefix
    b, a, rows = before.to_pylist(), after.to_pylist(), sub.to_pylist()
    np.testing.assert_allclose([x["logp_female"] for x in a], [x["logp_female"] for x in b], atol=1e-4)
    mass: dict[str, float] = {}
    for r, x in zip(rows, b):
        mass[r["male_prefix"]] = mass.get(r["male_prefix"], 0.0) + math.exp(x["logp_male"])
    expected = [c - math.log1p(mass[r["male_prefix"]] * math.expm1(c)) for r in rows]
    np.testing.assert_allclose([x["logp_male"] - y["logp_male"] for x, y in zip(a, b)], expected, atol=1e-3)

    bias_before, bias_after = occupation_bias(before), occupation_bias(after)
    for occ in bias_before:
        assert bias_after[occ][0] - bias_before[occ][0] > 0.9 * c, occ  # every occupation moves male
    rb = {r["metric"]: r["value"] for r in occupation_metric_rows(before, OccupationOptions(bootstrap=0))}
    ra = {r["metric"]: r["value"] for r in occupation_metric_rows(after, OccupationOptions(bootstrap=0))}
    assert ra["aob_signed"] - rb["aob_signed"] == pytest.approx(
        float(np.mean([bias_after[o][0] - bias_before[o][0] for o in bias_before])), abs=1e-9
    )
    assert ra["aob_signed"] > rb["aob_signed"] + 0.9 * c


# -- workflow --------------------------------------------------------------------------------------------------


@pytest.mark.workflow
def test_workflow_occupations_dry_run_for_every_family_and_real_run(tmp_path, repo_root):
    """The DAG for tiny-bert, tiny-gpt2 and tiny-bart (dry run); a real run for tiny-gpt2, the paper's
    causal setting (the other families are scored in-process above: a real run of each costs ~30 s here)."""
    from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_files, scheduled_outputs

    workdir = copy_workflow(repo_root, tmp_path / "wf")
    # this run's benchmarks: the metrics file reads its pair's score_model job, which scores what the summary holds
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["only_benchmarks"] = ["occupations"]
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    models = ("tiny-bert", "tiny-gpt2", "tiny-bart")
    targets = [f"results/{m}/pretrained/seed0/metrics/occupations.parquet" for m in models]
    outputs = scheduled_files(run_snakemake(workdir, "-n", *targets))  # score files through their score_model job
    assert "results/data/occupations.parquet" in outputs
    assert not [o for o in outputs if o.startswith("resources/data/")]  # generated: nothing to download
    for m in models:
        assert f"results/{m}/pretrained/seed0/scores/occupations.parquet" in outputs

    run_snakemake(workdir, "results/tiny-gpt2/pretrained/seed0/metrics/occupations.parquet")
    assert pq.read_table(workdir / "results/data/occupations.parquet").num_rows == 4 * 59
    table = pq.read_table(workdir / "results/tiny-gpt2/pretrained/seed0/metrics/occupations.parquet").to_pylist()
    by = {(r["metric"], r["subset"]): r for r in table}
    assert len([r for r in table if r["metric"] == "occupation_bias"]) == 59
    assert by[("aob", "all")]["n"] == 59 and by[("aob", "all")]["value"] >= abs(by[("aob_signed", "all")]["value"])
    assert all(r["benchmark"] == "occupations" and r["model"] == "tiny-gpt2" for r in table)
    assert {r["variant"] for r in table} == {"scoring=next_word_loglik"}
    assert (workdir / "logs/data/occupations.log").exists()
    # a metric option edit reruns the metric only: no parse, no forward pass
    from helpers.workflow_runs import write_config

    edited = write_config(workdir, lambda c: c["benchmarks"]["occupations"]["metric"].update(bootstrap=10))
    outputs = scheduled_outputs(
        run_snakemake(
            workdir, "-n", "--configfile", str(edited), "results/tiny-gpt2/pretrained/seed0/metrics/occupations.parquet"
        )
    )
    assert outputs == ["results/tiny-gpt2/pretrained/seed0/metrics/occupations.parquet"], outputs
