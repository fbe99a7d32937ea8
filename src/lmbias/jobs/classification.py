"""The classify job (rule classify_generations): one scorer's classification of one benchmark's cached
generations, written to results/{model}/{method}/seed{k}/classified/{benchmark}/{scorer}.parquet.

The generations are read from their score file (what the benchmark's scoring job wrote, its score key carried in
the classified file's metadata), never generated again; the classifier is loaded once and runs on the device the
job has (lmbias.engine.classifiers). A score file whose table is no generations (a masked model's HONEST fills) is
never asked for: lmbias.workflow.scorers decides which benchmarks a scorer reads, by the benchmark's definition.
"""

from __future__ import annotations

import logging
import time

import pyarrow.parquet as pq

from lmbias.engine.batching import EngineStats
from lmbias.engine.classifiers import classification_key, classify_generations
from lmbias.io import write_table_atomic
from lmbias.metrics.score_keys import SCORE_KEY_METADATA

#: Parquet metadata of a classified file: its classification key (lmbias.engine.classifiers.classification_key: the
#: generations' score key, the scorer's settings, its weights folder and its code), for provenance and reuse checks.
CLASSIFICATION_KEY_METADATA = "lmbias.scorer.key"

log = logging.getLogger(__name__)


def classify_job(
    benchmark: str, scorer: str, entry: dict, scores_path, output_path, max_tokens: int | None = None, device=None
) -> None:
    """Classify the generations of `scores_path` with scorers.<scorer> (`entry`: its classification settings and,
    for a hub id, the fetched `snapshot`); `max_tokens`, the job's resource, caps the padded tokens of a pass."""
    started = time.perf_counter()
    generations = pq.read_table(scores_path)
    if max_tokens is not None:
        entry = {**entry, "max_tokens": int(max_tokens)}
    stats = EngineStats()
    table = classify_generations(scorer, entry, generations, device=device, benchmark=benchmark, stats=stats)
    generations_key = (generations.schema.metadata or {}).get(SCORE_KEY_METADATA.encode(), b"").decode()
    key = classification_key(scorer, entry, generations_key, weights_dir=entry.get("snapshot") or entry.get("path"))
    write_table_atomic(table, output_path, metadata={CLASSIFICATION_KEY_METADATA: key})
    log.info(
        "classified %d generations of %s with scorers.%s in %.1f s (%d forward passes)",
        generations.num_rows,
        benchmark,
        scorer,
        time.perf_counter() - started,
        stats.forward_passes,
    )
