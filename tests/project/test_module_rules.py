"""One reason per module (docs/development/index.md): no module under src/ over MAX_LINES lines unless its opening
docstring says why it must stay whole (a line starting with KEPT_WHOLE), and no module imports a name starting
with `_` from another module (what several modules use is public in the lower one). No rule file (the Snakefile,
rules/*.smk) over MAX_RULE_FILE_LINES lines: the workflow's decisions are lmbias.workflow's."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.paths import REPO_ROOT

MAX_LINES = 600
MAX_RULE_FILE_LINES = 250
KEPT_WHOLE = "Kept whole:"
SRC = REPO_ROOT / "src"


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def long_modules_without_a_reason(paths: list[Path], root: Path = REPO_ROOT) -> list[str]:
    """`path (N lines)` for each module over MAX_LINES whose opening docstring has no KEPT_WHOLE line."""
    found = []
    for path in paths:
        text = path.read_text()
        lines = text.count("\n") + (not text.endswith("\n"))
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if not any(line.strip().startswith(KEPT_WHOLE) for line in docstring.splitlines()):
            found.append(f"{path.relative_to(root)} ({lines} lines)")
    return found


def private_imports(paths: list[Path], root: Path = REPO_ROOT) -> list[str]:
    """`path:line: from module import _name` for each import of another module's private name."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    found.append(f"{where}: from {'.' * node.level}{node.module or ''} import {alias.name}")
    return found


def long_rule_files(paths: list[Path], root: Path = REPO_ROOT) -> list[str]:
    """`path (N lines)` for each rule file over MAX_RULE_FILE_LINES lines."""
    counts = {path: len(path.read_text().splitlines()) for path in paths}
    return [f"{path.relative_to(root)} ({n} lines)" for path, n in counts.items() if n > MAX_RULE_FILE_LINES]


def test_no_rule_file_over_250_lines():
    paths = [REPO_ROOT / "Snakefile", *sorted((REPO_ROOT / "rules").glob("*.smk"))]
    assert len(paths) > 5
    assert long_rule_files(paths) == []


def test_no_module_over_600_lines_without_a_stated_reason():
    assert long_modules_without_a_reason(_modules()) == []


def test_no_module_imports_another_modules_private_name():
    assert private_imports(_modules()) == []


def test_the_checks_see_a_long_module_and_a_private_import(tmp_path):
    """The scans can fail: a 601-line module without a reason and a private import are found; a reason clears
    the first."""
    long = tmp_path / "long.py"
    long.write_text('"""A module."""\n' + "x = 1\n" * MAX_LINES)
    private = tmp_path / "private.py"
    private.write_text("from lmbias.engine.batching import _pad\nfrom . import __version__\n")
    assert long_modules_without_a_reason([long], tmp_path) == [f"long.py ({MAX_LINES + 1} lines)"]
    assert private_imports([private], tmp_path) == ["private.py:1: from lmbias.engine.batching import _pad"]
    long.write_text(f'"""A module.\n\n{KEPT_WHOLE} one loop.\n"""\n' + "x = 1\n" * MAX_LINES)
    assert long_modules_without_a_reason([long], tmp_path) == []
    rules = tmp_path / "long.smk"
    rules.write_text("x = 1\n" * (MAX_RULE_FILE_LINES + 1))
    assert long_rule_files([rules], tmp_path) == [f"long.smk ({MAX_RULE_FILE_LINES + 1} lines)"]
