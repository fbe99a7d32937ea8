"""Method kinds (config.yaml `methods.<name>: {kind: ...}`): the kinds, the keys each kind's entry accepts,
the training settings a config may set, and the per-family values of a training block. lmbias.methods.resolution
checks and resolves method entries with them; lmbias.methods.sweeps names the kinds each sweepable setting applies to.
"""

from __future__ import annotations

from lmbias.errors import ConfigError

#: Methods whose result does not depend on a random seed: they run once, in seed0/.
DETERMINISTIC_METHOD_KINDS = frozenset({"pretrained", "online", "sd", "inlp", "self_debias"})
#: Kinds that fine-tune the model (rule finetune), and the kinds that fit a projection of the final hidden
#: states (rules fit_sentence_debias and fit_inlp).
TRAINED_METHOD_KINDS = frozenset({"cds", "cda", "er", "gpr", "dropout"})
FITTED_METHOD_KINDS = frozenset({"sd", "inlp"})

#: Keys each kind accepts (the schema's enum of kinds is closed; this closes each kind's keys).
METHOD_KEYS = {
    "pretrained": ("kind",),
    "online": ("kind",),
    # Self-Debias (lmbias.engine.self_debias): decoding-time, nothing trained; options with bias-bench's defaults
    "self_debias": ("kind", "prefix", "decay_constant", "epsilon"),
    "cds": ("kind", "corpus", "training"),
    "cda": ("kind", "corpus", "training"),
    "er": ("kind", "corpus", "training"),
    "gpr": ("kind", "corpus", "training"),
    # Webster et al.'s Dropout: continued pre-training with raised dropout (training.hidden_dropout/attention_dropout)
    "dropout": ("kind", "corpus", "training"),
    # INLP (Ravfogel et al. 2020, as bias-bench): lmbias.training.inlp.INLPSettings
    "inlp": ("kind", "corpus")
    + (
        "n_iterations",
        "classifier",
        "sentences_per_class",
        "dev_fraction",
        "seed",
        "batch_size",
        "max_length",
        "limit_sentences",
        "text_column",
        "precision",
        "test_fraction",
        "dropout_rate",
    ),
    "sd": ("kind", "corpus")
    + (
        "ratio_of_pairs",
        "k",
        "batch_size",
        "max_length",
        "limit_sentences",
        "text_column",
        "application",
        "pair_list",
        "pair_selection",
        "pair_matching",
        "fit_pooling",
        "pad_to",
        "precision",
    ),
}
#: SentenceDebias settings (lmbias.training.sentence_debias.SDSettings) a method entry of kind sd may set.
SD_KEYS = METHOD_KEYS["sd"][2:]
#: INLP settings (lmbias.training.inlp.INLPSettings) a method entry of kind inlp may set.
INLP_KEYS = METHOD_KEYS["inlp"][2:]


#: lmbias.training.settings.TrainingSettings fields a config may set (`objective` is implied by family and kind).
TRAINING_KEYS = frozenset(
    {
        "learning_rate",
        "batch_size",
        "gradient_accumulation_steps",
        "epochs",
        "max_steps",
        "warmup_ratio",
        "weight_decay",
        "adam_beta1",
        "adam_beta2",
        "adam_epsilon",
        "max_grad_norm",
        "max_length",
        "mlm_probability",
        "whole_word_masking",
        "infilling_mask_ratio",
        "infilling_poisson_lambda",
        "er_lambda",
        "dropout",
        "hidden_dropout",
        "attention_dropout",
        "select_epoch",
        "group_by_length",
        "checkpoint_every_steps",
        "precision",
        "eval_bias_every_steps",
        "eval_bias_metric",
        "limit_examples",
        "text_column",
        # the DA-Gender authors' recipes (settings.TrainingSettings documents each; null/default = the paper's)
        "warmup_steps",
        "text_template",
        "pad_to_length",
        "padding_in_loss",
        "infilling_mode",
        "infilling_layout",
        "er_lm_side",
        "er_pooling",
        # bias-bench's run_mlm/run_clm data (lmbias.training.packing): packed blocks, CDA on the blocks
        "pack_texts",
        "block_augmentation",
        "block_augmentation_words",
        # a LoRA adapter over the frozen base instead of full fine-tuning (lmbias.training.adapters)
        "adapter",
        # activations recomputed in the backward pass (any training method; trainer.enable_gradient_checkpointing)
        "gradient_checkpointing",
        # FSDP2: weights, gradients and optimizer state sharded over the job's processes (lmbias.training.fsdp)
        "distributed",
    }
)
#: Training settings whose value is itself a mapping: its own values may be per-family (per_family_values).
MAPPING_TRAINING_KEYS = frozenset({"adapter"})
#: Per-model defaults (over-debiasing paper, Table 12) that are not trainer settings: the CDS swap rate
#: (fills `{swap_rate}` in a method's corpus path) and SentenceDebias' ratio of word pairs.
MODEL_METHOD_DEFAULTS = frozenset({"swap_rate", "ratio_of_pairs"})


