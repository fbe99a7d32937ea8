"""The over-debiasing paper's text (../shared/papers/over_debiasing_da_gender.txt), whose word lists the
generated benchmarks must match."""

from __future__ import annotations

from pathlib import Path

import pytest


def over_debiasing_text(shared_data: Path) -> str:
    """The paper's text beside the data folder (shared/papers/); skip the test when it is absent."""
    path = shared_data.parent / "papers" / "over_debiasing_da_gender.txt"
    if not path.is_file():
        pytest.skip(f"paper text not found at {path}")
    return path.read_text(encoding="utf-8")


def paper_list(text: str, label: str) -> list[str]:
    """The comma-separated words of the line that starts with `label` (a table row), without * and dots."""
    line = next(line for line in text.splitlines() if line.startswith(label))
    return [w.strip(" *.") for w in line.split(":", 1)[1].split(",")]
