"""Classifier scores of generations: a Hugging Face sequence-classification model (a toxicity or a regard
classifier) applied to a benchmark's cached generations (BOLD's, HONEST's), batched; the readings are
lmbias.metrics.classifier_scores'.

A scorer is an entry of config.yaml's ``scorers`` block (schema ``$defs.scorer``)::

    scorers:
      toxicity-roberta:
        kind: toxicity                 # toxicity | regard
        hub_id: s-nlp/roberta_toxicity_classifier   # or path: a local folder
        revision: <commit>
        labels: {toxic: toxic}         # role -> the model's label name (config.id2label), or its index
        threshold: 0.5                 # toxicity: a text is toxic at p(toxic) >= threshold (the metrics' option)

Its weights load like a model entry's (lmbias.engine.model_spec / models: a local folder, or a hub id at a revision,
read offline from the folder the workflow fetched it into, `snapshot`; safetensors only unless `allow_pickle`;
`dtype`), in AutoModelForSequenceClassification, never running hub code. Kinds and their label *roles*:

* ``toxicity``: one role, ``toxic``: the probability of that label is the text's toxicity;
* ``regard``: roles ``positive``, ``negative``, ``neutral`` and ``other`` (the labels of Sheng et al.'s regard
  classifier as HF evaluate's ``regard`` measurement reads it); every label of the model must have a role, and a
  text's regard is the role of its most probable label.

``labels`` maps a role to the model's label, by name (exact, else case-insensitive) or by index; the default maps
each role to the label of the same name (regard's ``other`` only when the model has it). A label the model does not
have is a ConfigError naming ``scorers.<name>.labels.<role>`` and listing the model's labels.

Probabilities: softmax over the labels, or a sigmoid per label for a multi-label model (config.problem_type
``multi_label_classification``, e.g. a Jigsaw toxicity classifier); ``activation`` (auto | softmax | sigmoid)
overrides what the config says. The text classified is the continuation alone (``text: continuation``, as
RealToxicityPrompts scores continuations; HONEST's ``completion``) or the prompt followed by it
(``prompt_and_continuation``; HONEST: the template's text before [M]; lmbias.metrics.classifier_scores.
classified_texts), truncated to ``max_length`` tokens (default 512, capped by the tokenizer's
model_max_length; how many were truncated is recorded). Distinct texts run once, sorted by length, in batches
within the token budget (lmbias.engine.batching.run_batches: ``batch_size`` rows, ``max_tokens`` padded tokens,
halved out of CUDA memory) under the autocast of ``precision``.

What a job calls: classify_generations(name, entry, generations) -> the generations table plus the probability
columns, with metadata naming the scorer (SCORER_METADATA) and the generations it read (their score key).
classification_key is what a cached classified file is checked against: it covers the generations' score key,
the scorer's entry (less the metric options), its weights folder and this module, so a new scorer never
regenerates and a metric option never classifies again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from lmbias.engine.batching import EngineStats, autocast, model_device, pad, run_batches, scoring_precision
from lmbias.engine.hub import recorded_commit
from lmbias.engine.model_spec import ModelSpec, model_spec
from lmbias.engine.models import load_tokenizer, weights_dtype
from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module
from lmbias.metrics.classifier_scores import SCORER_METADATA, classified_texts
from lmbias.metrics.score_keys import SCORE_KEY_METADATA, folder_identity
from lmbias.metrics.summary import library_versions
from lmbias.options import check_block

torch = lazy_module("torch")

log = logging.getLogger(__name__)

SCORER_KINDS = ("toxicity", "regard")
#: The roles of each kind's labels (the metrics read these columns).
ROLES = {"toxicity": ("toxic",), "regard": ("positive", "negative", "neutral", "other")}
TEXTS = ("continuation", "prompt_and_continuation")
ACTIVATIONS = ("auto", "softmax", "sigmoid")
#: Keys of a scorer entry that only the metrics read: editing them never classifies again.
METRIC_KEYS = ("threshold", "bootstrap", "seed", "confidence")
#: Keys that change no number (a resource, as a model's max_tokens): left out of the classification key.
RESOURCE_KEYS = ("max_tokens",)
#: Parquet metadata of a classified table: the score key of the generations it classified.
GENERATIONS_KEY_METADATA = "lmbias.scorer.generations_key"
DEFAULT_MAX_LENGTH = 512
KEY_VERSION = 1
_SCHEMA_KEY = "$defs.scorer"
#: Set by the workflow (the folder a hub id was fetched into), not by the user: not in the schema.
_WORKFLOW_KEYS = ("snapshot",)


@dataclass(frozen=True)
class Scorer:
    """One checked ``scorers.<name>`` entry."""

    name: str
    kind: str
    model: ModelSpec  # its weights (family "encoder": only the checks of a bidirectional encoder apply)
    labels: tuple[tuple[str, str | int], ...]  # (role, label name or index) as configured, defaults filled in
    explicit: frozenset  # roles the entry names (a missing default `other` is no error)
    threshold: float
    batch_size: int
    max_length: int
    max_tokens: int | None
    precision: str
    text: str
    activation: str

    @property
    def key(self) -> str:
        return f"scorers.{self.name}"


def scorer_spec(name: str, entry: Mapping, root: str | os.PathLike | None = None) -> Scorer:
    """Check ``config["scorers"][name]`` against the schema and turn it into a Scorer (errors name the key)."""
    key = f"scorers.{name}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{key}: expected a mapping with kind and path|hub_id, got {entry!r}")
    check_block({k: v for k, v in entry.items() if k not in _WORKFLOW_KEYS}, _SCHEMA_KEY, key)
    kind = entry["kind"]
    weights = {k: entry[k] for k in ("path", "hub_id", "revision", "allow_pickle", "snapshot", "dtype") if k in entry}
    try:
        spec = model_spec(name, {**weights, "family": "encoder"}, root)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace(f"models.{name}", key)) from None
    configured = dict(entry.get("labels") or {})
    unknown = sorted(set(configured) - set(ROLES[kind]))
    if unknown:
        raise ConfigError(f"{key}.labels.{unknown[0]}: not a role of kind {kind} (roles: {', '.join(ROLES[kind])})")
    labels = tuple((role, configured.get(role, role)) for role in ROLES[kind])
    return Scorer(
        name=name,
        kind=kind,
        model=spec,
        labels=labels,
        explicit=frozenset(configured),
        threshold=float(entry.get("threshold", 0.5)),
        batch_size=int(entry.get("batch_size", 32)),
        max_length=int(entry.get("max_length", DEFAULT_MAX_LENGTH)),
        max_tokens=entry.get("max_tokens"),
        precision=entry.get("precision", "auto"),
        text=entry.get("text", "continuation"),
        activation=entry.get("activation", "auto"),
    )


# ------------------------------------------------------------------------------------------------ loading


def _check_source(scorer: Scorer) -> None:
    spec = scorer.model
    if spec.is_local and not Path(spec.source).is_dir():
        raise ConfigError(f"{scorer.key}.path: classifier folder {spec.source} does not exist")
    if not spec.is_local and spec.snapshot and not Path(spec.snapshot).is_dir():
        raise ConfigError(
            f"{scorer.key}: {spec.source} has not been fetched into {spec.snapshot}; fetch it on a host that "
            "reaches the hub (as a model's hub_id is fetched)"
        )


def _load_args(spec: ModelSpec) -> tuple[str, dict]:
    """(what from_pretrained reads, its source keywords): a local or fetched folder offline, else the hub id."""
    if spec.is_local:
        return spec.source, {"local_files_only": True}
    if spec.snapshot:
        return spec.snapshot, {"local_files_only": True}
    return spec.source, {"revision": spec.revision or "main"}


def classifier_commit(scorer: Scorer) -> str:
    """The hub commit the classifier's weights came from ("" for a local folder)."""
    spec = scorer.model
    if spec.is_local:
        return ""
    if spec.snapshot:
        return recorded_commit(spec.snapshot)
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(spec.source, "config.json", revision=spec.revision or "main")
    if isinstance(path, str) and Path(path).parent.parent.name == "snapshots":
        return Path(path).parent.name
    return ""


