"""The DAGs of the main targets are what they were (tests/gold/dag, recorded by tests/helpers/dag_gold.py):
the same jobs, each with the same outputs, inputs, logs and params. Guards a refactor of the workflow's input
functions and params (rules/*.smk, lmbias.workflow) against changing what a run schedules or reads."""

from __future__ import annotations

import difflib

import pytest

from helpers import dag_gold

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("case", list(dag_gold.CASES))
def test_dag_is_the_recorded_one(case, shared_data, monkeypatch):
    monkeypatch.setenv("LMBIAS_TEST_DATA", str(shared_data))
    expected = dag_gold.read_gold(case)
    actual = dag_gold.compute(case)
    if actual != expected:
        diff = list(difflib.unified_diff(expected, actual, "recorded", "now", n=0, lineterm=""))
        pytest.fail(
            f"{case}: {len(expected)} jobs recorded, {len(actual)} now; first differences:\n"
            + "\n".join(line[:600] for line in diff[:20])
        )
