"""A model's usable context: the most tokens one input may hold, from its tokenizer and its config together.

A tokenizer's `model_max_length` is often not the model's limit: many hub tokenizers carry none (a huge
sentinel), some carry another model's (a BERT tokenizer saying 512 beside a config with 128 positions). The
positions the model was built with are in its config under a name that depends on the architecture
(CONFIG_POSITION_KEYS). The usable context is the smaller of the two that are known; RoBERTa-like models
number positions from pad_token_id + 1, so their config's count overstates the usable context by that much.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

#: Config attributes that give the positions a model was built with, by architecture (the first one found).
CONFIG_POSITION_KEYS = (
    "max_position_embeddings",  # BERT, RoBERTa, BART, Llama, Qwen, OLMo, Mistral, ...
    "n_positions",  # GPT-2, GPT-Neo's older configs, T5 (nominal)
    "max_sequence_length",  # some remote-code models
    "seq_length",  # ChatGLM, Qwen-1
    "n_ctx",  # older GPT-2 and GPT-J configs
    "max_seq_len",  # MPT
)
#: Model types whose position ids start after the padding index (RobertaEmbeddings.create_position_ids_from...).
PADDING_OFFSET_TYPES = frozenset(
    {"roberta", "xlm-roberta", "camembert", "longformer", "roberta-prelayernorm", "data2vec-text", "xmod", "ibert"}
)
#: A tokenizer limit at or above this is the "no limit" sentinel (transformers' VERY_LARGE_INTEGER).
NO_LIMIT = 10**6
#: The window when neither the tokenizer nor the config gives a limit.
FALLBACK_TOKENS = 512

#: parquet metadata key of the context a score file's inputs were cut to
CONTEXT_METADATA = "lmbias.context_window"


@dataclass(frozen=True)
class ContextWindow:
    tokens: int  # the usable context: the smaller of the known limits (FALLBACK_TOKENS when none is known)
    tokenizer_limit: int | None  # the tokenizer's model_max_length, None when it has no real one
    config_limit: int | None  # the usable positions the config gives, None when it gives none
    config_key: str | None  # the config attribute they came from

    def metadata(self) -> dict[str, str]:
        """The score file's metadata entry (CONTEXT_METADATA)."""
        return {CONTEXT_METADATA: json.dumps(asdict(self), sort_keys=True)}


def _config_of(model):
    """The model's transformers config, through wrappers (Self-Debias, PEFT) that expose `config`."""
    return getattr(model, "config", None)


def config_positions(config) -> tuple[int | None, str | None]:
    """(usable positions, attribute name) from a model config; (None, None) when it names none."""
    if config is None:
        return None, None
    for key in CONFIG_POSITION_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            if getattr(config, "model_type", None) in PADDING_OFFSET_TYPES:
                pad = getattr(config, "pad_token_id", None)
                value -= (pad if isinstance(pad, int) else 1) + 1
            return value, key
    text = getattr(config, "text_config", None)  # a multimodal config holds its language model's inside
    return config_positions(text) if text is not None and text is not config else (None, None)


def tokenizer_limit(tokenizer) -> int | None:
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < NO_LIMIT else None


def context_window(model, tokenizer) -> ContextWindow:
    """The usable context of `model` read through `tokenizer` (module docstring)."""
    from_tokenizer = tokenizer_limit(tokenizer)
    from_config, key = config_positions(_config_of(model))
    known = [n for n in (from_tokenizer, from_config) if n is not None]
    return ContextWindow(min(known) if known else FALLBACK_TOKENS, from_tokenizer, from_config, key)
