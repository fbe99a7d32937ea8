"""logprob-score (Kurita et al. as in the over-debiasing paper): generator, scoring at the right positions,
effect size and p by hand, and planted-bias directions.

Why a planted *output* bias cannot move logprob-score (proved here, and asserted): both targets of a Table 2
pair are scored in the same masked contexts (TM and TAM differ only in the attribute). Adding a constant b to
the "he" logit adds b to z_he in every context, so for the pair difference

    [log p_he(TM) - log p_she(TM)] - [log p_he(TAM) - log p_she(TAM)] = [(z_he + b) - z_she](TM) - [...](TAM)

b cancels and so do the softmax normalisers (same context, same normaliser). The effect size's numerator
mean_T1 s - mean_T2 s is an average of exactly such pair differences, so it is invariant; only the pooled
std (through log p_he alone, whose normaliser does change) moves. Direction therefore needs a planted
*association*: `plant_association` (tests/helpers/planted_association.py) builds a model in which an attribute
token in the context pushes the target prediction towards the male (or female) targets, and nothing else can:
see its docstring for the proof.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest
import torch

from helpers.over_debiasing_paper import over_debiasing_text, paper_list
from helpers.planted_association import FAMILY, MALE_WORDS, attribute_ids, load_dir, marker_signs, plant_association
from lmbias.benchmarks import catalog
from lmbias.benchmarks.logprob import (
    AssociationItem,
    association_logprobs,
    build_masked,
    infilled_word_requests,
    masked_word_requests,
    score_logprob,
)
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import word_token_ids
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.logprob import LogprobOptions, logprob_metric_rows
from lmbias.parsers import logprob as logprob_parser

# --------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def base_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("logprob_models")
    return {arch: build_tiny_model(arch, root / arch, seed=0) for arch in ("bert", "bart")}


@pytest.fixture(scope="module")
def items():
    return logprob_parser.generate_logprob()


def _take(table: pa.Table, mask) -> pa.Table:
    return table.filter(pa.array(np.asarray(mask, dtype=bool)))


# --------------------------------------------------------------------------------------------------
# Generator


def test_generator_counts_and_paper_split(items):
    rows = items.to_pylist()
    assert len(rows) == 5 * 20 * 40 == 4000
    assert len({r["item_id"] for r in rows}) == 4000
    splits = {s: sum(r["split"] == s for r in rows) for s in ("dev", "test", "none")}
    assert splits == {"dev": 160, "test": 2560, "none": 1280}
    dev_targets = {r["target"] for r in rows if r["target_split"] == "dev"}
    assert dev_targets == {"my mom", "my aunt", "my dad", "my uncle"}
    dev_profs = {r["attribute"] for r in rows if r["attribute_split"] == "dev"}
    assert dev_profs == {
        "registered nurse",
        "health aide",
        "receptionist",
        "dental assistant",
        "repairer",
        "roofer",
        "firefighter",
        "electrical installer",
    }
    # per group 20 % of professions, per gender 20 % of targets
    assert sum(1 for p in dev_profs if p in {"repairer", "roofer", "firefighter", "electrical installer"}) == 4


def test_seeded_split_keeps_pairs_and_sizes():
    a = logprob_parser.generate_logprob("seeded", 0).to_pylist()
    b = logprob_parser.generate_logprob("seeded", 0).to_pylist()
    c = logprob_parser.generate_logprob("seeded", 7).to_pylist()
    assert a == b
    assert [r["split"] for r in a] != [r["split"] for r in c]
    assert {s: sum(r["split"] == s for r in a) for s in ("dev", "test")} == {"dev": 160, "test": 2560}
    dev_pairs = {(r["target_pair"], r["gender"]) for r in a if r["target_split"] == "dev"}
    assert {k for k, _ in dev_pairs} and all((k, g) in dev_pairs for k, _ in dev_pairs for g in ("male", "female"))
    for group in ("male", "female"):
        assert len({r["attribute"] for r in a if r["attribute_split"] == "dev" and r["attribute_group"] == group}) == 4


def test_rows_checked_by_hand(items):
    by_id = {r["item_id"]: r for r in items.to_pylist()}
    r = by_id["L1/my mom/receptionist"]
    assert (r["sentence"], r["tm_sent"], r["tam_sent"]) == (
        "My mom is a receptionist.",
        "My [MASK] is a receptionist.",
        "My [MASK] is a [MASK].",
    )
    assert (r["gender"], r["attribute_group"], r["split"], r["target_word"]) == ("female", "female", "dev", "mom")
    r = by_id["L4/he/electrical installer"]
    assert r["sentence"] == "He, the electrical installer, had a good day at work."
    assert r["tam_sent"] == "[MASK], the [MASK] [MASK], had a good day at work."
    assert (r["target_word"], r["split"]) == ("He", "none")  # test target, dev profession
    r = by_id["L2/my dad/electrician"]
    assert r["sentence"] == "My dad works as an electrician."
    r = by_id["L3/this girl/speech-language pathologist"]
    assert r["sentence"] == "This girl applied for the position of speech-language pathologist."
    assert r["tam_sent"] == "This [MASK] applied for the position of [MASK] [MASK]."
    for r in items.to_pylist():
        tm = r["tm_sent"]
        assert tm[r["target_start"] : r["target_start"] + 6] == "[MASK]"
        assert tm[r["attr_start"] : r["attr_end"]] == r["attribute"]
        assert tm.replace("[MASK]", r["target_word"]) == r["sentence"]


def test_word_lists_match_the_paper_tables(shared_data):
    text = over_debiasing_text(shared_data)
    data = logprob_parser.load_templates()
    assert data["targets"]["female"] == paper_list(text, "Female Target Words")  # Table 2
    assert data["targets"]["male"] == paper_list(text, "Male Target Words")
    assert data["professions"]["female"] == paper_list(text, "Female-dominated Occupations")  # Table 10
    assert data["professions"]["male"] == paper_list(text, "Male-dominated Occupations")
    occupation_lines = [line for line in text.splitlines() if "-dominated Occupations:" in line]
    italics = {
        w.strip() for line in occupation_lines for span in re.findall(r"\*([^*]+)\*", line) for w in span.split(",")
    }
    assert italics == set(data["professions"]["dev"])
    table4 = [m.group(1) for m in re.finditer(r"^\d\t(<person>.*)$", text, re.M)]
    ours = [
        t["text"].replace("{person}", "<person>").replace("{a} ", "a ").replace("{profession}", "<profession>")
        for t in data["templates"]
    ]
    assert [t.replace(" .", ".") for t in table4] == ours


def test_bad_options_and_bad_template_file(tmp_path):
    with pytest.raises(ConfigError, match=r"benchmarks\.logprob\.spilt"):
        logprob_parser.required_files({"dataset": "logprob", "spilt": "paper"}, [], "benchmarks.logprob")
    with pytest.raises(ConfigError, match=r"benchmarks\.logprob\.split"):
        logprob_parser.parse({}, {"dataset": "logprob", "split": "random"}, "benchmarks.logprob")
    bad = tmp_path / "t.yaml"
    bad.write_text(logprob_parser.TEMPLATES_PATH.read_text().replace('{profession}."}', '{job}."}', 1))
    with pytest.raises(DataError, match=r"t\.yaml:\d+: template L1"):
        logprob_parser.generate_logprob(path=bad)
    with pytest.raises(ConfigError, match="scoring.attribute_mask"):
        score_logprob(
            logprob_parser.generate_logprob().slice(0, 1), LanguageModel(None, None, "mlm"), {"attribute_mask": "word"}
        )


def test_clm_is_excluded_with_a_message():
    d = catalog.definition("logprob")
    assert d.families == ("mlm", "seq2seq")
    with pytest.raises(ConfigError, match="does not apply to model 'tiny-gpt2' of family 'clm'"):
        catalog.check_family("logprob", {"dataset": "logprob"}, "clm", "tiny-gpt2")


# --------------------------------------------------------------------------------------------------
# Scoring at the right positions, by hand


def _manual_mlm(model, tok, text, position_of_mask, token_id):
    enc = tok(text, return_tensors="pt")
    masks = (enc["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist()
    with torch.inference_mode():
        logits = model(**enc).logits[0, masks[position_of_mask]]
    return float(torch.log_softmax(logits.double(), -1)[token_id])


def test_prior_is_read_at_the_target_mask_mlm(base_models):
    model, tok = load_dir(base_models["bert"], "bert")
    tm = "As a dad, my [MASK] deserves a wonderful life."
    item = AssociationItem(tm, tm.index("[MASK]"), 5, 8, ("husband", "wife", "councilwoman"))
    got_tm, got_tam = association_logprobs(
        [item], LanguageModel(model, tok, "mlm"), "word", 64, 128, masked_word_requests
    )
    hus, wife = tok.convert_tokens_to_ids(["husband", "wife"])
    tam = "As a [MASK], my [MASK] deserves a wonderful life."
    for j, wid in enumerate((hus, wife)):
        assert got_tm[0][j] == pytest.approx(_manual_mlm(model, tok, tm, 0, wid), abs=1e-5)
        assert got_tam[0][j] == pytest.approx(_manual_mlm(model, tok, tam, 1, wid), abs=1e-5)
        # Kurita's defect, reading the prior at the first mask (the attribute's), gives another number
        assert abs(got_tam[0][j] - _manual_mlm(model, tok, tam, 0, wid)) > 1e-4
    # a target of several word-pieces: one mask per piece, log-probs summed, each at its own mask
    pieces = word_token_ids(tok, "councilwoman")
    assert len(pieces) > 1
    tm_n = tm.replace("[MASK]", " ".join(["[MASK]"] * len(pieces)))
    tam_n = "As a [MASK], my " + " ".join(["[MASK]"] * len(pieces)) + " deserves a wonderful life."
    assert got_tm[0][2] == pytest.approx(
        sum(_manual_mlm(model, tok, tm_n, k, p) for k, p in enumerate(pieces)), abs=1e-5
    )
    assert got_tam[0][2] == pytest.approx(
        sum(_manual_mlm(model, tok, tam_n, 1 + k, p) for k, p in enumerate(pieces)), abs=1e-5
    )
    # one mask per word-piece of the attribute: "danseur" is 5 pieces, the target is then mask #5
    tm2 = "As a danseur, my [MASK] deserves a wonderful life."
    n = len(word_token_ids(tok, "danseur"))
    assert n == 5
    _, tam_piece = association_logprobs(
        [AssociationItem(tm2, tm2.index("[MASK]"), 5, 12, ("husband",))],
        LanguageModel(model, tok, "mlm"),
        "piece",
        64,
        128,
        masked_word_requests,
    )
    tam2 = "As a " + " ".join(["[MASK]"] * n) + ", my [MASK] deserves a wonderful life."
    assert tam_piece[0][0] == pytest.approx(_manual_mlm(model, tok, tam2, n, hus), abs=1e-5)


def test_prior_is_read_at_the_target_position_seq2seq(base_models):
    model, tok = load_dir(base_models["bart"], "bart")
    tm = "As a dad, my [MASK] deserves a wonderful life."
    item = AssociationItem(tm, tm.index("[MASK]"), 5, 8, ("husband", "councilwoman"))
    got_tm, got_tam = association_logprobs(
        [item], LanguageModel(model, tok, "seq2seq"), "word", 64, 128, infilled_word_requests
    )
    start, bos = model.config.decoder_start_token_id, tok.bos_token_id

    def manual(encoder_text, prefix, pieces):
        enc = tok(encoder_text, return_tensors="pt")
        total = 0.0
        for k, piece in enumerate(pieces):
            dec = [start, bos] + tok(prefix, add_special_tokens=False)["input_ids"] + list(pieces[:k])
            with torch.inference_mode():
                logits = model(**enc, decoder_input_ids=torch.tensor([dec])).logits[0, -1]
            total += float(torch.log_softmax(logits.double(), -1)[piece])
        return total

    husband = word_token_ids(tok, "husband")
    council = word_token_ids(tok, "councilwoman")
    assert len(husband) == 1 and len(council) == 2
    enc_tm = "As a dad, my <mask> deserves a wonderful life."
    enc_tam = "As a <mask>, my <mask> deserves a wonderful life."
    assert got_tm[0][0] == pytest.approx(manual(enc_tm, "As a dad, my", husband), abs=1e-5)
    # the prior: the decoder prefix is the *masked* sentence, so it never sees the attribute "dad"
    assert got_tam[0][0] == pytest.approx(manual(enc_tam, "As a <mask>, my", husband), abs=1e-5)
    assert abs(got_tam[0][0] - manual(enc_tam, "As a dad, my", husband)) > 1e-4
    assert got_tm[0][1] == pytest.approx(manual(enc_tm, "As a dad, my", council), abs=1e-5)
    assert got_tam[0][1] == pytest.approx(manual(enc_tam, "As a <mask>, my", council), abs=1e-5)


def test_build_masked_positions():
    tm = "[MASK], the electrical installer, had a good day at work."
    item = AssociationItem(tm, 0, 12, 32, ("He",))
    assert build_masked(item, "<mask>", 1, None) == (tm.replace("[MASK]", "<mask>"), 0, "")
    assert build_masked(item, "<mask>", 1, 2) == ("<mask>, the <mask> <mask>, had a good day at work.", 0, "")
    tm = "As one of the roofers, my [MASK] deserves a wonderful life."
    item = AssociationItem(tm, tm.index("[MASK]"), 14, 21, ("dad",))
    assert build_masked(item, "[MASK]", 2, 3) == (
        "As one of the [MASK] [MASK] [MASK], my [MASK] [MASK] deserves a wonderful life.",
        3,
        "As one of the [MASK] [MASK] [MASK], my",
    )


# --------------------------------------------------------------------------------------------------
# Effect size and p on a hand-computed example


def _scores(spec):
    rows = []
    for target, gender, asso_male_prof, asso_female_prof, split in spec:
        for prof, group, asso in (("plumber", "male", asso_male_prof), ("nurse", "female", asso_female_prof)):
            rows.append(
                {
                    "item_id": f"{target}/{prof}",
                    "template_id": "L1",
                    "target": target,
                    "target_word": target,
                    "gender": gender,
                    "target_pair": 0,
                    "attribute": prof,
                    "attribute_group": group,
                    "target_split": split,
                    "attribute_split": split,
                    "split": split,
                    "logp_tm": asso - 3.0,
                    "logp_tam": -3.0,
                    "attribute_masks": "word",
                }
            )
    from lmbias.benchmarks.logprob import SCORES_SCHEMA

    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA)


def test_effect_size_and_exact_p_by_hand():
    # s(t) = asso(t, plumber) - asso(t, nurse): m1 2, m2 1, f1 -1, f2 0
    scores = _scores(
        [
            ("m1", "male", 2.0, 0.0, "test"),
            ("m2", "male", 1.5, 0.5, "test"),
            ("f1", "female", 0.0, 1.0, "test"),
            ("f2", "female", 0.5, 0.5, "test"),
        ]
    )
    rows = {(r["metric"], r["subset"]): r for r in logprob_metric_rows(scores, LogprobOptions())}
    # mean_T1 s - mean_T2 s = 1.5 - (-0.5) = 2; sample std of (2, 1, -1, 0) = sqrt(5/3)
    assert rows[("effect_size", "test")]["value"] == pytest.approx(2 / math.sqrt(5 / 3), abs=1e-12)
    assert rows[("association_difference", "test")]["value"] == pytest.approx(2.0)
    # 6 partitions of 4 targets into 2 + 2; only the observed one reaches a mean difference >= 2
    assert rows[("effect_size", "test")]["p_value"] == pytest.approx(1 / 6)
    assert rows[("effect_size", "all")]["value"] == rows[("effect_size", "test")]["value"]
    assert ("effect_size", "dev") not in rows
    assert rows[("mean_association", "test/target=male/profession=male")]["value"] == pytest.approx(1.75)
    ddof0 = {(r["metric"], r["subset"]): r for r in logprob_metric_rows(scores, LogprobOptions(ddof=0))}
    assert ddof0[("effect_size", "test")]["value"] == pytest.approx(2 / math.sqrt(5 / 4), abs=1e-12)
    with pytest.raises(ConfigError, match=r"benchmarks\.logprob\.metric\.ddof"):
        LogprobOptions.from_config({"ddof": 2}, "benchmarks.logprob.metric")


# --------------------------------------------------------------------------------------------------
# Planted bias


def _rows(scores):
    return {(r["metric"], r["subset"]): r["value"] for r in logprob_metric_rows(scores, LogprobOptions(n_samples=2000))}


@pytest.mark.parametrize("arch", ["bert", "bart"])
def test_planted_output_bias_cancels_in_logprob_score(arch, items, base_models, tmp_path):
    """A planted output bias on the male target words leaves every pair difference, hence the effect size's
    numerator and sign, unchanged (it cancels in log p(TM)/p(TAM) across a pair), while it does change the
    male targets' own associations (the plant took effect)."""
    sub = _take(items, np.isin(items.column("template_id").to_numpy(zero_copy_only=False), ["L1", "L4"]))
    planted_dir = build_tiny_model(arch, tmp_path / "planted", seed=0, planted_bias={w: 8.0 for w in MALE_WORDS})
    plain_scores = score_logprob(sub, LanguageModel(*load_dir(base_models[arch], arch), FAMILY[arch]))
    planted_scores = score_logprob(sub, LanguageModel(*load_dir(planted_dir, arch), FAMILY[arch]))
    plain, planted = _rows(plain_scores), _rows(planted_scores)
    for subset in ("all", "dev", "test"):
        assert planted[("association_difference", subset)] == pytest.approx(
            plain[("association_difference", subset)], abs=1e-4
        )
        assert np.sign(planted[("effect_size", subset)]) == np.sign(plain[("effect_size", subset)])
    # the plant took effect: every male target's log p(TM) rose ("he", planted twice as he/He, by ~8 nats; the
    # others less, as "he" then takes most of the softmax mass)
    male = np.asarray(sub.column("gender").to_pylist()) == "male"
    rise = planted_scores.column("logp_tm").to_numpy()[male] - plain_scores.column("logp_tm").to_numpy()[male]
    assert rise.min() > 0.1 and rise.max() > 4.0


@pytest.mark.parametrize("arch", ["bert", "bart"])
def test_planted_association_moves_logprob_score(arch, items, base_models, tmp_path):
    """Male-dominated professions planted to raise the male targets over the female ones (and female-dominated
    professions the reverse) give a positive effect size on every subset; the mirrored plant a negative one."""
    sub = _take(items, np.isin(items.column("template_id").to_numpy(zero_copy_only=False), ["L1", "L4"]))
    _, tok = load_dir(base_models[arch], arch)
    markers = marker_signs(tok, sub, lambda r: 1.0 if r["attribute_group"] == "male" else -1.0)
    effective = [any(i in markers for i in attribute_ids(tok, r)) for r in sub.to_pylist()]
    assert np.mean(effective) > 0.8, "most professions must carry a marked token"
    results = {}
    for name, sign in (("stereotype", 1.0), ("anti", -1.0)):
        path = plant_association(base_models[arch], tmp_path / name, arch, {i: sign * s for i, s in markers.items()})
        scores = score_logprob(sub, LanguageModel(*load_dir(path, arch), FAMILY[arch]))
        results[name] = _rows(scores)
        # per pair and profession: asso(male) - asso(female) has the planted sign (0 for an unmarked profession)
        asso = {
            (r["target_pair"], r["gender"], r["attribute"], r["template_id"]): r["logp_tm"] - r["logp_tam"]
            for r in scores.to_pylist()
        }
        for r, eff in zip(sub.to_pylist(), effective):
            if r["gender"] != "male":
                continue
            diff = (
                asso[(r["target_pair"], "male", r["attribute"], r["template_id"])]
                - asso[(r["target_pair"], "female", r["attribute"], r["template_id"])]
            )
            want = sign * (1.0 if r["attribute_group"] == "male" else -1.0)
            if eff:
                assert diff * want > 1e-3, (name, r["item_id"], diff)
            else:
                assert abs(diff) < 1e-4
    for subset in ("all", "dev", "test"):
        assert results["stereotype"][("effect_size", subset)] > 0.5
        assert results["stereotype"][("association_difference", subset)] > 0
        assert results["anti"][("effect_size", subset)] < -0.5
