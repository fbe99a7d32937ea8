"""A benchmark defined outside the package registers and runs through the workflow to the summary, with no edit
to any file of the project (issue 38): tests/fixtures/toy_benchmark/toy_loglik_gap.py, found through the
LMBIAS_BENCHMARK_PATH variable, over CrowS-Pairs' parsed pairs (`measure: toy_loglik_gap`).

Known answer: the summary's value is the mean log-likelihood gap the test computes itself from the parsed items
with the same tiny model.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.workflow_runs import copy_workflow, run_snakemake
from lmbias.benchmarks import catalog
from lmbias.benchmarks.catalog import BENCHMARK_PATH_VARIABLE

pytestmark = pytest.mark.workflow

MODEL = "tiny-gpt2"
SUMMARY = f"results/{MODEL}/pretrained/summary.parquet"


@pytest.fixture(scope="module")
def toy_folder(repo_root):
    return repo_root / "tests" / "fixtures" / "toy_benchmark"


def test_the_toy_is_found_from_the_path_variable_only(monkeypatch, toy_folder):
    monkeypatch.delenv(BENCHMARK_PATH_VARIABLE, raising=False)
    assert "toy_loglik_gap" not in catalog.definitions()
    monkeypatch.setenv(BENCHMARK_PATH_VARIABLE, str(toy_folder))
    toy = catalog.definition("toy_loglik_gap")
    assert toy.families == ("clm",) and toy.row_local and toy.reads == "likelihoods"
    sources = catalog.source_files("toy_loglik_gap")
    assert str(toy_folder / "toy_loglik_gap.py") in sources  # editing the toy reruns its jobs
    assert any(s.endswith("lmbias/engine/scoring.py") for s in sources)
    monkeypatch.setenv(BENCHMARK_PATH_VARIABLE, str(toy_folder / "missing"))
    with pytest.raises(Exception, match=BENCHMARK_PATH_VARIABLE):
        catalog.definitions()


def test_a_toy_benchmark_reaches_the_summary(tmp_path_factory, repo_root, shared_data, toy_folder, monkeypatch):
    root = copy_workflow(repo_root, tmp_path_factory.mktemp("toy"))
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["benchmarks"]["toy_gap"] = {"dataset": "crows_pairs", "measure": "toy_loglik_gap", "metric": {"scale": 1}}
    config["only_benchmarks"] = ["toy_gap"]
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # without the variable the entry names a measure nobody defines: the DAG build says so
    monkeypatch.delenv(BENCHMARK_PATH_VARIABLE, raising=False)
    refused = run_snakemake(root, "-n", SUMMARY, "--config", f"data_dir={shared_data}", check=False)
    assert refused.returncode != 0 and "toy_loglik_gap" in refused.stdout + refused.stderr
    monkeypatch.setenv(BENCHMARK_PATH_VARIABLE, str(toy_folder))
    # the one run whose jobs are processes of their own, as users run them: the variable reaches them from here
    run_snakemake(root, SUMMARY, "--config", f"data_dir={shared_data}", job_processes=True)

    summary = pq.read_table(root / SUMMARY).to_pandas()
    row = summary[(summary["benchmark"] == "toy_gap") & (summary["seed"] == "mean")].iloc[0]
    assert row["metric"] == "mean_loglik_gap" and row["subset"] == "all"

    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model
    from lmbias.engine.scoring import sentence_logprobs

    items = pq.read_table(root / "results/data/toy_gap.parquet").to_pylist()
    entry = {k: v for k, v in config["models"][MODEL].items() if k != "training"}
    model, tokenizer = load_model(model_spec(MODEL, entry, root=root))
    more = sentence_logprobs(model, tokenizer, [r["sent_more"] for r in items], max_length=128)
    less = sentence_logprobs(model, tokenizer, [r["sent_less"] for r in items], max_length=128)
    assert row["n"] == len(items) > 100
    assert np.isclose(row["value"], float(np.mean(more - less)), rtol=1e-5, atol=1e-6)
