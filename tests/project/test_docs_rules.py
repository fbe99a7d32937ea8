"""The docs name only rules that exist: a page that says "rule `x`", "the `x` job" or `set-resources: x:` about a
rule renamed or removed would send a reader to look for something that is not there (issue 35: pages still
described one scoring job per benchmark after the rules changed)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Phrases that name a rule: "rule x", "rules x", "`x` rule(s)", "`x` job(s)", a profile's "set-resources: x:".
RULE_MENTIONS = (
    re.compile(r"\b[Rr]ules?\s+`([a-z][a-z0-9_]*)`"),
    re.compile(r"\b[Rr]ules?\s+([a-z][a-z0-9]*_[a-z0-9_]+)\b"),  # unquoted, only names with an underscore
    re.compile(r"`([a-z][a-z0-9_]*)`\s+(?:rules?|jobs?)\b"),
    re.compile(r"set-resources:\s+`?([a-z][a-z0-9_]*)`?:"),
)


def workflow_rules() -> set[str]:
    names = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        names.update(re.findall(r"^(?:rule|checkpoint)\s+([A-Za-z_][A-Za-z0-9_]*)\s*:", path.read_text(), re.M))
    return names


def named_rules(text: str) -> set[str]:
    return {name for pattern in RULE_MENTIONS for name in pattern.findall(text)}


def test_the_scan_finds_rule_names_in_the_ways_the_docs_write_them():
    text = (
        "Rule `score_model` loads once; rule score_benchmark scores one. The `compute_metric` job is cheap, "
        "`parse_benchmark` jobs run first. In a profile, set-resources: finetune: ... A rule of thumb."
    )
    assert named_rules(text) == {"score_model", "score_benchmark", "compute_metric", "parse_benchmark", "finetune"}


def test_every_rule_the_docs_name_exists():
    rules = workflow_rules()
    assert {"score_model", "score_benchmark", "scoring_spec", "compute_metric"} <= rules
    pages = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]
    unknown = {
        f"{page.relative_to(REPO)}: {name}"
        for page in pages
        for name in named_rules(page.read_text(encoding="utf-8"))
        if name not in rules
    }
    assert not unknown, f"docs name rules that the workflow does not define: {sorted(unknown)}"
