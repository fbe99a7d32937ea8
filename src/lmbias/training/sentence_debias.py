"""SentenceDebias (Liang et al. 2020), as the over-debiasing paper applies it to BERT, GPT-2 and BART.

Fitting (deterministic, no seed; SD runs once):

1. the word-pair list: the gendered pronoun pairs (he-she, him-her, his-her, himself-herself) followed by
   the pair lists of resources/wordlists/ (Lu et al.'s 124 pairs, then the project's extra pairs), the
   "same set of paired gender words as CDS and ER" (paper, section 3); `ratio_of_pairs` of it is used
   (Table 12: 0.05 BERT, 1.0 GPT-2, 0.07 BART), drawn by a fixed permutation (numpy seed 0), at least one;
2. every GAP sentence that contains a word of a drawn pair (m, f) gives one counterfactual pair per such
   word pair: the sentence with every occurrence of m or f written as m, and written as f (case kept), as
   Liang et al.'s sent_debias enumerates them;
3. sentence embeddings through `lmbias.engine.embeddings` with the family's pooling as for ER: mlm/encoder
   mean over real tokens, clm the last token's state (after GPT-2's final layer norm), seq2seq the mean of
   the decoder's last layer;
4. each embedding is scaled to unit length, each pair centred on its own mean, and the first `k` principal
   directions of the stacked centred embeddings (an SVD in float64) span the gender subspace (bias-bench and
   the paper use k = 1). The sign of each direction is fixed so that the mean male-minus-female difference
   projects positively on it, so a refit gives the same bytes.

Applying: the hidden state h that feeds the LM head becomes h - V^T V h (V: k orthonormal rows) -- BERT the
encoder's last hidden state before the MLM head transform, GPT-2 the state after ln_f before lm_head, BART
the decoder's last hidden state before lm_head, a headless encoder its last hidden state. The projection
is a forward hook on the model's base (``model.base_model``) that rewrites the returned ModelOutput's last
hidden state *and* the last element of its hidden-states tuple, so logits, ``output_hidden_states`` and the
engine's sentence embeddings all see the same debiased state. No mean is subtracted (as in bias-bench);
BART's encoder states are not projected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from lmbias.errors import ConfigError, DataError
from lmbias.io import atomic_folder
from lmbias.progress import job_progress, rate_line

log = logging.getLogger(__name__)

SUBSPACE_FILE = "sentence_debias.safetensors"
INFO_FILE = "sentence_debias.json"
PRONOUN_PAIRS: tuple[tuple[str, str], ...] = (("he", "she"), ("him", "her"), ("his", "her"), ("himself", "herself"))
#: The family's pooling for the subspace: the paper computes SD's sentence representations as for ER.
SD_POOLING = {"mlm": "mean", "encoder": "mean", "clm": "last", "seq2seq": "decoder_mean"}
PAIR_DRAW_SEED = 0
_WORD_RE = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")


@dataclass(frozen=True)
class SDSettings:
    """Settings of one SentenceDebias fit (config.yaml `methods.<name>` keys besides `kind`)."""

    k: int = 1  # principal directions removed (bias-bench and the paper: 1)
    ratio_of_pairs: float = 1.0  # fraction of the word-pair list used (paper Table 12)
    batch_size: int = 32
    max_length: int = 128  # longer sentences (in tokens) are left out, and counted
    limit_sentences: int | None = None  # first N sentences of the file only (tests)
    text_column: str = "text"

    @classmethod
    def from_dict(cls, d: dict | None, key: str = "sd") -> "SDSettings":
        d = dict(d or {})
        d.pop("kind", None)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}: unknown SentenceDebias setting (known: {', '.join(sorted(known))})")
        s = cls(**d)

        def _int(name, minimum, optional=False):
            v = getattr(s, name)
            if optional and v is None:
                return
            if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
                raise ConfigError(f"{key}.{name}: {v!r} is not an integer >= {minimum}")

        _int("k", 1)
        _int("batch_size", 1)
        _int("max_length", 2)
        _int("limit_sentences", 1, optional=True)
        r = s.ratio_of_pairs
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (0 < r <= 1):
            raise ConfigError(f"{key}.ratio_of_pairs: {r!r} is not a number in (0, 1]")
        if not isinstance(s.text_column, str) or not s.text_column:
            raise ConfigError(f"{key}.text_column: {s.text_column!r} is not a column name")
        return s

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------- pairs

def word_pair_list(wordlist_dir=None) -> list[tuple[str, str]]:
    """(masculine, feminine) pairs: the pronoun pairs, then resources/wordlists/*.tsv in order, deduplicated."""
    from lmbias.corpora.counterfactual import _read_tsv_pairs, wordlist_files

    pairs: list[tuple[str, str]] = list(PRONOUN_PAIRS)
    seen = set(pairs)
    for path in wordlist_files(wordlist_dir):
        for m, f, _ in _read_tsv_pairs(Path(path)):
            pair = (m.lower(), f.lower())
            if pair not in seen:
                seen.add(pair)
                pairs.append(pair)
    return pairs


def draw_pairs(pairs: Sequence[tuple[str, str]], ratio: float) -> list[tuple[str, str]]:
    """round(ratio * len(pairs)) pairs (at least 1) by a fixed permutation, in list order."""
    n = max(1, int(round(ratio * len(pairs))))
    chosen = sorted(np.random.default_rng(PAIR_DRAW_SEED).permutation(len(pairs))[:n].tolist())
    return [pairs[i] for i in chosen]


def _with_case(original: str, word: str) -> str:
    if original.isupper() and len(original) > 1:
        return word.upper()
    if original[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def counterfactual_pairs(texts: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str, int]]:
    """(male version, female version, index of the text) for every text and every pair it contains."""
    by_word: dict[str, list[int]] = {}
    for j, (m, f) in enumerate(pairs):
        by_word.setdefault(m, []).append(j)
        by_word.setdefault(f, []).append(j)
    out = []
    for i, text in enumerate(texts):
        hits = sorted({j for w in _WORD_RE.findall(text) for j in by_word.get(w.lower(), ())})
        for j in hits:
            m, f = pairs[j]
            pattern = re.compile(rf"(?<![A-Za-z-])(?:{re.escape(m)}|{re.escape(f)})(?![A-Za-z-])", re.IGNORECASE)
            male = pattern.sub(lambda mo: _with_case(mo.group(0), m), text)
            female = pattern.sub(lambda mo: _with_case(mo.group(0), f), text)
            if male != female:
                out.append((male, female, i))
    return out


# --------------------------------------------------------------------------------------------- fit

def fit_subspace(male: np.ndarray, female: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(components (k, d) float32 orthonormal, explained variance ratio (k,)) of paired embeddings.

    Rows are scaled to unit length, each pair centred on its mean, and the top-k right singular vectors of
    the stacked rows returned, each signed so that mean(male - female) projects positively on it.
    """
    male = np.asarray(male, dtype=np.float64)
    female = np.asarray(female, dtype=np.float64)
    if male.shape != female.shape or male.ndim != 2 or male.shape[0] == 0:
        raise DataError(f"SentenceDebias: need two equal, non-empty (pairs, dim) arrays, got {male.shape} and {female.shape}")
    if k > male.shape[1]:
        raise ConfigError(f"k: {k} exceeds the embedding size {male.shape[1]}")
    male = male / np.linalg.norm(male, axis=1, keepdims=True)
    female = female / np.linalg.norm(female, axis=1, keepdims=True)
    mean = (male + female) / 2
    stacked = np.concatenate([male - mean, female - mean])
    _, s, vt = np.linalg.svd(stacked, full_matrices=False)
    var = s ** 2
    components = vt[:k].copy()
    direction = (male - female).mean(0)
    for i in range(k):
        if components[i] @ direction < 0:
            components[i] = -components[i]
    ratio = var[:k] / var.sum() if var.sum() > 0 else np.zeros(k)
    return components.astype(np.float32), ratio


def _library_versions() -> dict:
    import transformers

    import lmbias

    return {"lmbias": lmbias.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__}


def fit_sentence_debias(model, tokenizer, family: str, texts: Sequence[str], settings: SDSettings,
                        wordlist_dir=None) -> tuple[np.ndarray, dict]:
    """(components, info) of the gender subspace of `model` from `texts`; see the module docstring."""
    from lmbias.engine.embeddings import sentence_embeddings

    if family not in SD_POOLING:
        raise ConfigError(f"SentenceDebias: unknown family {family!r}")
    all_pairs = word_pair_list(wordlist_dir)
    pairs = draw_pairs(all_pairs, settings.ratio_of_pairs)
    cf = counterfactual_pairs(texts, pairs)
    n_long = 0
    if cf:
        lengths = tokenizer([t for m, f, _ in cf for t in (m, f)], add_special_tokens=True, truncation=False)["input_ids"]
        keep = [len(lengths[2 * i]) <= settings.max_length and len(lengths[2 * i + 1]) <= settings.max_length
                for i in range(len(cf))]
        n_long = keep.count(False)
        cf = [p for p, ok in zip(cf, keep) if ok]
    if len(cf) < 2:
        raise DataError(f"SentenceDebias: only {len(cf)} counterfactual pair(s) from {len(texts)} sentences with "
                        f"{len(pairs)} word pair(s) (ratio_of_pairs={settings.ratio_of_pairs}); at least 2 are needed")
    pooling = SD_POOLING[family]
    male = sentence_embeddings(model, tokenizer, [m for m, _, _ in cf], [pooling], family,
                               batch_size=settings.batch_size, max_length=settings.max_length)[pooling]
    female = sentence_embeddings(model, tokenizer, [f for _, f, _ in cf], [pooling], family,
                                 batch_size=settings.batch_size, max_length=settings.max_length)[pooling]
    components, ratio = fit_subspace(male, female, settings.k)
    info = {
        "pooling": pooling,
        "word_pairs_total": len(all_pairs),
        "word_pairs_used": [list(p) for p in pairs],
        "sentences": len(texts),
        "sentences_with_pairs": len({i for _, _, i in cf}),
        "counterfactual_pairs": len(cf),
        "pairs_left_out_too_long": n_long,
        "explained_variance_ratio": [float(x) for x in ratio],
        "hidden_size": int(components.shape[1]),
    }
    return components, info


def save_subspace(out_dir, components: np.ndarray, info: dict) -> Path:
    """Write `<out_dir>/sentence_debias.safetensors` (components) and `sentence_debias.json`, atomically."""
    from safetensors.numpy import save_file

    out_dir = Path(out_dir)

    def write(tmp: Path) -> None:
        save_file({"components": np.ascontiguousarray(components, dtype=np.float32)}, str(tmp / SUBSPACE_FILE))
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    with atomic_folder(out_dir) as tmp:
        write(tmp)
    return out_dir


def load_subspace(method_dir) -> tuple[torch.Tensor, dict]:
    """(components (k, d) float32, info) of a fitted folder; DataError naming the file when unusable."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(method_dir)
    path = folder / SUBSPACE_FILE
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise DataError(f"SentenceDebias subspace unreadable: {exc}", path) from exc
    comps = tensors.get("components")
    if comps is None or comps.ndim != 2 or comps.shape[0] < 1:
        raise DataError(f"SentenceDebias subspace: expected a (k, hidden) tensor 'components', got "
                        f"{None if comps is None else tuple(comps.shape)}", path)
    info_path = folder / INFO_FILE
    try:
        info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc}", info_path) from exc
    return comps.float(), info


# ------------------------------------------------------------------------------------------- apply

class _Projection(torch.nn.Module):
    """Holds the subspace as a (non-persistent) buffer, so it follows model.to(device)."""

    def __init__(self, components: torch.Tensor):
        super().__init__()
        self.register_buffer("components", components.float(), persistent=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        v = self.components.to(hidden.dtype)
        return hidden - (hidden @ v.T) @ v


def _project_output(module, args, output):
    proj = module._sentence_debias
    if isinstance(output, tuple):  # return_dict=False: element 0 is the last hidden state
        return (proj(output[0]),) + tuple(output[1:])
    original = output[0]
    projected = proj(original)
    output["last_hidden_state"] = projected
    for name in ("hidden_states", "decoder_hidden_states"):
        states = output.get(name) if hasattr(output, "get") else None
        if states is not None and len(states) and states[-1].shape == original.shape:
            output[name] = tuple(states[:-1]) + (proj(states[-1]),)
    return output


def install_projection(model, components: torch.Tensor):
    """Project the final hidden states of `model` (any family) orthogonally to `components` (k, d) from now on.

    Idempotent per model: installing again replaces the subspace. Returns the model.
    """
    base = model.base_model
    hidden = getattr(model.config, "d_model", None) or getattr(model.config, "hidden_size", None) or model.config.n_embd
    comps = torch.as_tensor(components, dtype=torch.float32)
    if comps.ndim != 2 or comps.shape[1] != hidden:
        raise DataError(f"SentenceDebias subspace of shape {tuple(comps.shape)} does not fit a model with hidden size {hidden}")
    q, _ = torch.linalg.qr(comps.double().T)  # orthonormalise (a no-op for fit_subspace's output)
    comps = q.T.float()
    device = next(model.parameters()).device
    if getattr(base, "_sentence_debias", None) is not None:
        base._sentence_debias.components = comps.to(device)
        return model
    base._sentence_debias = _Projection(comps).to(device)
    base.register_forward_hook(_project_output)
    return model


# --------------------------------------------------------------------------------------------- job

def _read_texts(path, settings: SDSettings) -> list[str]:
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise DataError("sentences file not found", path)
    table = pq.read_table(path)
    if settings.text_column not in table.column_names:
        raise DataError(f"no column {settings.text_column!r} (columns: {', '.join(table.column_names)})", path)
    texts = [t for t in table.column(settings.text_column).to_pylist() if isinstance(t, str) and t.strip()]
    if settings.limit_sentences is not None:
        texts = texts[: settings.limit_sentences]
    if not texts:
        raise DataError("no sentences", path)
    return texts


def fit_job(model_spec, sentences_path, out_dir, settings: dict, log: logging.Logger | None = None,
            key: str = "sd") -> None:
    """Fit SentenceDebias for `model_spec` (a lmbias.engine.models.ModelSpec) on the GAP sentences parquet and
    write `out_dir` (sentence_debias.safetensors + sentence_debias.json) atomically. `key` prefixes the
    config key in errors about `settings` (e.g. ``methods.sd``)."""
    from lmbias.engine.models import load_model
    from lmbias.workflow import pick_device

    logger = log or globals()["log"]
    resolved = SDSettings.from_dict(settings, key)
    started = time.perf_counter()
    texts = _read_texts(sentences_path, resolved)
    model, tokenizer = load_model(model_spec, device=pick_device())
    fit_started = time.perf_counter()
    with job_progress("SentenceDebias embeddings", unit="sentences"):
        components, info = fit_sentence_debias(model, tokenizer, model_spec.family, texts, resolved)
    fit_seconds = time.perf_counter() - fit_started
    info.update({
        "settings": resolved.to_dict(),
        "base_model": {"name": model_spec.name, "family": model_spec.family, "source": model_spec.source,
                       "revision": model_spec.revision},
        "sentences_file": str(sentences_path),
        "sentences_sha256": hashlib.sha256(Path(sentences_path).read_bytes()).hexdigest(),
        "library_versions": _library_versions(),
        "seconds": round(time.perf_counter() - started, 3),
    })
    save_subspace(out_dir, components, info)
    logger.info("SentenceDebias for %s: k=%d from %d counterfactual pairs (%d of %d word pairs), explained variance %s -> %s",
                model_spec.name, resolved.k, info["counterfactual_pairs"], len(info["word_pairs_used"]),
                info["word_pairs_total"], info["explained_variance_ratio"], out_dir)
    logger.info(rate_line(f"fitted SentenceDebias on {info['counterfactual_pairs']:,} counterfactual pairs,",
                          2 * info["counterfactual_pairs"], "sentences", fit_seconds))
