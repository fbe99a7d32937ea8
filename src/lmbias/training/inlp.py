"""INLP, Iterative Nullspace Projection (Ravfogel et al. 2020), as bias-bench (Meade et al. 2022) fits it
for gender: deterministic (one fit per model, seed0/), applied at scoring time through the SentenceDebias
hook on the final hidden states (lmbias.engine.debias_projection.install_projection_matrix).

Fitting:

1. sentences: each GAP sentence (``text`` column of results/corpora/gap/sentences.parquet) of at least 5
   words is *male* when it holds a masculine word and no feminine one, *female* the other way round,
   *neutral* when it holds neither (both: left out). The words are those of SentenceDebias' pair list
   (lmbias.training.sentence_debias.word_pair_list: the pronoun pairs, then resources/wordlists/ -- Lu et
   al.'s pairs and the project's extras), matched case-insensitively as whole words; a word on both sides
   (``her``: him-her and his-her are both feminine, so it is not) counts for neither. Up to
   ``sentences_per_class`` (bias-bench: 10,000) per class are drawn in a fixed random order (``seed``);
   sentences longer than ``max_length`` tokens are left out and counted;
2. representations: the mean of the final hidden states over the sentence's tokens, special tokens
   included (bias-bench: ``torch.mean(model(...).last_hidden_state, dim=1)`` of the base model, one
   sentence at a time); for BART the decoder's (the state the hook projects). Labels male 1, female 0,
   neutral -1 (bias-bench's);
3. a held-out ``dev_fraction`` (0.3) is split off (scikit-learn ``train_test_split``, ``random_state=seed``).
   ``test_fraction`` (bias-bench: 0.3; default none) first splits off a test set that is never used, the
   same way, and ``dev_fraction`` is then held out of the rest: bias-bench's ``_split_gender_dataset``, whose
   classifiers see 0.7 x 0.7 of the sentences (``split_indices``);
4. ``n_iterations`` (80) times: a linear classifier (``linear_svc``: scikit-learn ``LinearSVC(fit_intercept=
   False, class_weight=None, dual=False, random_state=seed)``, bias-bench's; ``sgd``: ``SGDClassifier
   (random_state=seed)``) is fitted on the training representations projected by the current P; its
   weight rows' span is added to the removed space, and P becomes the projection onto the intersection
   of all the classifiers' null spaces, I - proj(sum of the rowspace projections) (Ben-Israel's formula,
   bias-bench's ``get_projection_to_intersection_of_nullspaces``). Each iteration's train and held-out
   accuracy is recorded (``inlp.json``: ``iterations``); the held-out accuracy falls to the majority-class
   rate (``chance_level``) once the gender directions are gone. ``dropout_rate`` (bias-bench: 0; default
   none) multiplies the training representations each iteration by bias-bench's dropout mask, kept with
   probability 1 - rate and scaled by 1 / (1 - rate + 1e-6): at rate 0 a constant 1 / (1 + 1e-6), which
   bias-bench's ``get_debiasing_projection`` applies although it drops nothing.

Not reproduced from bias-bench: their sentences come from a Wikipedia dump (2.5 %), not GAP; they clip each
sentence at a random word after the gendered word (neutral ones after the 4th) and lower-case it; none of
that is done here. See docs/methods/index.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lmbias.engine.batching import PRECISIONS
from lmbias.errors import ConfigError, DataError
from lmbias.io import atomic_folder
from lmbias.training.fit_settings import check_int, from_entry

log = logging.getLogger(__name__)

#: The fitted folder's files, as lmbias.engine.debias_projection reads them (not imported from there: that
#: module imports torch, and the workflow checks INLP settings when it builds the DAG, without torch).
INLP_FILE = "inlp.safetensors"
INLP_INFO_FILE = "inlp.json"
CLASSIFIERS = ("linear_svc", "sgd")
#: The pooling of the representations per family: the mean of the hidden states the hook projects.
INLP_POOLING = {"mlm": "mean", "clm": "mean", "seq2seq": "decoder_mean", "encoder": "mean"}
LABELS = {"male": 1, "female": 0, "neutral": -1}
MIN_WORDS = 5  # bias-bench skips sentences of fewer than 5 (space-separated) words
_WORD_RE = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")


@dataclass(frozen=True)
class INLPSettings:
    """Settings of one INLP fit (config.yaml `methods.<name>` keys besides `kind` and `corpus`)."""

    n_iterations: int = 80  # classifiers trained (bias-bench's n_classifiers)
    classifier: str = "linear_svc"  # linear_svc (bias-bench) | sgd
    sentences_per_class: int = 10000  # bias-bench: 10,000 male, female and neutral sentences
    dev_fraction: float = 0.3  # held out to measure each classifier's accuracy (bias-bench: 0.3)
    test_fraction: float | None = None  # split off first and never used (bias-bench: 0.3); None: no test split
    dropout_rate: float | None = None  # bias-bench's dropout on the training representations (theirs: 0); None: none
    seed: int = 0  # sentence draw, split and classifiers' random_state
    batch_size: int = 32
    max_length: int = 128  # longer sentences (in tokens) are left out, and counted
    limit_sentences: int | None = None  # first N sentences of the file only (tests)
    text_column: str = "text"
    precision: str = "auto"  # auto (bf16 autocast on GPU, fp32 on CPU) | fp32 | bf16 | fp16

    @classmethod
    def from_dict(cls, d: dict | None, key: str = "inlp") -> INLPSettings:
        s = from_entry(cls, d, key, "INLP", ignored=("kind", "corpus"))
        for name, minimum, optional in (
            ("n_iterations", 1, False),
            ("sentences_per_class", 2, False),
            ("seed", 0, False),
            ("batch_size", 1, False),
            ("max_length", 2, False),
            ("limit_sentences", 1, True),
        ):
            check_int(getattr(s, name), f"{key}.{name}", minimum, optional)
        for name, zero_allowed in (("dev_fraction", False), ("test_fraction", False), ("dropout_rate", True)):
            f = getattr(s, name)
            if f is None and name != "dev_fraction":
                continue
            if (
                isinstance(f, bool)
                or not isinstance(f, (int, float))
                or not (0 <= f < 1)
                or (f == 0 and not zero_allowed)
            ):
                raise ConfigError(f"{key}.{name}: {f!r} is not a number in {'[0, 1)' if zero_allowed else '(0, 1)'}")
        if s.classifier not in CLASSIFIERS:
            raise ConfigError(f"{key}.classifier: {s.classifier!r} is not one of {', '.join(CLASSIFIERS)}")
        if s.precision not in PRECISIONS:
            raise ConfigError(f"{key}.precision: {s.precision!r} is not one of {', '.join(PRECISIONS)}")
        if not isinstance(s.text_column, str) or not s.text_column:
            raise ConfigError(f"{key}.text_column: {s.text_column!r} is not a column name")
        return s

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------ sentences


def gender_words(wordlist_dir=None) -> tuple[frozenset, frozenset]:
    """(masculine words, feminine words) of SentenceDebias' pair list; a word on both sides is in neither."""
    from lmbias.training.sentence_debias import word_pair_list

    pairs = word_pair_list(wordlist_dir)
    male, female = {m for m, _ in pairs}, {f for _, f in pairs}
    both = male & female
    return frozenset(male - both), frozenset(female - both)


