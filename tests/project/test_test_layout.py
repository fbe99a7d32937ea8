"""The test suite's own layout: test modules sit in folders by what they test and share code only through
tests/helpers/ (or conftest fixtures), never by importing one another."""

from __future__ import annotations

import ast

from helpers.paths import TESTS


def _python_files() -> list:
    """Every test module, conftest.py and helper module under tests/ (fixtures/ holds data and a script)."""
    files = [*TESTS.rglob("test_*.py"), *TESTS.rglob("conftest.py"), *(TESTS / "helpers").rglob("*.py")]
    return sorted(p for p in set(files) if "fixtures" not in p.relative_to(TESTS).parts)


def _is_test_module(dotted: str) -> bool:
    parts = dotted.lstrip(".").split(".")
    return parts[0] == "tests" or any(part.startswith("test_") for part in parts)


def _imported_test_modules(tree: ast.AST) -> list[str]:
    """The test modules a module imports ("line N: name"): a name with a test_* part, tests or tests.*, and
    test_* names imported from a relative package (`from . import test_x`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if _is_test_module(module):
                names = [module]
            else:
                sep = "" if module.endswith(".") else "."
                names = [
                    f"{module}{sep}{alias.name}"
                    for alias in node.names
                    if node.level and alias.name.startswith("test_")
                ]
        else:
            continue
        found += [f"line {node.lineno}: {name}" for name in names]
    return found


def test_no_test_module_imports_another():
    offenders = {}
    for path in _python_files():
        imported = _imported_test_modules(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if imported:
            offenders[str(path.relative_to(TESTS))] = imported
    assert not offenders, f"move what is shared into tests/helpers/ (or a conftest fixture): {offenders}"


def test_the_scan_sees_every_kind_of_test_module_import():
    code = (
        "import test_a\nfrom test_b import x\nfrom tests.workflow import test_c\nfrom . import test_d\n"
        "from .test_e import y\nimport tests\ndef f():\n    from test_f import z\n"
    )
    found = sorted(found.split(": ")[1] for found in _imported_test_modules(ast.parse(code)))
    assert found == [".test_d", ".test_e", "test_a", "test_b", "test_f", "tests", "tests.workflow"]
    assert _imported_test_modules(ast.parse("from helpers.workflow_runs import run_snakemake\nimport pytest\n")) == []


def test_test_modules_sit_in_folders_by_subject():
    """tests/ itself holds conftest.py only: each test module belongs to a folder (engine/, workflow/, ...)."""
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
