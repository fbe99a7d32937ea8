"""Where things are, for test modules at any depth under tests/ (a module's own `Path(__file__).parents[n]`
would depend on its folder)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