def classify_sentences(texts: Sequence[str], male_words, female_words) -> list[str | None]:
    """'male', 'female', 'neutral' or None (both kinds of word, or under MIN_WORDS words) per text."""
    out = []
    for text in texts:
        if len(text.split()) < MIN_WORDS:
            out.append(None)
            continue
        words = {w.lower() for w in _WORD_RE.findall(text)}
        m, f = bool(words & male_words), bool(words & female_words)
        out.append(None if m and f else "male" if m else "female" if f else "neutral")
    return out


def select_sentences(
    texts: Sequence[str], classes: Sequence[str | None], per_class: int, seed: int
) -> dict[str, list[str]]:
    """{class: up to per_class distinct texts}, drawn in a fixed random order."""
    chosen: dict[str, list[str]] = {c: [] for c in LABELS}
    seen = set()
    for i in np.random.default_rng(seed).permutation(len(texts)).tolist():
        c = classes[i]
        if c is None or texts[i] in seen or len(chosen[c]) >= per_class:
            continue
        seen.add(texts[i])
        chosen[c].append(texts[i])
    return chosen


# ------------------------------------------------------------------------------------------------ fit


def make_classifier(name: str, seed: int):
    if name == "linear_svc":
        from sklearn.svm import LinearSVC

        return LinearSVC(fit_intercept=False, class_weight=None, dual=False, random_state=seed)
    if name == "sgd":
        from sklearn.linear_model import SGDClassifier

        return SGDClassifier(random_state=seed)
    raise ConfigError(f"classifier: {name!r} is not one of {', '.join(CLASSIFIERS)}")