def method_kind(name: str, entry: dict) -> str:
    kind = entry.get("kind") if isinstance(entry, dict) else None
    if kind not in METHOD_KEYS:
        raise ConfigError(
            f"methods.{name}.kind: {kind!r} is not a method kind; known kinds: {', '.join(sorted(METHOD_KEYS))}"
        )
    return kind


def check_training_block(block: dict, key: str, extra=frozenset()) -> None:
    if not isinstance(block, dict):
        raise ConfigError(f"{key}: expected a mapping of training settings, got {block!r}")
    for name in block:
        if name == "objective":
            raise ConfigError(
                f"{key}.objective: not settable; it follows from the model's family and the method's kind"
            )
        if name not in TRAINING_KEYS and name not in extra:
            raise ConfigError(
                f"{key}.{name}: unknown training setting (allowed: {', '.join(sorted(TRAINING_KEYS | set(extra)))})"
            )


#: The model families a per-family training value may name (lmbias.engine.model_spec.FAMILIES).
PER_FAMILY_KEYS = ("mlm", "clm", "seq2seq", "encoder")


def per_family_values(block: dict, family: str, key: str, model: str | None = None, model_names=()) -> dict:
    """A method's `training` block with each per-family value resolved for `family` (and `model`).

    A value written as a mapping of family -> value (`warmup_steps: {mlm: 0, clm: 100, seq2seq: 100}`) is the
    value of this model's family; a family it does not name leaves the setting at the model's default (the
    key is dropped). One recipe entry can so carry what an authors' code does differently per model family.
    A key may also be a configured model's name (one of `model_names`), whose value wins over its family's:
    bias-bench raises ALBERT's dropout less than BERT's, both masked LMs (`{mlm: 0.2, albert-base: 0.05}`).
    A mapping with a key that is neither is a ConfigError naming it."""
    out = {}
    for name, value in block.items():
        if name in MAPPING_TRAINING_KEYS and isinstance(value, dict):  # {kind: lora, r: {clm: 16, mlm: 8}, ...}
            out[name] = per_family_values(value, family, f"{key}.{name}", model, model_names)
            continue
        if isinstance(value, dict):
            if name in MODEL_METHOD_DEFAULTS:
                raise ConfigError(
                    f"{key}.{name}: one value for every family (a per-family mapping is for trainer "
                    "settings; the corpus a swap rate names is shared by all models)"
                )
            unknown = sorted(set(value) - set(PER_FAMILY_KEYS) - set(model_names))
            if unknown:
                raise ConfigError(
                    f"{key}.{name}.{unknown[0]}: not a model family or a configured model; a per-family "
                    f"value maps families ({', '.join(PER_FAMILY_KEYS)}) or model names to values"
                )
            if model is not None and model in value:
                out[name] = value[model]
            elif family in value:
                out[name] = value[family]
            continue
        out[name] = value
    return out
