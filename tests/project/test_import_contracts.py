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


def test_no_contract_has_exceptions(repo_root):
    """No import from a lower layer to a higher one is allowed by name (issue 38): every contract holds as
    written, with no `ignore_imports` and no `allow_indirect_imports` of a chain through a higher layer."""
    import tomllib

    contracts = tomllib.loads((repo_root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert contracts and all("ignore_imports" not in c for c in contracts), [c["name"] for c in contracts]
    assert not any(c.get("allow_indirect_imports") for c in contracts)
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    # the benchmark definitions sit above the engine and the metrics; the jobs that look them up above them
    assert layers.index("benchmarks") < layers.index("engine") < layers.index("metrics")
    assert any("jobs" in layer for layer in layers[: layers.index("benchmarks")])
    assert layers.index("methods") < min(i for i, layer in enumerate(layers) if "training" in layer)