def _range_projection(matrix: np.ndarray) -> np.ndarray:
    """Orthogonal projection onto the column space of `matrix` (zero for a zero matrix)."""
    from scipy.linalg import orth

    if np.allclose(matrix, 0):
        return np.zeros((matrix.shape[0], matrix.shape[0]))
    basis = orth(matrix)
    return basis @ basis.T


def split_indices(n: int, dev_fraction: float, test_fraction: float | None, seed: int):
    """(train, dev, test) row indices of n rows: scikit-learn ``train_test_split(..., random_state=seed)``
    holds out ``dev_fraction``; with ``test_fraction``, a first such split sets that share aside (test, never
    used) and the dev share is held out of the rest, as bias-bench's ``_split_gender_dataset`` (0.3, then 0.3,
    ``random_state=0``). The rows a split picks depend only on n and the seed, not on the arrays split."""
    from sklearn.model_selection import train_test_split

    rows, test = np.arange(n), np.arange(0)
    if test_fraction is not None:
        rows, test = train_test_split(rows, test_size=test_fraction, random_state=seed)
    train, dev = train_test_split(rows, test_size=dev_fraction, random_state=seed)
    return train, dev, test


def dropout_mask(shape, rate: float | None, rng: np.random.Generator):
    """bias-bench's ``get_debiasing_projection`` dropout: keep with probability 1 - rate, scale the kept by
    1 / (1 - rate + 1e-6) (at rate 0 only the constant scale; the draw is then not needed). None: 1."""
    if rate is None:
        return 1.0
    scale = 1.0 / (1 - rate + 1e-6)
    if rate == 0:
        return scale
    return (rng.random(shape) < (1 - rate)).astype(float) * scale


def fit_projection(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_dev: np.ndarray,
    y_dev: np.ndarray,
    n_iterations: int,
    classifier: str = "linear_svc",
    seed: int = 0,
    dropout_rate: float | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """(P (d, d) float64, one row per iteration: train/dev accuracy, dimensions removed so far).

    Iteration i fits a classifier on the rows projected by P_{i-1} (times the dropout mask, when
    `dropout_rate` is set); P_i projects onto the intersection of the null spaces of all classifiers so far:
    I - proj(range(sum of their rowspace projections))."""
    from sklearn.exceptions import ConvergenceWarning

    x_train = np.asarray(x_train, dtype=np.float64)
    x_dev = np.asarray(x_dev, dtype=np.float64)
    d = x_train.shape[1]
    identity = np.eye(d)
    projection, rowspace_sum = identity.copy(), np.zeros((d, d))
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_iterations):
        xt, xd = (x_train @ projection.T) * dropout_mask(x_train.shape, dropout_rate, rng), x_dev @ projection.T
        clf = make_classifier(classifier, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            clf.fit(xt, y_train)
        weights = np.atleast_2d(clf.coef_)
        rowspace_sum += _range_projection(weights.T)
        projection = identity - _range_projection(rowspace_sum)
        rows.append(
            {
                "iteration": i + 1,
                "train_accuracy": float(clf.score(xt, y_train)),
                "dev_accuracy": float(clf.score(xd, y_dev)),
                "dimensions_removed": int(round(d - np.trace(projection))),
                "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
            }
        )
    return projection, rows


def majority_rate(labels: np.ndarray) -> float:
    """The accuracy of always guessing the most frequent label (chance for a classifier that learnt nothing)."""
    _, counts = np.unique(labels, return_counts=True)
    return float(counts.max() / counts.sum())


def _library_versions() -> dict:
    import scipy
    import sklearn

    from lmbias.training.sentence_debias import library_versions

    return {**library_versions(), "scikit-learn": sklearn.__version__, "scipy": scipy.__version__}


def fit_inlp(
    model, tokenizer, family: str, texts: Sequence[str], settings: INLPSettings, wordlist_dir=None, key: str = "inlp"
) -> tuple[np.ndarray, dict]:
    """(P float32 (d, d), info) of `model` from `texts`; see the module docstring."""
    from lmbias.engine.batching import model_device, scoring_precision
    from lmbias.engine.embeddings import sentence_embeddings

    if family not in INLP_POOLING:
        raise ConfigError(f"INLP: unknown family {family!r}")
    pooling = INLP_POOLING[family]
    male_words, female_words = gender_words(wordlist_dir)
    classes = classify_sentences(texts, male_words, female_words)
    n_long = 0
    candidates = [i for i, c in enumerate(classes) if c is not None]
    if candidates:  # too long for max_length: left out before the draw
        lengths = tokenizer([texts[i] for i in candidates], add_special_tokens=True, truncation=False)["input_ids"]
        for i, ids in zip(candidates, lengths):
            if len(ids) > settings.max_length:
                classes[i] = None
                n_long += 1
    chosen = select_sentences(texts, classes, settings.sentences_per_class, settings.seed)
    counts = {c: len(v) for c, v in chosen.items()}
    if counts["male"] < 2 or counts["female"] < 2:
        raise DataError(
            f"INLP: {counts['male']} male and {counts['female']} female sentences among {len(texts)}; "
            "at least 2 of each are needed"
        )
    device = model_device(model)
    precision = (
        "bf16"
        if settings.precision == "auto" and device.type == "cuda"
        else "fp32"
        if settings.precision == "auto"
        else settings.precision
    )
    all_texts = [t for c in LABELS for t in chosen[c]]
    labels = np.array([LABELS[c] for c in LABELS for _ in chosen[c]])
    with scoring_precision(precision, f"{key}.precision"):
        x = sentence_embeddings(
            model,
            tokenizer,
            all_texts,
            [pooling],
            family,
            batch_size=settings.batch_size,
            max_length=settings.max_length,
        )[pooling]
    train, dev, test = split_indices(len(labels), settings.dev_fraction, settings.test_fraction, settings.seed)
    x_train, x_dev, y_train, y_dev = x[train], x[dev], labels[train], labels[dev]
    if len(np.unique(y_train)) < 2:
        raise DataError(f"INLP: the training split holds one class only ({len(y_train)} sentences)")
    projection, rows = fit_projection(
        x_train, y_train, x_dev, y_dev, settings.n_iterations, settings.classifier, settings.seed, settings.dropout_rate
    )
    info = {
        "pooling": pooling,
        "precision_used": precision,
        "classifier": settings.classifier,
        "gender_words": {"male": len(male_words), "female": len(female_words)},
        "sentences": len(texts),
        "sentences_per_class": counts,
        "sentences_left_out_too_long": n_long,
        "train_size": int(len(y_train)),
        "dev_size": int(len(y_dev)),
        "test_size_unused": int(len(test)),
        "label_codes": LABELS,
        "chance_level": majority_rate(y_dev),
        "iterations": rows,
        "final_dev_accuracy": rows[-1]["dev_accuracy"],
        "rank": int(round(np.trace(projection))),
        "hidden_size": int(projection.shape[0]),
    }
    return projection.astype(np.float32), info


def save_projection(out_dir, projection: np.ndarray, info: dict) -> Path:
    """Write `<out_dir>/inlp.safetensors` (tensor ``projection``) and `inlp.json`, atomically."""
    from safetensors.numpy import save_file

    out_dir = Path(out_dir)
    with atomic_folder(out_dir) as tmp:
        save_file({"projection": np.ascontiguousarray(projection, dtype=np.float32)}, str(tmp / INLP_FILE))
        (tmp / INLP_INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out_dir


def fit_job(model_spec, sentences_path, out_dir, settings: dict, key: str = "inlp") -> None:
    """Fit INLP for `model_spec` on the GAP sentences parquet and write `out_dir` (inlp.safetensors +
    inlp.json) atomically; `key` (e.g. ``methods.inlp``) prefixes the config key in errors."""
    from lmbias.engine.models import load_model
    from lmbias.job_runtime import pick_device
    from lmbias.training.sentence_debias import read_sentence_texts

    resolved = INLPSettings.from_dict(settings, key)
    started = time.perf_counter()
    path = Path(sentences_path)
    texts = read_sentence_texts(path, resolved)
    model, tokenizer = load_model(model_spec, device=pick_device())
    projection, info = fit_inlp(model, tokenizer, model_spec.family, texts, resolved, key=key)
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
            "sentences_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "library_versions": _library_versions(),
            "seconds": round(time.perf_counter() - started, 3),
        }
    )
    save_projection(out_dir, projection, info)
    log.info(
        "INLP for %s: %d iterations (%s) on %s sentences, rank %d of %d; held-out accuracy %.3f -> %.3f "
        "(chance %.3f) -> %s",
        model_spec.name,
        resolved.n_iterations,
        resolved.classifier,
        info["sentences_per_class"],
        info["rank"],
        info["hidden_size"],
        info["iterations"][0]["dev_accuracy"],
        info["final_dev_accuracy"],
        info["chance_level"],
        out_dir,
    )
