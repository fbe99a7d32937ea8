"""The stage layering of pyproject.toml's [tool.importlinter] contracts holds (also run by .ci/lint).

The contracts replace tests that searched the sources for module names: grimp reads every import statement,
those inside functions included, and reports the chain of imports that breaks a contract."""

import os
import subprocess
import sys
from pathlib import Path


def test_import_contracts_are_kept(repo_root):
    lint_imports = Path(sys.executable).parent / "lint-imports"  # import-linter, from the test extra
    env = {**os.environ, "PYTHONPATH": str(repo_root / "src")}  # this checkout's library, not an installed one
    proc = subprocess.run([str(lint_imports), "--no-cache"], cwd=repo_root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout
