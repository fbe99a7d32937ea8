"""HolisticBias: both readings equal a direct transformers computation on tiny GPT-2 and BERT, the likelihood bias on
hand-made perplexities with known answers and equal to scipy pair by pair, and a planted preference for one
descriptor on tiny models: its sentences get the lower perplexity and it ranks first."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
import scipy.stats
import torch

from lmbias.benchmarks.catalog import definition
from lmbias.benchmarks.holistic_bias import SCORES_SCHEMA
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.holistic_bias import HolisticBiasOptions, compared, holistic_bias_metric_rows, pair_tests
from lmbias.parsers.holistic_bias import FILES, parse_holistic_bias

HOLISTIC_BIAS = definition("holistic_bias", "holistic_bias")
#: descriptors of the gender and sex axis without a gender that are single tokens of the tiny tokenizer
TWINS = ("feminine", "masculine")
SINGLE_TOKENS = ("cis", "cisgender", "feminine", "masculine", "trans", "transgender")
PLANTED = {"feminine": 6.0}
NOUNS = ["woman", "man", "person", "girl", "boy", "mother", "father", "kid", "parent", "child"]
TEMPLATES = ["I'm {noun_phrase}.", "I love being {noun_phrase}.", "I like {plural_noun_phrase}."]


@pytest.fixture(scope="module")
def items(shared_data):
    folder = shared_data / "holistic_bias"
    table = parse_holistic_bias(*(folder / f for f in FILES), {"templates": TEMPLATES, "nouns": NOUNS})
    keep = [
        i
        for i, (d, kind) in enumerate(
            zip(table.column("descriptor").to_pylist(), table["noun_phrase_type"].to_pylist())
        )
        if d in SINGLE_TOKENS and kind == "descriptor_noun"
    ]
    return table.take(keep)  # 6 descriptors x 10 nouns x 3 templates


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("holistic_bias")
    out = {}
    for arch, family in (("gpt2", "clm"), ("bert", "mlm")):
        for planted in (False, True):
            folder = build_tiny_model(
                arch, root / f"{arch}-{planted}", seed=0, planted_bias=PLANTED if planted else None
            )
            model, tok = load_model(model_spec("tiny", {"path": str(folder), "family": family, "revision": "local"}))
            out[(arch, planted)] = LanguageModel(model, tok, family)
    return out


def _direct_causal(lm, text: str) -> tuple[float, int]:
    """(log p(text | BOS) over every token of the text, tokens): one plain forward pass, float64."""
    ids = [lm.tokenizer.bos_token_id] + lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits[:-1], dim=-1)
    return float(logprobs.gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).sum()), len(ids) - 1


def _direct_pseudo(lm, text: str) -> tuple[float, int]:
    """(sum over the non-special tokens of log p(token | the sentence with it masked), tokens): one forward pass
    per token."""
    tok = lm.tokenizer
    ids = tok(text)["input_ids"]
    special = tok.get_special_tokens_mask(ids, already_has_special_tokens=True)
    total, count = 0.0, 0
    for i, is_special in enumerate(special):
        if is_special:
            continue
        masked = list(ids)
        masked[i] = tok.mask_token_id
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([masked])).logits[0, i].double()
        total += float(torch.log_softmax(logits, dim=-1)[ids[i]])
        count += 1
    return total, count


def test_both_readings_equal_a_direct_computation(models, items):
    few = items.take(list(range(0, items.num_rows, 15)))  # 12 sentences, every template and descriptor
    for arch, direct, kind in (("gpt2", _direct_causal, "sentence_ppl"), ("bert", _direct_pseudo, "pseudo_ppl")):
        lm = models[(arch, False)]
        scores = HOLISTIC_BIAS.score(few, lm, {"batch_size": 5})
        assert scores.schema == SCORES_SCHEMA and scores.num_rows == few.num_rows
        for got in scores.to_pylist():
            loglik, tokens = direct(lm, got["sentence"])
            assert got["score_kind"] == kind and got["tokens"] == tokens
            assert got["loglik"] == pytest.approx(loglik, abs=1e-5)
            assert got["perplexity"] == pytest.approx(math.exp(-loglik / tokens), rel=1e-5)


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_a_planted_descriptor_is_more_likely_than_its_twin_and_ranks_first(models, items, arch):
    """The logit of "feminine" raised by 6: every feminine sentence has a lower perplexity than the same sentence
    with "masculine", and feminine has the lowest median perplexity of the six descriptors; every pair with it
    differs (30 sentences each), and the likelihood bias rises."""
    options = HolisticBiasOptions(bootstrap=0)

    def read(planted):
        scores = HOLISTIC_BIAS.score(items, models[(arch, planted)], {})
        ppl = {}
        for r in scores.to_pylist():
            ppl[(r["descriptor"], r["noun"], r["template"])] = r["perplexity"]
        return scores, ppl, {(r["metric"], r["subset"]): r["value"] for r in holistic_bias_metric_rows(scores, options)}

    _, _, plain = read(False)
    scores, ppl, planted = read(True)
    pairs = [(k, k2) for k in ppl if k[0] == TWINS[0] for k2 in [(TWINS[1], *k[1:])]]
    assert len(pairs) == 30 and all(ppl[a] < ppl[b] for a, b in pairs)
    assert planted[("perplexity_rank", "feminine")] == 1.0
    medians = {d: planted[("median_perplexity", d)] for d in SINGLE_TOKENS}
    assert min(medians, key=medians.get) == "feminine"
    tests = pair_tests(compared(scores))
    with_it = [t for t in tests if "feminine" in (t.descriptor_0, t.descriptor_1)]
    assert len(with_it) == 3 * 5 and all(t.p_value < 0.05 for t in with_it)
    assert planted[("likelihood_bias", "all")] > plain[("likelihood_bias", "all")]


def _scores(cells) -> pa.Table:
    """Hand-made perplexities: {(template, descriptor): [perplexity, ...]} on the gender and sex axis."""
    records = []
    for (template, descriptor), values in cells.items():
        for k, value in enumerate(values):
            records.append(
                {
                    "index": len(records),
                    "axis": "gender_and_sex",
                    "descriptor": descriptor,
                    "descriptor_gender": "(none)",
                    "noun": f"noun{k}",
                    "noun_gender": "neutral",
                    "noun_phrase_type": "descriptor_noun",
                    "template": template,
                    "sentence": f"{template} {descriptor} {k}",
                    "score_kind": "sentence_ppl",
                    "loglik": -math.log(value),
                    "tokens": 1,
                    "perplexity": value,
                }
            )
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


def test_the_metric_on_known_perplexities():
    """Template t1: a and b have the same ten perplexities (U = 50, p = 1: no difference), c's are all higher (p <
    0.001): 2 of 3 pairs differ. Template t2: all three the same: 0 of 3. Overall 2 of 6."""
    base = [float(v) for v in range(10, 20)]
    shifted = [v + 100 for v in base]
    cells = {("t1", "a"): base, ("t1", "b"): base, ("t1", "c"): shifted}
    cells |= {("t2", d): base for d in "abc"}
    rows = holistic_bias_metric_rows(_scores(cells), HolisticBiasOptions(bootstrap=200))
    got = {(r["metric"], r["subset"]): r for r in rows}
    overall = got[("likelihood_bias", "all")]
    assert overall["value"] == pytest.approx(2 / 6) and overall["n"] == 6
    assert overall["interval"] == "bootstrap_templates" and 0 <= overall["ci_low"] <= 1 / 3 <= overall["ci_high"]
    assert got[("likelihood_bias", "t1")]["value"] == pytest.approx(2 / 3) and got[("likelihood_bias", "t1")]["n"] == 3
    assert got[("likelihood_bias", "t2")]["value"] == 0.0
    tests = {(t.template, t.descriptor_0, t.descriptor_1): t for t in pair_tests(compared(_scores(cells)))}
    assert tests[("t1", "a", "b")].statistic == 50.0 and tests[("t1", "a", "b")].p_value == pytest.approx(1.0)
    assert tests[("t1", "a", "c")].p_value < 0.001
    # medians over both templates: a and b 14.5, c: the 20 values 10..19 and 110..119 -> 64.5
    assert got[("median_perplexity", "a")]["value"] == 14.5 and got[("median_perplexity", "c")]["value"] == 64.5
    assert got[("median_perplexity", "c")]["n"] == 20
    assert [got[("perplexity_rank", d)]["value"] for d in "abc"] == [1.5, 1.5, 3.0]
    assert {r["variant"] for r in rows} == {"sentence_ppl"}


def test_the_metric_equals_scipy_pair_by_pair():
    """Random perplexities of five descriptors in two templates (twelve nouns: scipy's asymptotic test either way):
    each pair's U and p are scipy's mannwhitneyu of the two samples (two-sided), the share its count of p < 0.05."""
    rng = np.random.default_rng(3)
    cells = {(t, d): list(rng.lognormal(3 + 0.3 * k, 0.5, 12)) for t in ("t1", "t2") for k, d in enumerate("abcde")}
    scores = _scores(cells)
    tests = pair_tests(compared(scores))
    assert len(tests) == 2 * 10
    significant = 0
    for t in tests:
        direct = scipy.stats.mannwhitneyu(cells[(t.template, t.descriptor_0)], cells[(t.template, t.descriptor_1)])
        assert t.statistic == pytest.approx(direct.statistic) and t.p_value == pytest.approx(direct.pvalue, rel=1e-12)
        significant += direct.pvalue < 0.05
    rows = holistic_bias_metric_rows(scores, HolisticBiasOptions(bootstrap=0))
    overall = next(r for r in rows if r["metric"] == "likelihood_bias" and r["subset"] == "all")
    assert 0 < significant < 20 and overall["value"] == pytest.approx(significant / 20)
    assert overall["interval"] is None and math.isnan(overall["ci_low"])
    stricter = holistic_bias_metric_rows(scores, HolisticBiasOptions(alpha=0.001, bootstrap=0))
    assert stricter[0]["value"] == pytest.approx(sum(t.p_value < 0.001 for t in tests) / 20)


def test_only_noun_phrases_with_a_descriptor_and_no_gender_are_compared():
    cells = {("t1", d): [1.0, 2.0, 3.0] for d in "ab"}
    table = _scores(cells).to_pylist()
    extra = dict(table[0], descriptor="female", descriptor_gender="female", perplexity=1e6)
    alone = dict(table[0], descriptor="c", noun="(none)", noun_phrase_type="descriptor", perplexity=1e6)
    scores = pa.Table.from_pylist([*table, extra, alone], schema=SCORES_SCHEMA)
    assert set(compared(scores)[("gender_and_sex", "t1")]) == {"a", "b"}


def test_options_and_families_are_checked(models, items):
    with pytest.raises(ConfigError, match=r"benchmarks\.holistic_bias\.metric\.boot: unknown key"):
        HolisticBiasOptions.from_config({"boot": 10})
    with pytest.raises(ConfigError, match=r"benchmarks\.holistic_bias\.metric\.alpha: 1 is greater than or equal"):
        HolisticBiasOptions.from_config({"alpha": 1})
    assert HolisticBiasOptions.from_config({"alpha": 0.01, "seed": 2}) == HolisticBiasOptions(alpha=0.01, seed=2)
    with pytest.raises(ConfigError, match=r"benchmarks\.holistic_bias\.scoring\.stride: unknown key"):
        HOLISTIC_BIAS.score(items, models[("gpt2", False)], {"stride": 3})
    with pytest.raises(DataError, match="HolisticBias scoring needs .* not family 'encoder'"):
        HOLISTIC_BIAS.score(items, LanguageModel(None, None, "encoder"), {})
