"""Training settings: one frozen dataclass, validated key by key (errors name `key.<field>`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, fields

from lmbias.errors import ConfigError

OBJECTIVES = ("mlm", "clm", "infilling", "gpr")
#: the objective each model family fine-tunes with (cds/cda/er); gpr is mlm-only
FAMILY_OBJECTIVE = {"mlm": "mlm", "clm": "clm", "seq2seq": "infilling"}
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
SELECT_EPOCH = ("last", "validation_accuracy")
BIAS_METRICS = ("occupations_aob",)  # the cheap probe Lu et al. (section 5.3) track: occupation AOB


@dataclass(frozen=True)
class TrainingSettings:
    objective: str
    learning_rate: float = 5e-5
    batch_size: int = 16  # per process
    gradient_accumulation_steps: int = 1
    epochs: int = 8
    max_steps: int | None = None
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float | None = 1.0
    max_length: int = 128
    mlm_probability: float = 0.15
    whole_word_masking: bool = False
    infilling_mask_ratio: float = 0.3
    infilling_poisson_lambda: float = 3.0
    er_lambda: float | None = None
    dropout: float | None = None
    select_epoch: str = "last"
    group_by_length: bool = True
    checkpoint_every_steps: int | None = None
    precision: str = "auto"
    eval_bias_every_steps: int | None = None
    eval_bias_metric: str = "occupations_aob"
    limit_examples: int | None = None
    text_column: str = "text"

    @classmethod
    def from_dict(cls, d: dict, key: str = "settings") -> "TrainingSettings":
        if not isinstance(d, dict):
            raise ConfigError(f"{key}: expected a mapping of training settings, got {d!r}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}: unknown training setting (known: {', '.join(known)})")
        if "objective" not in d:
            raise ConfigError(f"{key}.objective: missing (one of {', '.join(OBJECTIVES)})")
        values = {}
        for name, value in d.items():
            values[name] = _check(name, value, f"{key}.{name}")
        settings = cls(**values)
        if settings.select_epoch == "validation_accuracy" and settings.objective != "gpr":
            raise ConfigError(f"{key}.select_epoch: validation_accuracy needs objective gpr (pronoun accuracy), "
                              f"not {settings.objective}")
        if settings.er_lambda is not None and settings.objective == "gpr":
            raise ConfigError(f"{key}.er_lambda: embedding regularisation is for mlm/clm/infilling, not gpr")
        return settings

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def fingerprint(self, **extra) -> str:
        """sha256 of the settings plus `extra` (seed, world size, corpus, model): a checkpoint of another
        configuration is never resumed."""
        payload = json.dumps({"settings": self.to_dict(), **extra}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()


_POSITIVE_INT = ("batch_size", "gradient_accumulation_steps", "epochs", "max_length")
_OPTIONAL_POSITIVE_INT = ("max_steps", "checkpoint_every_steps", "eval_bias_every_steps", "limit_examples")
_POSITIVE_FLOAT = ("learning_rate", "infilling_poisson_lambda")
_FRACTION = ("warmup_ratio", "adam_beta1", "adam_beta2")
_NONNEG_FLOAT = ("weight_decay", "adam_epsilon")
_PROBABILITY = ("mlm_probability", "infilling_mask_ratio")
_CHOICES = {"objective": OBJECTIVES, "precision": PRECISIONS, "select_epoch": SELECT_EPOCH,
            "eval_bias_metric": BIAS_METRICS}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check(name: str, value, where: str):
    bad = None
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            bad = f"one of {', '.join(_CHOICES[name])}"
    elif name in _POSITIVE_INT:
        if not (_is_int(value) and value >= 1):
            bad = "an integer >= 1"
    elif name in _OPTIONAL_POSITIVE_INT:
        if value is not None and not (_is_int(value) and value >= 1):
            bad = "null or an integer >= 1"
    elif name in _POSITIVE_FLOAT:
        if not (_is_number(value) and value > 0):
            bad = "a number > 0"
    elif name in _FRACTION:
        if not (_is_number(value) and 0 <= value < 1):
            bad = "a number in [0, 1)"
    elif name in _NONNEG_FLOAT:
        if not (_is_number(value) and value >= 0):
            bad = "a number >= 0"
    elif name in _PROBABILITY:
        if not (_is_number(value) and 0 < value < 1):
            bad = "a number in (0, 1)"
    elif name == "max_grad_norm" or name == "er_lambda":
        if value is not None and not (_is_number(value) and value > 0):
            bad = "null or a number > 0"
    elif name == "dropout":
        if value is not None and not (_is_number(value) and 0 <= value < 1):
            bad = "null or a number in [0, 1)"
    elif name in ("whole_word_masking", "group_by_length"):
        if not isinstance(value, bool):
            bad = "true or false"
    elif name == "text_column":
        if not isinstance(value, str) or not value:
            bad = "a column name"
    if bad:
        raise ConfigError(f"{where}: expected {bad}, got {value!r}")
    return float(value) if name in _POSITIVE_FLOAT + _FRACTION + _NONNEG_FLOAT + _PROBABILITY and value is not None \
        else value