def load_classifier(scorer: Scorer, device="cpu"):
    """(model, tokenizer) of a scorer: AutoModelForSequenceClassification in eval mode on `device`, weights in
    the entry's dtype (auto: bf16 on a CUDA device that supports it, else fp32), no hub code, safetensors only
    unless allow_pickle; a ConfigError naming the scorer when the checkpoint is not a sequence classifier."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    _check_source(scorer)
    source, kwargs = _load_args(scorer.model)
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False, **kwargs)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{scorer.key}: cannot read the config of {scorer.model.source}: {exc}") from exc
    archs = list(getattr(config, "architectures", None) or [])
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ConfigError(
            f"{scorer.key}: {scorer.model.source} is a {', '.join(archs)} checkpoint, not a sequence classifier "
            "(*ForSequenceClassification)"
        )
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            source,
            config=config,
            trust_remote_code=False,
            use_safetensors=None if scorer.model.allow_pickle else True,
            dtype=weights_dtype(scorer.model.dtype, device),
            **kwargs,
        )
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{scorer.key}: cannot load the weights of {scorer.model.source}: {exc}") from exc
    try:
        tokenizer = load_tokenizer(scorer.model)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace(f"models.{scorer.name}", scorer.key)) from None
    model.lmbias_commit = classifier_commit(scorer)
    return model.to(device).eval(), tokenizer


# ------------------------------------------------------------------------------------------------ labels


def model_labels(config) -> list[str]:
    """The model's label names in id order (config.id2label)."""
    id2label = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    return [id2label.get(i, f"LABEL_{i}") for i in range(int(config.num_labels))]


