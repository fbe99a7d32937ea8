"""HONEST on real models' completions, against the authors' own package: every completion of three runs of
config.yaml's `honest-subset` (SmolLM2-135M-Instruct with its prompts read raw and behind its chat template, Gemma 3
270M raw; 800 each) with the category honest 0.2.1's HonestEvaluator gives it (under the Unidecode 1.3.2 it pins),
recorded by bench/honest_package.py --write-fixture. lmbias's labels are computed here from the real HurtLex file:
with `erased_as_hurtful` they must equal the package's on every completion and at every k; by default they differ
exactly on the completions the package counts at an erased word (an emoji, a U+FFFD left by a cut multi-byte
character)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lmbias.benchmarks.honest import _labels, _table
from lmbias.metrics.honest import HonestOptions, honest_metric_rows, with_erased
from lmbias.metrics.hurtlex import Lexicon, counted_as_erased
from lmbias.parsers.honest import LEXICON_FILE, parse_lexicon

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "honest_real_completions.parquet"
RUNS = ("smollm2-135m-instruct:raw", "smollm2-135m-instruct:chat", "gemma-3-270m:raw")
K = (1, 5, 10, 20)


@pytest.fixture(scope="module")
def runs(shared_data):
    """{run: (fixture rows, lmbias's scores of the same completions)} in template and rank order."""
    lexicon = Lexicon(parse_lexicon(shared_data / "hurtlex" / LEXICON_FILE))
    rows = pq.read_table(FIXTURE).to_pylist()
    out = {}
    for run in RUNS:
        mine = sorted((r for r in rows if r["run"] == run), key=lambda r: (r["template_id"], r["rank"]))
        records = [
            {
                "template_id": r["template_id"],
                "template": f"t{r['template_id']}",
                "identity": "x",
                "number": "singular",
                "category": r["category"],
                "type": "occupation",
                "rank": r["rank"],
                "completion": r["completion"],
                **_labels(lexicon, r["completion"], sentence=True),
                "reading": "generated",
                "chat_template": "none",
            }
            for r in mine
        ]
        out[run] = (mine, _table(records, lexicon, {"reading": "generated", "top_k": 20}, {"chat_template": "none"}))
    return out


def _package_honest(rows: list[dict], k: int) -> float:
    """The package's HONEST@k: completions it counts among each template's first k, over k x templates."""
    templates = {r["template_id"] for r in rows}
    return 100 * sum(r["package_category"] is not None for r in rows if r["rank"] < k) / (k * len(templates))


def _at_k(scores, erased_as_hurtful: bool) -> dict[int, float]:
    rows = honest_metric_rows(scores, HonestOptions(k=K, bootstrap=0, erased_as_hurtful=erased_as_hurtful))
    return {k: next(r["value"] for r in rows if r["metric"] == f"honest_k{k}" and r["subset"] == "all") for k in K}


def test_the_fixture_holds_800_completions_of_each_run():
    rows = pq.read_table(FIXTURE).to_pylist()
    assert {run: sum(r["run"] == run for r in rows) for run in RUNS} == dict.fromkeys(RUNS, 800)


@pytest.mark.parametrize("run", RUNS)
def test_the_option_equals_the_authors_package_on_every_completion_and_k(runs, run):
    rows, scores = runs[run]
    labels = np.asarray(scores.column("hurtlex_conservative").to_pylist(), dtype=object)
    option = with_erased(scores, "conservative", labels).tolist()
    differ = [(r["completion"], mine, r["package_category"]) for r, mine in zip(rows, option)
              if mine != r["package_category"]]  # fmt: skip
    assert differ == []
    option_at_k = _at_k(scores, erased_as_hurtful=True)
    assert option_at_k == pytest.approx({k: _package_honest(rows, k) for k in K})


def test_the_default_leaves_out_only_what_the_package_counts_at_an_erased_word(runs):
    """Known numbers of these runs (docs/benchmarks/honest.md): SmolLM2 raw 8.0 % (the package 8.125 %: "✅"),
    behind its template 7.0 % (the package 7.5 %: three emoji and a U+FFFD), Gemma 9.875 % both ways."""
    expected = {
        "smollm2-135m-instruct:raw": (8.0, 8.125),
        "smollm2-135m-instruct:chat": (7.0, 7.5),
        "gemma-3-270m:raw": (9.875, 9.875),
    }
    for run, (default_20, package_20) in expected.items():
        rows, scores = runs[run]
        labels = scores.column("hurtlex_conservative").to_pylist()
        words = scores.column("hurtlex_conservative_word").to_pylist()
        left_out = [r["completion"] for r, label in zip(rows, labels) if label != r["package_category"]]
        at_erased = [
            r["completion"] for r, word in zip(rows, words) if counted_as_erased(r["completion"], word, sentence=True)
        ]
        assert left_out == at_erased, run
        assert all(r["package_category"] == "cds" for r in rows if r["completion"] in left_out)
        assert _at_k(scores, erased_as_hurtful=False)[20] == pytest.approx(default_20), run
        assert _package_honest(rows, 20) == pytest.approx(package_20), run
    smollm2_chat = [r["completion"] for r in runs["smollm2-135m-instruct:chat"][0]]
    assert any("\ufffd" in text for text in smollm2_chat)  # a cut multi-byte character, which unidecode erases
