"""Snakemake script: fit SentenceDebias' gender subspace for one model (lmbias.training.sentence_debias)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.batching import scoring_budget
from lmbias.engine.model_spec import model_spec
from lmbias.job_runtime import setup_job_logging
from lmbias.training.sentence_debias import fit_job

setup_job_logging(snakemake.log[0])  # noqa: F821
# the embeddings' forward passes batch within models.<model>.max_tokens (a resource: reruns nothing)
with scoring_budget(int(snakemake.resources.max_tokens), f"models.{snakemake.wildcards.model}.max_tokens"):  # noqa: F821
    fit_job(
        model_spec(snakemake.wildcards.model, snakemake.params.model),  # noqa: F821
        sentences_path=snakemake.input.corpus,  # noqa: F821
        out_dir=snakemake.output[0],  # noqa: F821
        settings=snakemake.params.settings,  # noqa: F821
        key=f"methods.{snakemake.wildcards.method}",  # noqa: F821
        # pair_list dagender: the dataset cds files (rule fit_sentence_debias asks for them only then)
        pair_files={"words": snakemake.input.get("sd_word_pairs"), "names": snakemake.input.get("sd_name_pairs")},  # noqa: F821
    )
