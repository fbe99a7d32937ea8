"""lmbias.engine.lm.LanguageModel: the family dispatch of its requests (no model needed: a request the family
cannot serve is refused before any forward pass). The numbers its requests return are the engine's, tested by
every benchmark's tests through it."""

from __future__ import annotations

import pytest

from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import InfillRequest, MaskedIdsRequest, MaskedRequest
from lmbias.errors import ConfigError, DataError


def test_readings_follow_the_family():
    assert LanguageModel(None, None, "clm").causal and not LanguageModel(None, None, "clm").infills
    assert LanguageModel(None, None, "seq2seq").infills and not LanguageModel(None, None, "seq2seq").causal
    mlm = LanguageModel(None, None, "mlm")
    assert not mlm.causal and not mlm.infills
    assert isinstance(mlm.stats, EngineStats) and LanguageModel(None, None, "mlm", stats=None).stats is not None


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
