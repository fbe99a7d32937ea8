"""SEAT (May et al. 2019): the classic sent-bias gender tests from the SEAT data, scored with sentence
embeddings. The scorer and metric live in `lmbias.benchmarks.seat_core` (shared with SEAT-v1/v2); see there.
"""

from __future__ import annotations

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.benchmarks.seat_core import SeatOptions, score_seat, seat_metric_rows
from lmbias.engine import embeddings
from lmbias.metrics import weat
from lmbias.metrics.headline import Headline

BENCHMARKS = [
    BenchmarkDef(
        name="seat",
        families=("mlm", "clm", "seq2seq", "encoder"),
        score=score_seat,
        parse_options=SeatOptions.from_config,
        rows=seat_metric_rows,
        description="May et al. 2019 SEAT gender tests (sent-bias): effect size, permutation p",
        reads="embeddings",
        headlines=(
            Headline(
                "effect_size",
                None,
                "SEAT mean |effect size| over the tests",
                "0",
                variant_contains="pooling=mean,ddof=1",
                mean_abs_over_subsets=True,
            ),
        ),
        library=(embeddings, weat),
    )
]
