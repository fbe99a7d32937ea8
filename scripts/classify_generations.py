"""Snakemake script: one scorer's classification of one benchmark's cached generations (lmbias.jobs.classification)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.jobs.classification import classify_job

setup_job_logging(snakemake.log[0])  # noqa: F821
classify_job(
    benchmark=snakemake.wildcards.benchmark,  # noqa: F821
    scorer=snakemake.wildcards.scorer,  # noqa: F821
    entry=dict(snakemake.params.entry),  # noqa: F821
    scores_path=snakemake.input.scores,  # noqa: F821
    output_path=snakemake.output[0],  # noqa: F821
    # scorers.<name>.max_tokens: a resource, so editing it classifies nothing again
    max_tokens=int(snakemake.resources.max_tokens),  # noqa: F821
)
