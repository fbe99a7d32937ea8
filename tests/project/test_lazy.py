"""lmbias.lazy: modules bound on first use, and the DAG build that relies on it importing neither torch
nor scipy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.paths import REPO_ROOT
from lmbias.lazy import lazy_module

REPO = REPO_ROOT


def _python(code: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter at the repository root (so nothing is imported beforehand)."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)


def test_lazy_module_imports_on_first_attribute_and_then_is_the_module():
    code = (
        "import sys; sys.path.insert(0, 'src'); from lmbias.lazy import lazy_module;"
        "proxy = lazy_module('colorsys'); before = 'colorsys' in sys.modules;"
        "value = proxy.rgb_to_hsv(1.0, 0.0, 0.0);"
        "print(before, 'colorsys' in sys.modules, value, 'rgb_to_hsv' in vars(proxy))"
    )
    out = _python(code)
    # not imported until read; then imported, right, and later reads are plain lookups in its own namespace
    assert out.stdout.strip() == "False True (0.0, 1.0, 1.0) True", out.stdout + out.stderr
    assert lazy_module("json") is json  # an imported module is returned as it is


def test_lazy_module_names_a_missing_attribute():
    with pytest.raises(AttributeError, match="no_such_function"):
        lazy_module("colorsys").no_such_function  # noqa: B018  (the attribute read is the test)


def test_dag_modules_and_metric_jobs_do_not_import_torch_or_scipy():
    """What the Snakefile imports and what a metric job runs (the benchmark registry, every benchmark
    module, the summary) load neither torch nor scipy; reading a torch attribute then loads torch."""
    code = (
        "import sys; sys.path.insert(0, 'src');"
        "from lmbias.benchmarks import catalog; import lmbias.methods.resolution, lmbias.jobs.scoring, "
        "lmbias.jobs.metrics, lmbias.jobs.comparisons, lmbias.metrics.summary, "
        "lmbias.metrics.comparison;"
        "import lmbias.papers.tables;"
        "catalog.definitions();"
        "before = sorted(m for m in ('torch', 'scipy', 'scipy.stats') if m in sys.modules);"
        "from lmbias.engine import scoring; scoring.torch.zeros(1);"
        "print(before, 'torch' in sys.modules)"
    )
    out = _python(code)
    assert out.stdout.strip() == "[] True", out.stdout + out.stderr
