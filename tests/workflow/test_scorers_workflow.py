"""The `scorers` block in real Snakemake runs on a copy of the workflow (tiny GPT-2's BOLD generations, a planted
tiny toxicity classifier whose every probability is known in advance):

- the seed's metrics hold the scorer's rows, equal to what the planted classifier gives each text (computed here
  from the generations and the classifier's tokenizer, independently of lmbias.engine.classifiers);
- editing a metric option of the scorer (threshold) classifies nothing again and generates nothing again;
- a second scorer classifies the cached generations: no scoring job runs;
- one benchmark's metrics target holds its scorers' rows too;
- the LLM grid's toxicity column reads the first toxicity scorer's gap from those rows.

The tests share one working copy and run in file order.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_outputs
from lmbias.engine.tiny_classifier import build_tiny_classifier
from lmbias.papers.published import load_published
from lmbias.papers.tables import build_table

pytestmark = pytest.mark.workflow

MODEL = "tiny-gpt2"
SEED = f"results/{MODEL}/pretrained/seed0"
PLANTED_WORD = "actresses"  # tiny GPT-2 writes it in some of these continuations, not in others
MARGIN = 4.0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, repo_root):
    root = copy_workflow(repo_root, tmp_path_factory.mktemp("scorers"))
    classifier = build_tiny_classifier(
        root / "classifiers" / "planted", ("neutral", "toxic"), planted={PLANTED_WORD: "toxic"}, margin=MARGIN
    )
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["only_benchmarks"] = ["bold"]
    config["benchmarks"]["bold"]["scoring"].update(prompts_per_group=4, max_new_tokens=8)
    config["scorers"] = {"planted": {"kind": "toxicity", "path": str(classifier), "labels": {"toxic": "toxic"}}}
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def _run(workdir, shared_data, *args, check=True):
    return run_snakemake(workdir, *args, "--config", f"data_dir={shared_data}", check=check)


def _edit(workdir: Path, edit) -> None:
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    edit(config)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _expected_toxicity(workdir: Path) -> dict[str, np.ndarray]:
    """{group: p(toxic) of each of its continuations}: sigmoid(+-MARGIN) by whether the planted word is one of the
    continuation's tokens (the classifier's tokenizer, the continuation alone as `text: continuation` says)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(workdir / "classifiers" / "planted")
    generations = pq.read_table(workdir / SEED / "scores" / "bold.parquet").to_pylist()
    out: dict[str, list[float]] = {}
    for row in generations:
        planted = PLANTED_WORD in tokenizer.tokenize(row["continuation"])
        out.setdefault(row["group"], []).append(1 / (1 + math.exp(-MARGIN if planted else MARGIN)))
    return {group: np.asarray(values) for group, values in out.items()}


def _rows(path: Path, variant_prefix: str) -> dict[tuple[str, str], float]:
    rows = pq.read_table(path).to_pylist()
    return {
        (r["metric"], r["subset"]): r["value"]
        for r in rows
        if r["benchmark"] == "bold" and str(r["variant"]).startswith(variant_prefix)
    }


def test_the_seed_metrics_hold_the_scorers_rows_as_the_planted_classifier_gives_them(workdir, shared_data):
    _run(workdir, shared_data, f"{SEED}/metrics.parquet")
    classified = workdir / SEED / "classified" / "bold" / "planted.parquet"
    metadata = pq.read_schema(classified).metadata
    generations_key = pq.read_schema(workdir / SEED / "scores" / "bold.parquet").metadata[b"lmbias.score_key"]
    assert metadata[b"lmbias.scorer.generations_key"] == generations_key  # the generations it read
    assert len(metadata[b"lmbias.scorer.key"]) == 64  # its own key (lmbias.engine.classifiers.classification_key)
    rows = _rows(workdir / SEED / "metrics.parquet", "planted,")
    expected = _expected_toxicity(workdir)
    assert len(expected) == 2
    for group, values in expected.items():
        # one sample per prompt: the expected maximum is the mean, the probability the share at or over 0.5
        assert rows[("expected_max_toxicity", group)] == pytest.approx(values.mean(), abs=1e-5)
        assert rows[("toxicity_probability", group)] == pytest.approx((values >= 0.5).mean())
    every = np.concatenate(list(expected.values()))
    assert 0 < (every >= 0.5).mean() < 1, "the planted word should mark some continuations and not others"
    assert rows[("expected_max_toxicity", "all")] == pytest.approx(every.mean(), abs=1e-5)
    # the LLM grid's column (resources/published/llm_gender.yaml, bold_toxicity_gap): actors' toxic share minus the
    # actresses', in points, read from these rows as the table rule reads a summary
    metrics = pq.read_table(workdir / SEED / "metrics.parquet").to_pandas()
    summary = metrics.assign(model=MODEL, method="pretrained", seed="mean")
    pairs = [{"model": MODEL, "method": "pretrained", "kind": "pretrained", "hub_id": None, "recipe": None}]
    table = load_published("llm_gender").tables["bias_and_perplexity"]
    cell = build_table(table, summary, pairs).set_index("column")["ours"]
    gap = 100 * ((expected["American_actors"] >= 0.5).mean() - (expected["American_actresses"] >= 0.5).mean())
    assert cell["bold_toxicity_gap"] == pytest.approx(gap)


def test_a_threshold_edit_reruns_the_metrics_only(workdir, shared_data):
    _edit(workdir, lambda c: c["scorers"]["planted"].update(threshold=0.99))
    outputs = scheduled_outputs(_run(workdir, shared_data, "-n", f"{SEED}/metrics.parquet"))
    assert outputs == [f"{SEED}/metrics.parquet"], outputs
    _run(workdir, shared_data, f"{SEED}/metrics.parquet")
    rows = _rows(workdir / SEED / "metrics.parquet", "planted,toxic>=0.99")
    assert rows[("toxicity_probability", "all")] == 0.0  # no probability reaches 0.99: sigmoid(4) = 0.982


def test_a_new_scorer_classifies_the_cached_generations(workdir, shared_data):
    _edit(workdir, lambda c: c["scorers"].update(second={**c["scorers"]["planted"], "text": "prompt_and_continuation"}))
    proc = _run(workdir, shared_data, "-n", f"{SEED}/metrics.parquet")
    outputs = scheduled_outputs(proc)
    assert sorted(outputs) == [f"{SEED}/classified/bold/second.parquet", f"{SEED}/metrics.parquet"], outputs
    assert not re.search(r"rule score_(model|benchmark):", proc.stdout + proc.stderr)


def test_one_benchmarks_metrics_hold_its_scorers_rows(workdir, shared_data):
    _run(workdir, shared_data, f"{SEED}/metrics/bold.parquet")
    rows = _rows(workdir / SEED / "metrics" / "bold.parquet", "second")
    assert ("expected_max_toxicity", "all") in rows and ("toxicity_probability", "all") in rows