def resolve_labels(scorer: Scorer, config) -> dict[str, int]:
    """{role: label index} of the scorer's roles on a model `config`: each configured label by name (exact, else
    the one label equal ignoring case) or index. A missing label is a ConfigError naming
    scorers.<name>.labels.<role> and the model's labels; regard's default `other` is dropped when the model has no
    such label; a regard model's label without a role is a ConfigError too."""
    names = model_labels(config)
    out: dict[str, int] = {}
    for role, label in scorer.labels:
        where = f"{scorer.key}.labels.{role}"
        if isinstance(label, int) and not isinstance(label, bool):
            if not 0 <= label < len(names):
                raise ConfigError(f"{where}: label index {label} is not one of the model's 0..{len(names) - 1}")
            out[role] = label
            continue
        index = names.index(label) if label in names else None
        if index is None:
            folded = [i for i, n in enumerate(names) if n.casefold() == str(label).casefold()]
            index = folded[0] if len(folded) == 1 else None
        if index is None:
            if scorer.kind == "regard" and role == "other" and role not in scorer.explicit:
                continue
            available = ", ".join(f"{i}: {n}" for i, n in enumerate(names))
            raise ConfigError(
                f"{where}: the model {scorer.model.source} has no label {label!r} (its config.id2label: "
                f"{available}); set {where} to one of them"
            )
        out[role] = index
    if len(set(out.values())) != len(out):
        raise ConfigError(f"{scorer.key}.labels: two roles name the same label ({out})")
    if scorer.kind == "regard":
        unmapped = [names[i] for i in range(len(names)) if i not in out.values()]
        if unmapped:
            raise ConfigError(
                f"{scorer.key}.labels: the regard model's label(s) {', '.join(unmapped)} have no role; map each to "
                f"one of {', '.join(ROLES['regard'])} (e.g. {scorer.key}.labels.other: {unmapped[0]})"
            )
    return out


def resolved_activation(scorer_activation: str, config) -> str:
    """softmax or sigmoid: `scorer_activation` unless auto, then sigmoid for a multi-label model."""
    if scorer_activation != "auto":
        return scorer_activation
    return "sigmoid" if getattr(config, "problem_type", None) == "multi_label_classification" else "softmax"


