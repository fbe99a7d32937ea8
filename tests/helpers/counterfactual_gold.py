"""The hand-written gold set of the grammatical intervention (tests/gold/counterfactual_gold.tsv) and its
per-case report: what the swapper gets right, sentence by sentence and pronoun by pronoun."""

from __future__ import annotations

import csv
import re
from collections import Counter, defaultdict

from helpers.paths import TESTS
from lmbias.corpora.counterfactual import PRONOUNS

GOLD = TESTS / "gold" / "counterfactual_gold.tsv"
TOKEN_RE = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def read_gold() -> list[dict]:
    """The gold rows (case, original, expected); lines starting with # are comments."""
    with open(GOLD, encoding="utf-8", newline="") as f:
        rows = [
            r
            for r in csv.DictReader(
                (line for line in f if not line.startswith("#")), delimiter="\t", quoting=csv.QUOTE_NONE
            )
        ]
    return rows


def word_tokens(text: str) -> list[str]:
    """Words (apostrophes inside kept) and punctuation marks: the units the gold rows align."""
    return TOKEN_RE.findall(text)


def _pronoun_positions(tokens: list[str]) -> list[int]:
    return [i for i, t in enumerate(tokens) if re.split(r"['’]", t.lower())[0] in PRONOUNS]


def gold_report(rows, outputs):
    """Per case: sentences, exact matches, pronoun tokens, correct pronoun tokens; plus the failures."""
    per_case = defaultdict(Counter)
    failures = []
    for row, out in zip(rows, outputs):
        c = per_case[row["case"]]
        c["sentences"] += 1
        c["exact"] += out == row["expected"]
        orig, exp, got = word_tokens(row["original"]), word_tokens(row["expected"]), word_tokens(out)
        assert len(orig) == len(exp), f"gold row is not token-aligned: {row}"
        for i in _pronoun_positions(orig):
            c["pronouns"] += 1
            c["pronouns_ok"] += len(got) == len(exp) and got[i] == exp[i]
        if out != row["expected"]:
            failures.append(
                f"  [{row['case']}] {row['original']!r}\n      expected {row['expected']!r}\n      got      {out!r}"
            )
    return per_case, failures


def format_table(per_case) -> str:
    """The per-case accuracy table that `pytest -s ... -k gold` prints."""
    lines = [f"{'case':<20} {'sent':>5} {'exact':>6} {'acc':>7} {'pron':>5} {'pron ok':>8} {'pron acc':>9}"]
    total = Counter()
    for case in sorted(per_case):
        c = per_case[case]
        total.update(c)
        pacc = f"{c['pronouns_ok'] / c['pronouns']:.1%}" if c["pronouns"] else "-"
        lines.append(
            f"{case:<20} {c['sentences']:>5} {c['exact']:>6} {c['exact'] / c['sentences']:>7.1%} "
            f"{c['pronouns']:>5} {c['pronouns_ok']:>8} {pacc:>9}"
        )
    lines.append(
        f"{'ALL':<20} {total['sentences']:>5} {total['exact']:>6} {total['exact'] / total['sentences']:>7.1%} "
        f"{total['pronouns']:>5} {total['pronouns_ok']:>8} {total['pronouns_ok'] / total['pronouns']:>9.1%}"
    )
    return "\n".join(lines)
