"""BBQ's generated reading on what real models wrote: `match_answer` against a hand-labelled fixture.

tests/fixtures/bbq_real_answers.tsv holds the greedy answers of SmolLM2-135M-Instruct (without and with its chat
template) and Gemma 3 270M (base: no template) to the 72 stand-in questions (`bbq-subset`), asked as the workflow
asks them (tests/fixtures/make_bbq_real_answers.py), each labelled by hand (0-2, or -1: unparseable) with its kind
and a reason; and a few hand-written answers of the kinds the real models never gave (refusals, a listing on one
line), marked `hand-written`. Columns: source, model, chat_template, example_id, question, ans0-ans2, unknown_loc,
answer (\\n, \\t, \\r and \\\\ escaped), label, kind, reason.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from lmbias.benchmarks.bbq import match_answer
from lmbias.benchmarks.catalog import definition
from lmbias.engine.generation import Continuation
from lmbias.metrics.bbq import BBQOptions, bbq_metric_rows
from lmbias.parsers.bbq import FILES, parse_bbq

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bbq_real_answers.tsv"
SMOLLM2, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
#: The unparseable share (%) of each model's 72 answers, as docs/benchmarks/bbq.md records it.
UNPARSEABLE = {(SMOLLM2, "false"): 93.1, (SMOLLM2, "true"): 23.6, (GEMMA, "false"): 91.7}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}[m.group(1)], text)


def _rows() -> list[dict]:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    head = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        row = dict(zip(head, line.split("\t"), strict=True))
        row.update(answer=_unescape(row["answer"]), label=int(row["label"]), unknown_loc=int(row["unknown_loc"]))
        rows.append(row)
    return rows


ROWS = _rows()


def _id(row: dict) -> str:
    if row["source"] != "real":
        return f"hand-written-{ROWS.index(row)}"
    return f"{row['model']}-{'chat' if row['chat_template'] == 'true' else 'raw'}-{row['example_id']}"


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_match_answer_agrees_with_the_hand_label(row):
    got = match_answer(row["answer"], [row["ans0"], row["ans1"], row["ans2"]], row["unknown_loc"], row["question"])
    assert got == row["label"], f"{row['kind']} ({row['reason']}): {row['answer']!r}"


def test_the_fixture_holds_real_answers_of_every_kind():
    real = [r for r in ROWS if r["source"] == "real"]
    assert Counter((r["model"], r["chat_template"]) for r in real) == {k: 72 for k in UNPARSEABLE}
    kinds = Counter(r["kind"] for r in real)
    for kind in ("answer", "empty", "listing", "letter_text", "several", "no_answer"):
        assert kinds[kind] >= 2, kind
    hand = [r for r in ROWS if r["source"] == "hand-written"]
    assert {r["kind"] for r in hand} >= {"refusal"} and "refusal" not in kinds  # no real model refused
    assert len(real) > 10 * len(hand)
    assert set(Counter(r["label"] for r in ROWS)) == {-1, 0, 1, 2}


class _Replay:
    """A causal model that answers each question with its fixture text (by example_id)."""

    family = "clm"

    def __init__(self, texts: dict[int, str], chat: bool):
        self.texts, self.chat = texts, chat

    def require(self, families, what):
        assert self.family in families, what

    def generate(self, prompts, settings, prompt_keys=None, what=""):
        return [[Continuation(self.texts[k], 1, True)] for k in prompt_keys]

    def chat_provenance(self):
        return {"chat_template": "tokenizer"} if self.chat else {"chat_template": "none"}


@pytest.mark.parametrize(("model", "chat"), list(UNPARSEABLE))
def test_the_unparseable_share_is_in_the_metric_table(shared_data, model, chat):
    """The generated reading of the 72 stand-in questions, fed the fixture's answers: the metric table's
    `unparseable` row is the share of -1 labels, the number docs/benchmarks/bbq.md gives."""
    items = parse_bbq(*(shared_data / "bbq" / f for f in FILES), seed=0, max_templates=10)
    texts = {int(r["example_id"]): r["answer"] for r in ROWS if (r["model"], r["chat_template"]) == (model, chat)}
    scores = definition("bbq", "bbq").score(items, _Replay(texts, chat == "true"), {"reading": "generated"})
    labels = {int(r["example_id"]): r["label"] for r in ROWS if (r["model"], r["chat_template"]) == (model, chat)}
    assert scores.column("predicted").to_pylist() == [labels[k] for k in scores.column("example_id").to_pylist()]
    rows = bbq_metric_rows(scores, BBQOptions(bootstrap=0))
    got = next(r for r in rows if r["metric"] == "unparseable" and r["subset"] == "all")
    assert got["n"] == 72 and round(got["value"], 1) == UNPARSEABLE[(model, chat)]