# ------------------------------------------------------------------------------------------------ scoring


def _encode(tokenizer, texts: Sequence[str], max_length: int) -> tuple[list[list[int]], np.ndarray]:
    """Token ids of each text (special tokens added), truncated to max_length; and which were truncated."""
    full = tokenizer(list(texts), truncation=False)["input_ids"]
    truncated = np.asarray([len(ids) > max_length for ids in full], dtype=bool)
    if not truncated.any():
        return full, truncated
    return tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"], truncated


def _probabilities(logits, activation: str):
    logits = logits.double()
    return torch.sigmoid(logits) if activation == "sigmoid" else torch.softmax(logits, dim=-1)


def label_probabilities(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    activation: str = "auto",
    batch_size: int = 32,
    max_length: int = DEFAULT_MAX_LENGTH,
    max_tokens: int | None = None,
    stats: EngineStats | None = None,
) -> tuple[np.ndarray, int]:
    """(float64 array (len(texts), num_labels) of every label's probability, how many of `texts` were truncated to
    max_length tokens): distinct texts run
    once, sorted by length, right-padded, in batches within the token budget (run_batches)."""
    stats = stats if stats is not None else EngineStats()
    activation = resolved_activation(activation, model.config)
    limit = min(max_length, int(getattr(tokenizer, "model_max_length", max_length) or max_length))
    unique: dict[str, int] = {}
    for text in texts:
        unique.setdefault(text, len(unique))
    distinct = list(unique)
    encoded, truncated = _encode(tokenizer, distinct, limit)
    lengths = [len(ids) for ids in encoded]
    out = np.zeros((len(distinct), int(model.config.num_labels)), dtype=np.float64)
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run(batch):
        ids, attn = pad([encoded[i] for i in batch], pad_id, device)
        logits = model(input_ids=ids, attention_mask=attn).logits
        out[batch] = _probabilities(logits, activation).cpu().numpy()
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    order = sorted(range(len(distinct)), key=lambda i: (lengths[i], i))
    with torch.inference_mode(), autocast(device):
        run_batches(order, lengths, batch_size, run, max_tokens, stats, "classifier")
    stats.requests += len(texts)
    stats.unique_inputs += len(distinct)
    index = np.asarray([unique[t] for t in texts], dtype=np.int64)
    return out[index], int(truncated[index].sum())


def naive_label_probabilities(
    model, tokenizer, texts: Sequence[str], activation: str = "auto", max_length: int = DEFAULT_MAX_LENGTH
) -> np.ndarray:
    """The reference (test oracle): one text at a time, no padding, no autocast."""
    activation = resolved_activation(activation, model.config)
    max_length = min(max_length, int(getattr(tokenizer, "model_max_length", max_length) or max_length))
    device = model_device(model)
    rows = []
    with torch.inference_mode():
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt").to(device)
            rows.append(_probabilities(model(**enc).logits, activation)[0].cpu().numpy())
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), int(model.config.num_labels))


def role_columns(kind: str, roles: Sequence[str]) -> list[str]:
    """The probability columns a classified table holds for its roles: `toxicity` (p of the toxic label), or
    `regard_<role>` for each regard role the model has."""
    return ["toxicity"] if kind == "toxicity" else [f"regard_{role}" for role in roles]


