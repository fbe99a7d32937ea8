"""Snakemake script: BOLD's sentiment figure of one seed's cached generations (no forward pass)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.metrics.score_keys import resolve_scores
from lmbias.papers.figures_bold import write_sentiment_figure

setup_job_logging(snakemake.log[0])  # noqa: F821
wildcards = snakemake.wildcards  # noqa: F821
write_sentiment_figure(
    # the score file, or the pair's score_model manifest naming it
    scores_path=resolve_scores([snakemake.input.scores], [wildcards.benchmark])[0],  # noqa: F821
    out_stem=Path(snakemake.output.svg).with_suffix(""),  # noqa: F821
    title=f"BOLD ({wildcards.benchmark}): {wildcards.model} / {wildcards.method} / seed {wildcards.seed}",
    metric_cfg=snakemake.params.metric.get("metric", {}),  # noqa: F821
)
