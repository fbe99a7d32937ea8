"""The entries config.yaml shows in comments (`#   name: {...}`, one line each, to copy into a section) are the
entries the docs give under the same name: a preset whose comment lost a key (BBQ's lm-eval reading without
`biased: lm_eval`) gives other numbers than the docs promise."""

from __future__ import annotations

import re

import yaml

from helpers.paths import REPO_ROOT

#: A commented entry: "  #   <name>: {<flow mapping>}" inside a top-level section.
COMMENTED = re.compile(r"^\s+#\s+([A-Za-z0-9_-]+): (\{.*\})\s*$")
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def commented_entries(text: str) -> dict[tuple[str, str], dict]:
    """(section, name) -> the entry, for every one-line commented entry of a config's text."""
    found, section = {}, None
    for line in text.splitlines():
        if re.match(r"^[A-Za-z_]+:", line):
            section = line.split(":", 1)[0]
        match = COMMENTED.match(line)
        if match and section:
            found[(section, match.group(1))] = yaml.safe_load(match.group(2))
    return found


def documented_entries(pages: list[str]) -> dict[tuple[str, str], list[dict]]:
    """(section, name) -> every entry the pages' YAML blocks give under that name."""
    found: dict[tuple[str, str], list[dict]] = {}
    for text in pages:
        for block in YAML_BLOCK.findall(text):
            try:
                parsed = yaml.safe_load(block)
            except yaml.YAMLError:
                continue
            if not isinstance(parsed, dict):
                continue
            for section, entries in parsed.items():
                if isinstance(entries, dict):
                    for name, entry in entries.items():
                        found.setdefault((str(section), str(name)), []).append(entry)
    return found


def mismatches(config_text: str, pages: list[str]) -> list[str]:
    documented = documented_entries(pages)
    return [
        f"{section}.{name}: config.yaml's comment {entry} is none of the docs' {documented[section, name]}"
        for (section, name), entry in commented_entries(config_text).items()
        if (section, name) in documented and entry not in documented[section, name]
    ]


def test_commented_presets_equal_the_docs_entries():
    pages = [path.read_text() for path in sorted((REPO_ROOT / "docs").rglob("*.md"))]
    config_text = (REPO_ROOT / "config.yaml").read_text()
    checked = set(commented_entries(config_text)) & set(documented_entries(pages))
    assert ("benchmarks", "bbq_lm_eval") in checked
    assert mismatches(config_text, pages) == []


def test_a_comment_missing_a_key_is_found():
    config_text = "benchmarks:\n  #   bbq_lm_eval: {dataset: bbq, metric: {no_biased_answers: zero}}\n  bbq: {}\n"
    entry = "  bbq_lm_eval:\n    dataset: bbq\n    metric: {no_biased_answers: zero, biased: lm_eval}\n"
    page = f"```yaml\nbenchmarks:\n{entry}```\n"
    assert len(mismatches(config_text, [page])) == 1
    assert mismatches(config_text.replace("zero}", "zero, biased: lm_eval}"), [page]) == []