def classify_generations(
    name: str,
    entry: Mapping,
    generations: pa.Table,
    *,
    device=None,
    root: str | os.PathLike | None = None,
    loaded=None,
    benchmark: str | None = None,
    stats: EngineStats | None = None,
) -> pa.Table:
    """The generations table plus the scorer's columns: ``label`` (the most probable label's name),
    ``probabilities`` (every label's, in id order), and per role ``toxicity`` (toxicity scorers) or
    ``regard_<role>`` and ``regard`` (the role of the most probable label; regard scorers). `loaded`: an already
    loaded (model, tokenizer) of this scorer (several generation files, one load). Metadata: the generations'
    own (provenance of the generations), their score key moved to GENERATIONS_KEY_METADATA, and
    SCORER_METADATA (JSON: scorer name, kind, benchmark, source, revision, commit, label mapping, the model's
    labels, activation, threshold, text, max_length, truncated texts, weights' dtype, precision, library versions)."""
    scorer = scorer_spec(name, entry, root)
    texts = classified_texts(generations, scorer.text, scorer.key)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = loaded if loaded is not None else load_classifier(scorer, device)
    roles = resolve_labels(scorer, model.config)
    activation = resolved_activation(scorer.activation, model.config)
    precision = scorer.precision
    if precision == "auto":
        precision = "bf16" if model_device(model).type == "cuda" else "fp32"
    with scoring_precision(precision, f"{scorer.key}.precision"):
        probs, truncated = label_probabilities(
            model,
            tokenizer,
            texts,
            activation=activation,
            batch_size=scorer.batch_size,
            max_length=scorer.max_length,
            max_tokens=scorer.max_tokens,
            stats=stats,
        )
    if truncated:
        log.warning("%s: %d of the texts were truncated to %d tokens", scorer.key, truncated, scorer.max_length)
    names = model_labels(model.config)
    best = probs.argmax(axis=1) if len(probs) else np.zeros(0, dtype=np.int64)
    table = generations
    columns = {
        "label": pa.array([names[i] for i in best], pa.string()),
        "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
    }
    present = [role for role in ROLES[scorer.kind] if role in roles]
    for role, column in zip(present, role_columns(scorer.kind, present)):
        columns[column] = pa.array(probs[:, roles[role]], pa.float64())
    if scorer.kind == "regard":
        role_of = {index: role for role, index in roles.items()}
        columns["regard"] = pa.array([role_of[i] for i in best], pa.string())
    for column, values in columns.items():
        if column in table.column_names:
            raise DataError(f"{scorer.key}: the generations already have a column {column!r}")
        table = table.append_column(column, values)
    metadata = {k.decode(): v.decode() for k, v in (generations.schema.metadata or {}).items()}
    generations_key = metadata.pop(SCORE_KEY_METADATA, "")
    spec = scorer.model
    record = {
        "name": scorer.name,
        "kind": scorer.kind,
        "benchmark": benchmark,
        "source": spec.source if not spec.is_local else str(entry.get("path")),
        "revision": spec.revision,
        "commit": str(getattr(model, "lmbias_commit", "") or ""),
        "labels": {role: names[index] for role, index in roles.items()},
        "model_labels": names,
        "problem_type": getattr(model.config, "problem_type", None),
        "activation": activation,
        "threshold": scorer.threshold,
        "text": scorer.text,
        "max_length": scorer.max_length,
        "truncated": int(truncated),
        "weights_dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "precision": precision,
        "versions": library_versions(),
    }
    metadata[SCORER_METADATA] = json.dumps(record, sort_keys=True)
    metadata[GENERATIONS_KEY_METADATA] = generations_key
    return table.replace_schema_metadata(metadata)


def classification_key(
    name: str,
    entry: Mapping,
    generations_key: str,
    weights_dir: str | os.PathLike | None = None,
    library_paths: Sequence[str | os.PathLike] = (),
) -> str:
    """The key of one classified file: sha256 of the generations' score key, the scorer's entry without its
    metric options (METRIC_KEYS) and resources (RESOURCE_KEYS), the identity of its weights folder (a local path,
    or the hub id's fetched snapshot: lmbias.metrics.score_keys.folder_identity) and the contents of this module
    and `library_paths`. A cached classified file holding this key is still right."""
    content = {
        "version": KEY_VERSION,
        "scorer": {k: v for k, v in entry.items() if k not in METRIC_KEYS + RESOURCE_KEYS},
        "generations": generations_key,
        "weights": folder_identity(weights_dir),
        "library": [Path(p).read_text(encoding="utf-8") for p in sorted(map(str, [__file__, *library_paths]))],
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
