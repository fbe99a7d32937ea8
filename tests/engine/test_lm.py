"""lmbias.engine.lm.LanguageModel: the family dispatch of its requests (no model needed: a request the family
cannot serve is refused before any forward pass). The numbers its requests return are the engine's, tested by
every benchmark's tests through it."""

from __future__ import annotations

import pytest

from lmbias.benchmarks.definition import readings
from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import InfillRequest, MaskedIdsRequest, MaskedRequest
from lmbias.errors import ConfigError, DataError


def test_the_stats_default_to_a_fresh_counter():
    mlm = LanguageModel(None, None, "mlm")
    assert isinstance(mlm.stats, EngineStats) and LanguageModel(None, None, "mlm", stats=None).stats is not None


def test_a_benchmark_reads_each_family_by_its_named_reading():
    """lmbias.benchmarks.definition.readings: the dispatch by family happens once, before a reading runs; a
    family without a reading is refused, naming the benchmark's request and the family."""
    seen = []
    score = readings("X scoring", clm=lambda items, lm, scoring: seen.append(("causal", scoring)) or "c")
    assert score("items", LanguageModel(None, None, "clm"), {"k": 1}) == "c" and seen == [("causal", {"k": 1})]
    assert list(score.readings) == ["clm"]
    with pytest.raises(DataError, match="X scoring needs a causal model, not family 'mlm'"):
        score("items", LanguageModel(None, None, "mlm"))
    assert seen == [("causal", {"k": 1})]  # refused before any reading ran


def test_require_names_the_request_and_the_family():
    with pytest.raises(DataError, match="BEC-Pro association needs a masked or encoder-decoder model, not family"):
        LanguageModel(None, None, "clm").require(("mlm", "seq2seq"), "BEC-Pro association")
    with pytest.raises(DataError, match="needs an encoder-decoder model"):
        LanguageModel(None, None, "mlm").require(("seq2seq",), "x")
    LanguageModel(None, None, "mlm").require(("mlm",), "x")


@pytest.mark.parametrize(
    ("family", "request_", "message"),
    [
        ("clm", MaskedRequest("a [MASK]", (1,)), "candidate log-probs of MaskedRequest needs a masked model"),
        ("seq2seq", MaskedIdsRequest((1, 2), 1, (3,)), "needs a masked model, not family 'seq2seq'"),
        ("mlm", InfillRequest("a <mask>", "a", (1,)), "needs an encoder-decoder model, not family 'mlm'"),
    ],
)
def test_candidate_requests_go_to_the_family_that_reads_them(family, request_, message):
    with pytest.raises(DataError, match=message):
        LanguageModel(None, None, family).candidate_logprobs([request_])


def test_candidate_requests_are_of_one_kind_per_call():
    lm = LanguageModel(None, None, "mlm")
    assert lm.candidate_logprobs([]) == []
    with pytest.raises(DataError, match="of one kind"):
        lm.candidate_logprobs([MaskedRequest("a [MASK]", (1,)), MaskedIdsRequest((1, 2), 1, (3,))])
    with pytest.raises(DataError, match="not a request"):
        lm.candidate_logprobs(["a [MASK]"])


def test_likelihood_requests_refuse_the_other_families():
    with pytest.raises(DataError, match="sentence log-likelihood needs a causal model, not family 'mlm'"):
        LanguageModel(None, None, "mlm").sentence_logprobs(["a"])
    with pytest.raises(DataError, match="sentence log-likelihood needs a causal model"):
        LanguageModel(None, None, "seq2seq").grouped_sentence_logprobs(["a"], [0])
    with pytest.raises(DataError, match="pseudo-log-likelihood needs a masked or encoder-decoder model, not family"):
        LanguageModel(None, None, "clm").pseudo_logprobs([[1, 2]], [[1]])


def test_generation_is_refused_by_name_for_a_masked_model():
    with pytest.raises(ConfigError, match="BOLD: a model of family 'mlm' does not generate"):
        LanguageModel(None, None, "mlm").generate(["a"], None, what="BOLD")


def test_prompt_without_a_chat_template_is_the_text():
    lm = LanguageModel(None, None, "clm", model_entry={"family": "clm"}, model_name="m")
    assert lm.prompt("Hello") == "Hello" and not lm.uses_chat_template
    assert lm.chat_provenance() == {"chat_template": "none"}


def test_a_definition_whose_families_differ_from_its_readings_is_refused():
    from lmbias.benchmarks.definition import BenchmarkDef

    score = readings("Y scoring", clm=lambda *a: None, mlm=lambda *a: None)
    with pytest.raises(ValueError, match=r"'y': families \['clm'\] but readings for \['clm', 'mlm'\]"):
        BenchmarkDef(name="y", families=("clm",), score=score, parse_options=dict, rows=list)
    assert BenchmarkDef(name="y", families=("mlm", "clm"), score=score, parse_options=dict, rows=list).score is score
