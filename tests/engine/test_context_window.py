"""lmbias.engine.context_window: the usable context is the smaller of the tokenizer's and the config's limits,
read from whichever position attribute the architecture has; perplexity's windows follow it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from transformers import BertConfig, BertForMaskedLM, GPT2Config, LlamaConfig, RobertaConfig

from lmbias.benchmarks.perplexity import WINDOW_METADATA, score_perplexity, window_length
from lmbias.engine.context_window import (
    CONTEXT_METADATA,
    FALLBACK_TOKENS,
    config_positions,
    context_window,
)
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import MaskedRequest, masked_logprobs
from lmbias.engine.tiny import build_bert_tokenizer
from lmbias.errors import DataError

WORDS = ["he", "she", "the", "doctor", "nurse", "said", "that", "was", "tired"]


def _bert(tokenizer, positions: int):
    """A one-layer BERT of `positions` positions over `tokenizer`'s vocabulary, seeded."""
    import torch

    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=positions,
    )
    torch.manual_seed(0)
    return BertForMaskedLM(config).eval()


class _Model:
    """Anything with a transformers config, as a loaded model or a wrapper (Self-Debias, PEFT) exposes it."""

    def __init__(self, config):
        self.config = config


@pytest.fixture(scope="module")
def tokenizer():
    return build_bert_tokenizer(WORDS)


@pytest.mark.parametrize(
    "tokenizer_limit, positions, expected",
    [
        (512, 128, 128),  # a hub tokenizer saying 512 beside a config built with 128 positions (issue 35)
        (64, 128, 64),  # the other way round: the tokenizer's own limit is the smaller one
        (10**30, 128, 128),  # a tokenizer without a real limit (transformers' VERY_LARGE_INTEGER)
    ],
)
def test_the_smaller_of_tokenizer_and_config(tokenizer, tokenizer_limit, positions, expected):
    tokenizer.model_max_length = tokenizer_limit
    window = context_window(_Model(BertConfig(max_position_embeddings=positions)), tokenizer)
    assert window.tokens == expected
    assert window.config_limit == positions and window.config_key == "max_position_embeddings"
    assert window.tokenizer_limit == (tokenizer_limit if tokenizer_limit < 10**6 else None)


def test_no_limit_anywhere_falls_back(tokenizer):
    tokenizer.model_max_length = 10**30
    window = context_window(_Model(None), tokenizer)
    assert (window.tokens, window.tokenizer_limit, window.config_limit) == (FALLBACK_TOKENS, None, None)


def test_each_architecture_names_its_positions():
    assert config_positions(GPT2Config(n_positions=256))[0] == 256  # its attribute_map serves max_position_embeddings
    assert config_positions(LlamaConfig(max_position_embeddings=4096)) == (4096, "max_position_embeddings")
    # RoBERTa numbers positions from pad_token_id + 1: 514 embeddings hold 512 tokens
    assert config_positions(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == (
        512,
        "max_position_embeddings",
    )


def test_perplexity_windows_follow_the_config_and_record_it(tokenizer):
    """A masked model whose tokenizer says 512 but whose config has 32 positions: every chunk fits 32 positions
    (the old window, 512, crashed in the position embeddings), and the score file's metadata says why."""
    tokenizer.model_max_length = 512
    model = _bert(tokenizer, 32)
    text = " ".join(["the doctor said that he was tired"] * 12)  # 84 word pieces, three chunks of 32
    assert window_length(model, tokenizer, {}) == 32
    scores = score_perplexity(pa.table({"text": [text], "source": ["test"]}), LanguageModel(model, tokenizer, "mlm"))
    assert scores.num_rows == 3 and sum(scores.column("n_tokens").to_pylist()) == 84
    metadata = {k.decode(): v.decode() for k, v in scores.schema.metadata.items()}
    assert metadata[WINDOW_METADATA] == "32"
    assert '"config_limit": 32' in metadata[CONTEXT_METADATA] and '"tokenizer_limit": 512' in metadata[CONTEXT_METADATA]


def test_an_input_longer_than_the_models_context_is_refused_by_name(tokenizer):
    """The engine's guard (a benchmark's max_length, 512 by default) is cut to the model's context: a 40-token
    input for a model of 32 positions is a DataError naming the limit, not an index error in its embeddings."""
    tokenizer.model_max_length = 512
    model = _bert(tokenizer, 32)
    he = (tokenizer.convert_tokens_to_ids("he"),)
    short = MaskedRequest(f"the doctor said that {tokenizer.mask_token} was tired", he)
    assert len(masked_logprobs(model, tokenizer, [short], max_length=512)) == 1
    long = MaskedRequest(" ".join(["the doctor said"] * 12) + f" {tokenizer.mask_token}", he)
    with pytest.raises(DataError, match="exceeds max_length=32"):
        masked_logprobs(model, tokenizer, [long], max_length=512)
