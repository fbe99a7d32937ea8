"""Dropout rates of a model config: which keys each rate sets in each architecture, and the rebuilt model with
the rates a method asks for (GPR's overall rate, the Dropout recipe's hidden and attention rates). A rate that
lands on no key of the model's config is a ConfigError, never a silent no-op."""

from __future__ import annotations

import numbers

import torch

from lmbias.errors import ConfigError

#: Every dropout-rate key a supported config may hold (the overall rate `dropout` sets them all).
_DROPOUT_KEYS = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
    "dropout",
    "hidden_dropout",
    "attention_dropout",
    "activation_dropout",
    "summary_first_dropout",
)


#: The config keys of the hidden-state dropout (residual and embedding) and of the attention-probability
#: dropout, each read by its model's modeling code (transformers 5): BERT/RoBERTa/ALBERT
#: (hidden_dropout_prob, attention_probs_dropout_prob), GPT-2 (resid_pdrop, embd_pdrop, attn_pdrop), BART
#: (dropout, attention_dropout), GPT-NeoX/Pythia (hidden_dropout: embeddings, after attention and after the
#: MLP; attention_dropout). Llama, Qwen2, OLMo-2 (and Mistral, Gemma) have attention_dropout only: no
#: hidden-state dropout exists in them, so a hidden rate is an error there (set_dropout), never a no-op.
HIDDEN_DROPOUT_KEYS = ("hidden_dropout_prob", "resid_pdrop", "embd_pdrop", "dropout", "hidden_dropout")
ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attn_pdrop", "attention_dropout")
#: What each rate is, for the error of a rate a model has no key for (key: what setting it to null leaves)
_RATES = {
    "dropout": ("dropout", "the model's own rates"),
    "hidden_dropout": ("hidden-state dropout", "attention dropout only"),
    "attention_dropout": ("attention dropout", "hidden-state dropout only"),
}


def _is_rate(value) -> bool:
    """A config value that is a rate: a number (a JSON 0 loads as an int: a rate all the same), not a flag."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _rate_keys(config, keys) -> list[str]:
    """The keys of `keys` the config holds as a rate."""
    return [k for k in keys if _is_rate(getattr(config, k, None))]


def config_dropout_keys(config) -> list[str]:
    """Every dropout-rate key of a model config (named *dropout* or *pdrop*, with a number), for messages."""
    return sorted(k for k, v in config.to_dict().items() if ("dropout" in k or "pdrop" in k) and _is_rate(v))


def set_dropout(
    model,
    p: float | None = None,
    hidden: float | None = None,
    attention: float | None = None,
    model_name: str = "?",
    method: str | None = None,
):
    """The same model with every dropout rate set to `p` (GPR: 0.1 as Manela et al.), then the hidden and
    attention rates set to `hidden` / `attention` where given (the Dropout recipe, Webster et al. 2020).

    Every rate given must land on a key of this model's config: one it has no key for would train the model
    as it was while the method claims raised dropout, so it is a ConfigError naming training.<rate>, the
    method, the model type and the dropout keys the config does have (e.g. a Llama has attention dropout
    only: hidden_dropout: null trains with that alone)."""
    config = model.config
    for name, keys, value in (
        ("dropout", _DROPOUT_KEYS, p),
        ("hidden_dropout", HIDDEN_DROPOUT_KEYS, hidden),
        ("attention_dropout", ATTENTION_DROPOUT_KEYS, attention),
    ):
        if value is None:
            continue
        found = _rate_keys(config, keys)
        if not found:
            model_type = getattr(config, "model_type", "?")
            what, rest = _RATES[name]
            have = config_dropout_keys(config)
            where = (
                f"methods.{method}.training.{name} or models.{model_name}.training.{name}"
                if method
                else f"models.{model_name}.training.{name} or the method's training.{name}"
            )
            raise ConfigError(
                f"training.{name}: {value!r} (method {method or '?'}, model {model_name}) lands on no key of this "
                f"{model_type} config ({type(model).__name__}): {model_type} has no {what} (its config's dropout "
                f"keys: {', '.join(have) or 'none'}; the keys of this rate: {', '.join(keys)}). Set {name}: null "
                f"for it ({where}; a per-model value such as {{clm: {value}, {model_name}: null}}) to train with "
                f"{rest}"
            )
        for key in found:
            setattr(config, key, float(value))
    dtype = next(model.parameters()).dtype
    if next(model.parameters()).is_meta:  # an FSDP process that loads no weights (lmbias.training.fsdp)
        from lmbias.engine.models import empty_from_config

        return empty_from_config(type(model), config, dtype)
    # a half-precision base (LoRA) is rebuilt in its own dtype, not in float32 (twice its memory)
    new = type(model)(config) if dtype == torch.float32 else type(model)._from_config(config, dtype=dtype)
    new.load_state_dict(model.state_dict())
    return new
