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

Applying (lmbias.engine.debias_projection, which this module imports; the engine never imports training):
the hidden state h that feeds the LM head becomes h - V^T V h (V: k orthonormal rows), or, with
``application: normalise_project_normalise``, unit(P unit(h)) as the DA-Gender code does; see there.

The DA-Gender authors' fit (mulinShi/DA-Gender, bert|gpt2|bart/debias_methods/*_sent_debias.py) differs from
the paper's description, and each difference is an option (defaults: the paper, as above):

``pair_list: dagender``        their 1,128-pair list: cda_default_pairs.json (Lu et al.'s 124 pairs, file order),
                               names_pairs_1000_scaled.json (1,000 name pairs), then guy-gal, his-her,
                               himself-herself, guys-gals, read from dataset `cds` (he-she is Lu's 87th pair,
                               him-her absent: prefixes of BERT's 0.05 and BART's 0.07 hold no pronoun);
``pair_selection: prefix``     the first int(ratio * len) pairs (``define_pairs[:size]``), not a random draw;
``pair_matching: whitespace_case_sensitive``  a sentence split on " " matches a word only by exact equality
                               (no lower-casing, punctuation stays attached), and each pair gives, per side
                               found, one pair: (sentence, sentence with that word replaced by its partner);
``fit_pooling``                their pooling: BERT ``mean_padded`` (mean over all 128 padded positions),
                               GPT-2 ``last`` and BART ``decoder_mean`` (already the defaults); one entry for
                               all three: ``{mlm: mean_padded, clm: last, seq2seq: decoder_mean}``;
``precision: fp32``            their embeddings run in float32 (``auto``: bfloat16 autocast on a GPU).

Their PCA (sklearn, 10 components, the first kept) centres the stacked rows first, which changes nothing
here: the pair-centred rows already sum to zero column by column.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from lmbias.engine.batching import PRECISIONS
from lmbias.engine.debias_projection import APPLICATIONS, INFO_FILE, SUBSPACE_FILE
from lmbias.engine.embeddings import POOLINGS, check_poolings
from lmbias.errors import ConfigError, DataError
from lmbias.io import atomic_folder
from lmbias.progress import job_progress, rate_line
from lmbias.training.fit_settings import check_int, from_entry

log = logging.getLogger(__name__)

PRONOUN_PAIRS: tuple[tuple[str, str], ...] = (("he", "she"), ("him", "her"), ("his", "her"), ("himself", "herself"))
#: The family's pooling for the subspace: the paper computes SD's sentence representations as for ER.
SD_POOLING = {"mlm": "mean", "encoder": "mean", "clm": "last", "seq2seq": "decoder_mean"}
PAIR_DRAW_SEED = 0
PAIR_LISTS = ("lmbias", "dagender")
PAIR_SELECTIONS = ("random", "prefix")
PAIR_MATCHINGS = ("word_insensitive", "whitespace_case_sensitive")
#: The pairs the DA-Gender code appends after Lu et al.'s list and the name pairs, (masculine, feminine).
DAGENDER_EXTRA_PAIRS: tuple[tuple[str, str], ...] = (
    ("guy", "gal"),
    ("his", "her"),
    ("himself", "herself"),
    ("guys", "gals"),
)
_WORD_RE = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")


@dataclass(frozen=True)
class SDSettings:
    """Settings of one SentenceDebias fit (config.yaml `methods.<name>` keys besides `kind` and `corpus`)."""

    k: int = 1  # principal directions removed (bias-bench and the paper: 1)
    ratio_of_pairs: float = 1.0  # fraction of the word-pair list used (paper Table 12)
    batch_size: int = 32
    max_length: int = 128  # longer sentences (in tokens) are left out, and counted
    limit_sentences: int | None = None  # first N sentences of the file only (tests)
    text_column: str = "text"
    application: str = "project"  # project | normalise_project_normalise (lmbias.engine.debias_projection)
    pair_list: str = "lmbias"  # lmbias | dagender
    pair_selection: str = "random"  # random | prefix
    pair_matching: str = "word_insensitive"  # word_insensitive | whitespace_case_sensitive
    # None: the family's (SD_POOLING); a pooling of lmbias.engine.embeddings; or {family: pooling} (one method
    # entry for several families; a family it leaves out keeps its default)
    fit_pooling: str | dict | None = None
    pad_to: int = 128  # padding length of the *_padded poolings (the DA-Gender code's 128)
    precision: str = "auto"  # auto (bf16 autocast on GPU, fp32 on CPU) | fp32 | bf16 | fp16

    @classmethod
    def from_dict(cls, d: dict | None, key: str = "sd") -> SDSettings:
        s = from_entry(cls, d, key, "SentenceDebias", ignored=("kind",))

        def _int(name, minimum, optional=False):
            check_int(getattr(s, name), f"{key}.{name}", minimum, optional)

        def _choice(name, choices, optional=False):
            v = getattr(s, name)
            if optional and v is None:
                return
            if not isinstance(v, str) or v not in choices:
                raise ConfigError(f"{key}.{name}: {v!r} is not one of {', '.join(choices)}")

        _int("k", 1)
        _int("batch_size", 1)
        _int("max_length", 2)
        _int("limit_sentences", 1, optional=True)
        _int("pad_to", 1)
        r = s.ratio_of_pairs
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (0 < r <= 1):
            raise ConfigError(f"{key}.ratio_of_pairs: {r!r} is not a number in (0, 1]")
        if not isinstance(s.text_column, str) or not s.text_column:
            raise ConfigError(f"{key}.text_column: {s.text_column!r} is not a column name")
        _choice("application", APPLICATIONS)
        _choice("pair_list", PAIR_LISTS)
        _choice("pair_selection", PAIR_SELECTIONS)
        _choice("pair_matching", PAIR_MATCHINGS)
        _choice("precision", PRECISIONS)
        if isinstance(s.fit_pooling, dict):
            for family, pooling in s.fit_pooling.items():
                if family not in POOLINGS:
                    raise ConfigError(f"{key}.fit_pooling.{family}: not a model family ({', '.join(POOLINGS)})")
                check_poolings(family, [pooling], key=f"{key}.fit_pooling.{family}")
        else:
            _choice("fit_pooling", sorted({p for ps in POOLINGS.values() for p in ps}), optional=True)
        return s

    def to_dict(self) -> dict:
        return asdict(self)

    def pooling(self, family: str, key: str = "sd") -> str:
        """The pooling the fit embeds with: `fit_pooling`, checked against the family, or the family's."""
        pooling = self.fit_pooling.get(family) if isinstance(self.fit_pooling, dict) else self.fit_pooling
        if pooling is None:
            return SD_POOLING[family]
        return check_poolings(family, [pooling], key=f"{key}.fit_pooling")[0]


# ------------------------------------------------------------------------------------------- pairs


def word_pair_list(wordlist_dir=None) -> list[tuple[str, str]]:
    """(masculine, feminine) pairs: the pronoun pairs, then resources/wordlists/*.tsv in order, deduplicated."""
    from lmbias.corpora.swap_lexicon import read_tsv_pairs, wordlist_files

    pairs: list[tuple[str, str]] = list(PRONOUN_PAIRS)
    seen = set(pairs)
    for path in wordlist_files(wordlist_dir):
        for m, f, _ in read_tsv_pairs(Path(path)):
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


def dagender_pair_list(words_file, names_file) -> list[tuple[str, str]]:
    """The DA-Gender code's 1,128 (masculine, feminine) pairs, in its order: `words_file`
    (cda_default_pairs.json, Lu et al.'s 124 pairs), `names_file` (names_pairs_1000_scaled.json), then
    guy-gal, his-her, himself-herself, guys-gals. Not deduplicated (their list is not). A missing or
    malformed file is a DataError naming it."""
    from lmbias.parsers.cds import parse_cds

    pairs: list[tuple[str, str]] = []
    for kind, path in (("words", words_file), ("names", names_file)):
        if path is None:
            raise ConfigError(f"pair_list dagender needs the {kind} file of dataset cds")
        table = parse_cds({kind: path})
        pairs += list(zip(table.column("male").to_pylist(), table.column("female").to_pylist()))
    return pairs + list(DAGENDER_EXTRA_PAIRS)


def prefix_pairs(pairs: Sequence[tuple[str, str]], ratio: float) -> list[tuple[str, str]]:
    """The first int(ratio * len(pairs)) pairs (the DA-Gender code's ``define_pairs[:size]``, rounding down)."""
    return list(pairs[: int(len(pairs) * ratio)])


def whitespace_counterfactual_pairs(
    texts: Sequence[str], pairs: Sequence[tuple[str, str]]
) -> list[tuple[str, str, int]]:
    """(male version, female version, index of the text) as the DA-Gender code builds them.

    A text is split on single spaces; for each pair (m, f) in list order, if the exact token f occurs, the
    text (female version) is paired with the text in which every token equal to f is replaced by m; then,
    if the exact token m occurs, the text (male version) with every m replaced by f. Case-sensitive, no
    punctuation stripping; the other pairs' words are left as they are.
    """
    out = []
    for i, text in enumerate(texts):
        tokens = text.split(" ")
        present = set(tokens)
        for m, f in pairs:
            if f in present:
                out.append((" ".join(m if t == f else t for t in tokens), text, i))
            if m in present:
                out.append((text, " ".join(f if t == m else t for t in tokens), i))
    return out


def select_pairs(
    settings: SDSettings, pair_files: dict | None = None, wordlist_dir=None, key: str = "sd"
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the whole pair list, the pairs used) as `settings` say; `pair_files` {"words", "names"} for dagender."""
    if settings.pair_list == "dagender":
        files = pair_files or {}
        if not files.get("words") or not files.get("names"):
            raise ConfigError(
                f"{key}.pair_list: dagender needs the files cda_default_pairs.json and "
                "names_pairs_1000_scaled.json of dataset cds"
            )
        all_pairs = dagender_pair_list(files["words"], files["names"])
    else:
        all_pairs = word_pair_list(wordlist_dir)
    if settings.pair_selection == "prefix":
        pairs = prefix_pairs(all_pairs, settings.ratio_of_pairs)
        if not pairs:
            raise ConfigError(
                f"{key}.ratio_of_pairs: {settings.ratio_of_pairs} of {len(all_pairs)} pairs leaves "
                "none (pair_selection prefix rounds down)"
            )
    else:
        pairs = draw_pairs(all_pairs, settings.ratio_of_pairs)
    return all_pairs, pairs


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
        raise DataError(
            f"SentenceDebias: need two equal, non-empty (pairs, dim) arrays, got {male.shape} and {female.shape}"
        )
    if k > male.shape[1]:
        raise ConfigError(f"k: {k} exceeds the embedding size {male.shape[1]}")
    male = male / np.linalg.norm(male, axis=1, keepdims=True)
    female = female / np.linalg.norm(female, axis=1, keepdims=True)
    mean = (male + female) / 2
    stacked = np.concatenate([male - mean, female - mean])
    _, s, vt = np.linalg.svd(stacked, full_matrices=False)
    var = s**2
    components = vt[:k].copy()
    direction = (male - female).mean(0)
    for i in range(k):
        if components[i] @ direction < 0:
            components[i] = -components[i]
    ratio = var[:k] / var.sum() if var.sum() > 0 else np.zeros(k)
    return components.astype(np.float32), ratio


def library_versions() -> dict:
    """Versions of the libraries a fit depends on, recorded in its metadata (INLP adds its own)."""
    import transformers

    import lmbias

    return {
        "lmbias": lmbias.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
    }


def fit_sentence_debias(
    model,
    tokenizer,
    family: str,
    texts: Sequence[str],
    settings: SDSettings,
    wordlist_dir=None,
    pair_files: dict | None = None,
    key: str = "sd",
) -> tuple[np.ndarray, dict]:
    """(components, info) of the gender subspace of `model` from `texts`; see the module docstring.
    `pair_files` ({"words": cda_default_pairs.json, "names": names_pairs_1000_scaled.json}) for pair_list dagender."""
    from lmbias.engine.batching import model_device, scoring_precision
    from lmbias.engine.embeddings import sentence_embeddings

    if family not in SD_POOLING:
        raise ConfigError(f"SentenceDebias: unknown family {family!r}")
    pooling = settings.pooling(family, key)
    all_pairs, pairs = select_pairs(settings, pair_files, wordlist_dir, key)
    if settings.pair_matching == "whitespace_case_sensitive":
        cf = whitespace_counterfactual_pairs(texts, pairs)
    else:
        cf = counterfactual_pairs(texts, pairs)
    n_long = 0
    if cf:
        lengths = tokenizer([t for m, f, _ in cf for t in (m, f)], add_special_tokens=True, truncation=False)[
            "input_ids"
        ]
        limit = min(settings.max_length, settings.pad_to) if pooling.endswith("mean_padded") else settings.max_length
        keep = [len(lengths[2 * i]) <= limit and len(lengths[2 * i + 1]) <= limit for i in range(len(cf))]
        n_long = keep.count(False)
        cf = [p for p, ok in zip(cf, keep) if ok]
    if len(cf) < 2:
        raise DataError(
            f"SentenceDebias: only {len(cf)} counterfactual pair(s) from {len(texts)} sentences with "
            f"{len(pairs)} word pair(s) (ratio_of_pairs={settings.ratio_of_pairs}); at least 2 are needed"
        )
    device = model_device(model)
    precision = settings.precision
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    with scoring_precision(precision, f"{key}.precision"):
        male, female = (
            sentence_embeddings(
                model,
                tokenizer,
                side,
                [pooling],
                family,
                batch_size=settings.batch_size,
                max_length=settings.max_length,
                pad_to=settings.pad_to,
            )[pooling]
            for side in ([m for m, _, _ in cf], [f for _, f, _ in cf])
        )
    components, ratio = fit_subspace(male, female, settings.k)
    info = {
        "pooling": pooling,
        "pad_to": settings.pad_to if pooling.endswith("mean_padded") else None,
        "precision_used": precision,
        "application": settings.application,
        "pair_list": settings.pair_list,
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


# --------------------------------------------------------------------------------------------- job


def read_sentence_texts(path, settings) -> list[str]:
    """The non-empty texts of a sentences parquet (`settings.text_column`, the first `settings.limit_sentences`);
    DataError naming the file when it is missing, lacks the column or holds none. Shared with INLP's fit."""
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


def fit_job(
    model_spec,
    sentences_path,
    out_dir,
    settings: dict,
    log: logging.Logger | None = None,
    key: str = "sd",
    pair_files: dict | None = None,
) -> None:
    """Fit SentenceDebias for `model_spec` (a lmbias.engine.model_spec.ModelSpec) on the GAP sentences parquet and
    write `out_dir` (sentence_debias.safetensors + sentence_debias.json) atomically. `key` prefixes the
    config key in errors about `settings` (e.g. ``methods.sd``); `pair_files` ({"words", "names"}: the
    dataset cds files) are read when `pair_list` is dagender."""
    from lmbias.engine.models import load_model
    from lmbias.job_runtime import pick_device

    logger = log or globals()["log"]
    resolved = SDSettings.from_dict(settings, key)
    started = time.perf_counter()
    texts = read_sentence_texts(sentences_path, resolved)
    model, tokenizer = load_model(model_spec, device=pick_device())
    fit_started = time.perf_counter()
    with job_progress("SentenceDebias embeddings", unit="sentences"):
        components, info = fit_sentence_debias(
            model, tokenizer, model_spec.family, texts, resolved, pair_files=pair_files, key=key
        )
    fit_seconds = time.perf_counter() - fit_started
    info.update(
        {
            "settings": resolved.to_dict(),
            "base_model": {
                "name": model_spec.name,
                "family": model_spec.family,
                "source": model_spec.source,
                "revision": model_spec.revision,
            },
            "sentences_file": str(sentences_path),
            "sentences_sha256": hashlib.sha256(Path(sentences_path).read_bytes()).hexdigest(),
            "pair_files": (
                {
                    kind: {"path": str(path), "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}
                    for kind, path in sorted(pair_files.items())
                }
                if resolved.pair_list == "dagender"
                else None
            ),
            "library_versions": library_versions(),
            "seconds": round(time.perf_counter() - started, 3),
        }
    )
    save_subspace(out_dir, components, info)
    logger.info(
        "SentenceDebias for %s: k=%d from %d counterfactual pairs (%d of %d word pairs), explained variance %s -> %s",
        model_spec.name,
        resolved.k,
        info["counterfactual_pairs"],
        len(info["word_pairs_used"]),
        info["word_pairs_total"],
        info["explained_variance_ratio"],
        out_dir,
    )
    logger.info(
        rate_line(
            f"fitted SentenceDebias on {info['counterfactual_pairs']:,} counterfactual pairs,",
            2 * info["counterfactual_pairs"],
            "sentences",
            fit_seconds,
        )
    )
