"""Tiny sequence-classification models (BERT, RoBERTa) built here, for testing the classifier scorers
(lmbias.engine.classifiers) without the hub: a random one, and a *planted* one whose output is known in advance.

The real classifiers the scorers are meant for (a RoBERTa toxicity classifier, a BERT regard classifier) are not
reachable from this machine, so every test of the scorers runs on these. They use the tiny models' tokenizers
(lmbias.engine.tiny, the project's word list) and sizes.

Random (``build_tiny_classifier(..., planted=None)``): the tiny config with ``num_labels``, ``id2label`` and
``problem_type``, every weight drawn under `seed` with a standard deviation of RANDOM_INIT_RANGE (0.2, not
transformers' 0.02) and the output layer's of RANDOM_OUTPUT_STD (0.3): with the default, every text gets about the
same probabilities (the [CLS] state hardly depends on the other tokens), so a padding or batching mistake would
not show; with these, the probabilities of different texts differ by tenths.

Planted (``planted={word: label}``, BERT only): a BERT whose weights are set by hand so that its logits are

    logit[l] = bias[l] + 2 * margin * [some planted word of label l occurs in the text]

with ``bias[default_label] = 0`` and ``bias[l] = -margin`` for every other label, exactly (to float32 rounding of
these sums). With margin 4, a two-label ``[neutral, toxic]`` model planted ``{"terrible": "toxic"}`` gives
p(toxic) = sigmoid(-4) = 0.01799 without the word and sigmoid(4) = 0.98201 with it, under softmax and sigmoid alike.
A word occurs when its token does (the uncased WordPiece tokenizer: "Terrible," counts, "terribles" splits
into "terrible" + "##s" and counts too); each planted word must be a single token of the tokenizer (it is added to
the word list when it is not in it).

Why it is exact. Every label l that some planted word maps to gets a pair of hidden coordinates (2p, 2p+1); the
signal of label l is the vector s_p = e_2p - e_2p+1, whose mean over the coordinates is 0. All weights start at
zero; then

* word embeddings: the row of each planted word of label l is s_p; every other row, every position and token-type
  embedding is 0. The embeddings' layer norm (weight 1, bias 0) maps 0 to 0 and s_p to c * s_p (c > 0): every
  token's state is a non-negative combination of the signals, and [CLS]'s is 0.
* each layer: query and key weights 0, so attention is uniform over the real tokens (padding masked to weight 0);
  value and output projections the identity, so the attention output at every position is the mean of the
  states plus the position's own (the residual); the feed-forward block is 0 (gelu(0) = 0) and adds only the
  residual; both layer norms (weight 1, bias 0) rescale a zero-mean vector by a positive number and leave 0 at 0.
  By induction, every state stays a non-negative combination of the signals, [CLS]'s has a positive coefficient
  on s_p exactly when a word of label l occurs in the text (the mean over the tokens carries it there), and is
  exactly 0 when no planted word occurs.
* pooler: its output p is tanh(PLANTED_GAIN * x), x the coordinate 2p of the [CLS] state: 0 exactly when no
  word of label l occurs, and 1.0 exactly (tanh saturates in float32 above 9.1) when one does: x is then positive,
  and the gain is large enough for the smallest value it takes on the tiny models' inputs (at most 512 tokens;
  after the first layer it is at least sqrt(32) / 512, and tests/engine/test_classifiers.py checks one planted
  word among 400 of another label).
* classifier: weight 2 * margin from pooled output p to label l, bias as above.

Same arguments -> the same files (seeded; a temporary folder renamed into place, lmbias.io.atomic_folder).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from lmbias.engine.tiny import TINY_SIZE, build_tokenizer, seed_everything, tiny_config
from lmbias.engine.tiny_vocab import DEFAULT_WORDS, load_word_list
from lmbias.errors import ConfigError
from lmbias.io import atomic_folder

log = logging.getLogger(__name__)

CLASSIFIER_ARCHITECTURES = ("bert", "roberta")
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification")
#: The pooler's gain in a planted classifier (module docstring: it saturates tanh for any input of <= 512 tokens).
PLANTED_GAIN = 1.0e6
#: Standard deviation of a random classifier's weights, and of its output layer's (module docstring).
RANDOM_INIT_RANGE = 0.2
RANDOM_OUTPUT_STD = 0.3
#: Provenance file written next to the weights.
CLASSIFIER_INFO_FILE = "tiny_classifier.json"


def _check_labels(labels: Sequence[str]) -> list[str]:
    labels = [str(label) for label in labels]
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ConfigError(f"tiny classifier: labels {labels!r} must be at least two distinct names")
    return labels


def _classifier_model(architecture: str, tokenizer, labels: list[str], problem_type: str):
    import torch
    from transformers import BertForSequenceClassification, RobertaForSequenceClassification

    config = tiny_config(architecture, tokenizer)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    config.problem_type = problem_type
    config.initializer_range = RANDOM_INIT_RANGE
    model_class = {"bert": BertForSequenceClassification, "roberta": RobertaForSequenceClassification}[architecture]
    with torch.device("cpu"):
        return model_class(config).eval()


def _output_layer(model):
    """The last Linear of the classification head (BERT: classifier; RoBERTa: classifier.out_proj)."""
    head = model.classifier
    return getattr(head, "out_proj", head)


def plant_classifier(model, tokenizer, planted: Mapping[str, str], default_label: str, margin: float) -> dict:
    """Set a BertForSequenceClassification's weights to the planted construction of the module docstring;
    returns {word: token id}."""
    import torch

    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    if default_label not in labels:
        raise ConfigError(f"tiny classifier: default label {default_label!r} is not one of {labels}")
    signal_labels = sorted({label for label in planted.values()}, key=labels.index)
    unknown = sorted(set(planted.values()) - set(labels))
    if unknown:
        raise ConfigError(f"tiny classifier: planted label(s) {unknown} are not among {labels}")
    hidden = model.config.hidden_size
    if 2 * len(signal_labels) > hidden:
        raise ConfigError(f"tiny classifier: at most {hidden // 2} planted labels fit a hidden size of {hidden}")
    token_ids = {}
    for word in planted:
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or ids[0] == tokenizer.unk_token_id:
            raise ConfigError(
                f"tiny classifier: planted word {word!r} is not one token ({tokenizer.convert_ids_to_tokens(ids)})"
            )
        token_ids[word] = int(ids[0])
    pair = {label: p for p, label in enumerate(signal_labels)}
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
        eye = torch.eye(hidden)
        for layer in model.bert.encoder.layer:
            layer.attention.self.value.weight.copy_(eye)
            layer.attention.output.dense.weight.copy_(eye)
        embeddings = model.bert.embeddings.word_embeddings.weight
        for word, label in planted.items():
            p = pair[label]
            embeddings[token_ids[word], 2 * p] = 1.0
            embeddings[token_ids[word], 2 * p + 1] = -1.0
        pooler = model.bert.pooler.dense.weight
        classifier = model.classifier
        for label, p in pair.items():
            pooler[p, 2 * p] = PLANTED_GAIN
            classifier.weight[labels.index(label), p] = 2.0 * margin
        classifier.bias.copy_(torch.tensor([0.0 if label == default_label else -margin for label in labels]))
    return token_ids


def build_tiny_classifier(
    out_dir: str | os.PathLike,
    labels: Sequence[str] = ("neutral", "toxic"),
    *,
    architecture: str = "bert",
    seed: int = 0,
    problem_type: str = "single_label_classification",
    planted: Mapping[str, str] | None = None,
    default_label: str | None = None,
    margin: float = 4.0,
    words: str | os.PathLike | None = None,
) -> Path:
    """Build a tiny sequence classifier into `out_dir` (replaced atomically): random under `seed`, or planted
    (`planted` {word: label}; `default_label`, default the first label; `margin`), see the module docstring.
    Saved with save_pretrained (safetensors), the tokenizer and CLASSIFIER_INFO_FILE."""
    import torch

    if architecture not in CLASSIFIER_ARCHITECTURES:
        raise ConfigError(f"tiny classifier: architecture {architecture!r} is not one of {CLASSIFIER_ARCHITECTURES}")
    if problem_type not in PROBLEM_TYPES:
        raise ConfigError(f"tiny classifier: problem_type {problem_type!r} is not one of {PROBLEM_TYPES}")
    if planted and architecture != "bert":
        raise ConfigError("tiny classifier: a planted classifier is built on the bert architecture only")
    labels = _check_labels(labels)
    words_path = Path(words) if words is not None else DEFAULT_WORDS
    word_list = load_word_list(words_path)
    missing = [w for w in (planted or {}) if w not in word_list]
    tokenizer = build_tokenizer(architecture, word_list + missing)
    seed_everything(seed)
    model = _classifier_model(architecture, tokenizer, labels, problem_type)
    token_ids = {}
    if planted:
        token_ids = plant_classifier(model, tokenizer, planted, default_label or labels[0], float(margin))
    else:
        with torch.no_grad():
            _output_layer(model).weight.normal_(0.0, RANDOM_OUTPUT_STD)
    with atomic_folder(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        info = {
            "architecture": architecture,
            "seed": seed,
            "labels": labels,
            "problem_type": problem_type,
            "planted": dict(sorted((planted or {}).items())),
            "planted_token_ids": token_ids,
            "default_label": (default_label or labels[0]) if planted else None,
            "margin": float(margin) if planted else None,
            "size": TINY_SIZE,
        }
        (tmp / CLASSIFIER_INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    log.info("built tiny %s classifier %s (labels %s, planted %s)", architecture, out_dir, labels, planted or "none")
    return Path(out_dir)
