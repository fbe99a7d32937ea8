"""Training settings: one frozen dataclass, validated key by key (errors name `key.<field>`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
from dataclasses import dataclass, fields

from lmbias.engine.batching import PRECISIONS
from lmbias.errors import ConfigError

OBJECTIVES = ("mlm", "clm", "infilling", "gpr")
#: the objective each model family fine-tunes with (cds/cda/er); gpr is mlm-only
FAMILY_OBJECTIVE = {"mlm": "mlm", "clm": "clm", "seq2seq": "infilling"}
#: ER's er_lambda: the one rule, shared with the method sweeps (lmbias.methods.sweeps)
ER_LAMBDA_RANGE = "> 0"
#: how the processes of a multi-process job share the model: ddp = a replica each (gradients averaged);
#: fsdp = parameters, gradients and optimizer state sharded (FSDP2, lmbias.training.fsdp)
DISTRIBUTED = ("ddp", "fsdp")
SELECT_EPOCH = ("last", "validation_accuracy")
BIAS_METRICS = ("occupations_aob",)  # the cheap probe Lu et al. (section 5.3) track: occupation AOB
#: infilling noise: BART's Poisson(3) spans redrawn every epoch, or DA-Gender's (bart_CDS.py / bart_ER.py)
#: whitespace words masked once for all epochs
INFILLING_MODES = ("poisson_spans", "static_words")
#: infilling sequences: BART's (encoder <s> x </s>; labels <s> x </s>; decoder input = labels shifted right
#: behind decoder_start_token_id), or DA-Gender's (encoder x </s> without <s>; decoder input <s> x; labels x </s>)
INFILLING_LAYOUTS = ("shift_right", "bos_decoder")
#: which side of an ER pair carries the LM loss: the corpus' original sentence (the paper), or its
#: counterfactual (DA-Gender's *_ER.py train on the flipped corpus; the partner is the re-flip, the original)
ER_LM_SIDES = ("original", "counterfactual")
#: e(s) of ER: family = mean over real tokens (mlm; seq2seq decoder) or the last real token (clm); mean = mean
#: over real tokens for every family; mean_padded = mean over all max_length positions of the sentence padded
#: to max_length (pads attention-masked; DA-Gender BERT/BART); pad_position = the state at position
#: max_length - 1 of the sentence padded to max_length (DA-Gender GPT-2: hidden_states[-1][:, -1]);
#: family_padded = DA-Gender's per family: pad_position for clm, mean_padded for mlm and seq2seq (so one
#: method entry reproduces their *_ER.py on every family)
ER_POOLINGS = ("family", "mean", "mean_padded", "pad_position", "family_padded")
#: CDA applied to packed blocks (lmbias.training.packing): bias-bench's gender augmentation (run_mlm.py)
BLOCK_AUGMENTATIONS = ("bias_bench_gender",)
#: training.adapter (lmbias.training.adapters): a parameter-efficient adapter trained over the frozen base
ADAPTER_KINDS = ("lora",)
#: the adapter block's keys and defaults: rank, scale alpha (the update is alpha / r * B A), dropout on the
#: adapter's input; target_modules null = the architecture's default (adapters.DEFAULT_TARGETS);
#: modules_to_save null = none (GPR: its MLM head's transform), trained in full beside the adapter;
#: merge true = also write base + adapter merged into model/merged/ (a plain model folder)
ADAPTER_DEFAULTS = {
    "kind": "lora",
    "r": 8,
    "alpha": 16,
    "dropout": 0.05,
    "target_modules": None,
    "modules_to_save": None,
    "merge": False,
}


def er_lambda_ok(value) -> bool:
    """ER's lambda: a real number above 0 (ER_LAMBDA_RANGE)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0


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
    #: infilling only (ignored otherwise; INFILLING_MODES): static_words masks infilling_mask_ratio of the words
    infilling_mode: str = "poisson_spans"
    infilling_layout: str = "shift_right"  # infilling only (ignored otherwise; INFILLING_LAYOUTS)
    er_lambda: float | None = None
    er_lm_side: str = "original"  # ER only (ER_LM_SIDES)
    er_pooling: str = "family"  # ER only (ER_POOLINGS)
    #: clm only (ignored for other objectives): the text each sentence is written into, "{text}" its place
    text_template: str = "{text}"
    #: null = dynamic padding (to the batch's longest row); n = every batch padded to n (>= max_length)
    pad_to_length: int | None = None
    #: clm/infilling only (ignored for mlm/gpr): the pad positions up to pad_to_length are loss targets
    #: (target = the pad token; GPT-2's pad is its end-of-text), as DA-Gender's gpt2_*/bart_* scripts
    padding_in_loss: bool = False
    #: linear warm-up over this many optimizer steps (null: warmup_ratio of the total)
    warmup_steps: int | None = None
    dropout: float | None = None
    #: Webster et al.'s Dropout recipe: the rate of the hidden-state (residual, embedding) dropout and of the
    #: attention-probability dropout, set separately (null: the model's own; applied after `dropout`)
    hidden_dropout: float | None = None
    attention_dropout: float | None = None
    select_epoch: str = "last"
    group_by_length: bool = True
    checkpoint_every_steps: int | None = None
    precision: str = "auto"
    eval_bias_every_steps: int | None = None
    eval_bias_metric: str = "occupations_aob"
    limit_examples: int | None = None
    text_column: str = "text"
    #: mlm/clm only. false: one example per text (truncated to max_length). true: bias-bench's (HF
    #: group_texts) blocks: the texts tokenised with special tokens, concatenated in corpus order in groups of
    #: 1,000 texts, each group cut into blocks of exactly max_length tokens and its remainder dropped
    #: (a group shorter than one block stays one short block); packing.pack_blocks
    pack_texts: bool = False
    #: needs pack_texts. null: the blocks as they are. bias_bench_gender: bias-bench's CDA on the blocks: only
    #: the blocks holding a word of block_augmentation_words are kept, each swapped and original
    #: (packing.augment_blocks)
    block_augmentation: str | None = None
    #: the word-pair file block_augmentation reads: bias-bench's data/bias_attribute_words.json (its "gender"
    #: list of [male, female] pairs), e.g. resources/data/bias_bench/bias_attribute_words.json (data.bias_bench)
    block_augmentation_words: str | None = None
    #: null: full fine-tuning. {kind: lora, r, alpha, dropout, target_modules, modules_to_save, merge}: a LoRA
    #: adapter over the frozen base (ADAPTER_DEFAULTS; lmbias.training.adapters), stored with every key filled in
    adapter: dict | None = None
    #: recompute each layer's activations in the backward pass instead of keeping them (HF's
    #: gradient_checkpointing_enable, non-reentrant): less activation memory for ~1/3 more compute, the same
    #: gradients (tested to float rounding); any objective, full fine-tuning or an adapter
    gradient_checkpointing: bool = False
    #: ddp (default; one process: plain training) or fsdp (DISTRIBUTED; lmbias.training.fsdp): full
    #: fine-tuning of a model whose weights, gradients and AdamW state do not fit one device
    distributed: str = "ddp"

    @classmethod
    def from_dict(cls, d: dict, key: str = "settings", origins: dict | None = None) -> TrainingSettings:
        """Validated settings; errors name `<key>.<field>`, or `<origins[field]>.<field>` where `origins`
        says which config block a value came from (models.<m>.training or methods.<m>.training)."""

        def where(name: str) -> str:
            return f"{(origins or {}).get(name, key)}.{name}"

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
            values[name] = _check(name, value, where(name))
        settings = cls(**values)
        if settings.select_epoch == "validation_accuracy" and settings.objective != "gpr":
            raise ConfigError(
                f"{key}.select_epoch: validation_accuracy needs objective gpr (pronoun accuracy), "
                f"not {settings.objective}"
            )
        if settings.er_lambda is not None and settings.objective == "gpr":
            raise ConfigError(f"{key}.er_lambda: embedding regularisation is for mlm/clm/infilling, not gpr")
        if settings.warmup_steps is not None and settings.warmup_ratio > 0:
            raise ConfigError(
                f"{where('warmup_steps')}: {settings.warmup_steps!r} together with warmup_ratio "
                f"{settings.warmup_ratio!r}; set one of them (warmup_ratio: 0 or warmup_steps: null)"
            )
        if settings.pad_to_length is not None and settings.pad_to_length < settings.max_length:
            raise ConfigError(
                f"{where('pad_to_length')}: {settings.pad_to_length!r} is below max_length "
                f"{settings.max_length!r}; need >= max_length so every batch is pad_to_length wide"
            )
        _check_packing(settings, where)
        _check_fsdp(settings, where)
        if settings.padding_in_loss and settings.pad_to_length is None:
            raise ConfigError(
                f"{where('padding_in_loss')}: true needs pad_to_length (with dynamic padding the "
                "pad targets would depend on which sentences share a batch)"
            )
        return settings

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def fingerprint(self, **extra) -> str:
        """sha256 of the settings plus `extra` (seed, world size, corpus, model): a checkpoint of another
        configuration is never resumed."""
        payload = json.dumps({"settings": self.to_dict(), **extra}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()


def _check_fsdp(s: TrainingSettings, where) -> None:
    """fsdp shards a full fine-tune; what runs one process alone or only half-wrapped is refused by name."""
    if s.distributed != "fsdp":
        return
    if s.adapter is not None:
        raise ConfigError(
            f"{where('distributed')}: fsdp shards a full fine-tune; a LoRA adapter trains a few "
            "parameters over a frozen base: use distributed: ddp with an adapter"
        )
    if s.precision == "fp16":
        raise ConfigError(
            f"{where('precision')}: fp16 (loss scaling) is not available with distributed: fsdp; use bf16 or fp32"
        )
    if s.objective == "gpr" or s.eval_bias_every_steps:
        name = "eval_bias_every_steps" if s.eval_bias_every_steps else "objective"
        raise ConfigError(
            f"{where(name)}: distributed: fsdp does not run the main process's evaluation passes "
            "(GPR validation, the bias probe) on a sharded model; use distributed: ddp"
        )


def _check_packing(s: TrainingSettings, where) -> None:
    if s.pack_texts:
        if s.objective not in ("mlm", "clm"):
            raise ConfigError(
                f"{where('pack_texts')}: true is for mlm and clm (bias-bench's run_mlm/run_clm), not {s.objective}"
            )
        if s.er_lambda is not None:
            raise ConfigError(
                f"{where('pack_texts')}: true with er_lambda; embedding regularisation pairs each "
                "sentence with its counterfactual, packed blocks have none"
            )
        if s.whole_word_masking:
            raise ConfigError(
                f"{where('pack_texts')}: true with whole_word_masking is not supported (word "
                "indices do not survive packing); set whole_word_masking: false"
            )
    if s.block_augmentation is not None:
        if not s.pack_texts:
            raise ConfigError(
                f"{where('block_augmentation')}: {s.block_augmentation!r} works on packed blocks; "
                "it needs pack_texts: true"
            )
        if s.block_augmentation_words is None:
            raise ConfigError(
                f"{where('block_augmentation_words')}: {s.block_augmentation!r} needs the word-pair "
                "file (bias-bench's bias_attribute_words.json, data.bias_bench)"
            )
    elif s.block_augmentation_words is not None:
        raise ConfigError(
            f"{where('block_augmentation_words')}: set, but block_augmentation is null (nothing "
            "reads it); set block_augmentation or drop block_augmentation_words"
        )


TEXT_PLACEHOLDER = "{text}"
_POSITIVE_INT = ("batch_size", "gradient_accumulation_steps", "epochs", "max_length")
_OPTIONAL_POSITIVE_INT = (
    "max_steps",
    "checkpoint_every_steps",
    "eval_bias_every_steps",
    "limit_examples",
    "pad_to_length",
)
_POSITIVE_FLOAT = ("learning_rate", "infilling_poisson_lambda")
_FRACTION = ("warmup_ratio", "adam_beta1", "adam_beta2")
_NONNEG_FLOAT = ("weight_decay", "adam_epsilon")
_PROBABILITY = ("mlm_probability", "infilling_mask_ratio")
_CHOICES = {
    "objective": OBJECTIVES,
    "precision": PRECISIONS,
    "select_epoch": SELECT_EPOCH,
    "eval_bias_metric": BIAS_METRICS,
    "infilling_mode": INFILLING_MODES,
    "infilling_layout": INFILLING_LAYOUTS,
    "er_lm_side": ER_LM_SIDES,
    "er_pooling": ER_POOLINGS,
    "distributed": DISTRIBUTED,
}


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
    elif name == "max_grad_norm":
        if value is not None and not (_is_number(value) and value > 0):
            bad = "null or a number > 0"
    elif name == "er_lambda":
        if value is not None and not er_lambda_ok(value):
            bad = f"null or a number {ER_LAMBDA_RANGE}"
    elif name == "warmup_steps":
        if value is not None and not (_is_int(value) and value >= 0):
            bad = "null or an integer >= 0"
    elif name == "text_template":
        if not isinstance(value, str) or value.count(TEXT_PLACEHOLDER) != 1:
            bad = f"a string holding {TEXT_PLACEHOLDER} exactly once"
    elif name in ("dropout", "hidden_dropout", "attention_dropout"):
        if value is not None and not (_is_number(value) and 0 <= value < 1):
            bad = "null or a number in [0, 1)"
    elif name == "block_augmentation":
        if value is not None and value not in BLOCK_AUGMENTATIONS:
            bad = f"null or one of {', '.join(BLOCK_AUGMENTATIONS)}"
    elif name == "block_augmentation_words":
        if value is not None and not (isinstance(value, str) and value.strip()):
            bad = "null or the path of a word-pair file"
    elif name in ("whole_word_masking", "group_by_length", "padding_in_loss", "pack_texts", "gradient_checkpointing"):
        if not isinstance(value, bool):
            bad = "true or false"
    elif name == "text_column":
        if not isinstance(value, str) or not value:
            bad = "a column name"
    elif name == "adapter":
        return _check_adapter(value, where)
    if bad:
        raise ConfigError(f"{where}: expected {bad}, got {value!r}")
    return (
        float(value)
        if name in _POSITIVE_FLOAT + _FRACTION + _NONNEG_FLOAT + _PROBABILITY and value is not None
        else value
    )


def _check_adapter(value, where: str) -> dict | None:
    """The adapter block with every key filled in (ADAPTER_DEFAULTS), or None; errors name `<where>.<key>`."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: expected null or a mapping {{kind: lora, r, alpha, dropout, target_modules}}, got {value!r}"
        )
    unknown = sorted(set(value) - set(ADAPTER_DEFAULTS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown adapter key (known: {', '.join(ADAPTER_DEFAULTS)})")
    if value.get("kind") not in ADAPTER_KINDS:
        raise ConfigError(f"{where}.kind: expected one of {', '.join(ADAPTER_KINDS)}, got {value.get('kind')!r}")
    out = {**ADAPTER_DEFAULTS, **value}
    checks = {
        "r": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
        "alpha": (lambda v: _is_number(v) and v > 0, "a number > 0"),
        "dropout": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
        "target_modules": (
            lambda v: v is None or (isinstance(v, list) and v and all(isinstance(m, str) and m for m in v)),
            "null (the architecture's default) or a non-empty list of layer names",
        ),
        "modules_to_save": (
            lambda v: v is None or (isinstance(v, list) and all(isinstance(m, str) and m for m in v)),
            "null or a list of module names",
        ),
        "merge": (lambda v: isinstance(v, bool), "true or false"),
    }
    for key, (ok, text) in checks.items():
        if not ok(out[key]):
            raise ConfigError(f"{where}.{key}: expected {text}, got {out[key]!r}")
    out["alpha"] = float(out["alpha"]) if not _is_int(out["alpha"]) else out["alpha"]
    out["dropout"] = float(out["dropout"])
    return out
