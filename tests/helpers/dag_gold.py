"""The golden DAGs: every job (rule, outputs, inputs, logs, params) Snakemake schedules for the workflow's main
targets, recorded before rules/common.smk's decisions moved into lmbias.workflow, so that a refactor of the
input functions and params can be checked to schedule the same jobs with the same inputs and params.

    python tests/helpers/dag_gold.py --record      # rewrite tests/gold/dag/*.jsonl.gz from this checkout

The DAG is built by Snakemake's API in a child process per target (a workflow parse leaves state behind in
its process), on a copy of the workflow, with data_dir = the real test data (LMBIAS_TEST_DATA), as the
workflow tests run it. Paths inside the copy and the data folder are written as {root} and {data}.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLD = REPO / "tests" / "gold" / "dag"
sys.path.insert(0, str(REPO / "tests"))

#: name -> targets (None: the Snakefile's default target). "full_grid" is bench/dag_build.py's full paper grid.
CASES = {
    "main": [],
    "paper_meade2022": ["paper_meade2022"],
    "paper_llm_gender": ["paper_llm_gender"],
    "full_grid": None,  # the summaries bench/dag_build.prepare returns, on its config
}
#: Cases whose jobs' params are stored as a digest (the full grid's 9,000 jobs' params in full: 0.6 MB).
DIGESTED = {"full_grid"}


def data_dir() -> Path:
    return Path(os.environ.get("LMBIAS_TEST_DATA", REPO.parent / "shared" / "data")).resolve()


def _plain(value):
    """A params value as JSON (Snakemake's Namedlist and Path values included)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _named(namedlist) -> dict:
    items = [str(f) for f in namedlist]
    names = {
        name: [str(f) for f in namedlist[start:end]] if end is not None else [str(namedlist[start])]
        for name, (start, end) in sorted(namedlist._names.items())
    }
    return {"all": items, "named": names}


def job_records(workdir: Path, targets: list[str], data: Path, digest: bool = False) -> list[str]:
    """One JSON line per job of a forced dry run of `targets` (sorted); `digest`: params as a sha256 prefix."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    with contextlib.chdir(workdir), SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(
            snakefile=Path("Snakefile"),
            workdir=Path("."),
            resource_settings=ResourceSettings(cores=2),
            config_settings=ConfigSettings(config={"data_dir": str(data)}),
        )
        dag_api = workflow_api.dag(dag_settings=DAGSettings(targets=targets, forceall=True))
        dag_api.execute_workflow(executor="dryrun")
        jobs = list(workflow_api._workflow.dag.jobs)
        lines = []
        for job in jobs:
            params = {name: _plain(job.params[name]) for name in sorted(job.params._names)}
            record = {
                "rule": job.rule.name,
                "output": [str(f) for f in job.output],
                "input": _named(job.input),
                "log": [str(f) for f in job.log],
                "params": params,
                "max_tokens": job.resources.get("max_tokens"),
            }
            text = json.dumps(record, sort_keys=True).replace(str(workdir), "{root}").replace(str(data), "{data}")
            if digest:
                record = json.loads(text)
                params = json.dumps(record.pop("params"), sort_keys=True)
                record["params_sha256"] = hashlib.sha256(params.encode()).hexdigest()[:16]
                text = json.dumps(record, sort_keys=True)
            lines.append(text)
    return sorted(lines)


def _load_bench():
    spec = importlib.util.spec_from_file_location("dag_build", REPO / "bench" / "dag_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(case: str, dest: Path) -> list[str]:
    """A copy of this checkout's workflow for `case`; returns its targets."""
    if CASES[case] is None:
        dest.mkdir(parents=True)
        return _load_bench().prepare(dest)
    from helpers.workflow_runs import copy_workflow

    copy_workflow(REPO, dest)
    return CASES[case]


def compute(case: str) -> list[str]:
    """The case's job lines, from a child process (one workflow parse per process)."""
    with tempfile.TemporaryDirectory(prefix=f"dag-{case}-") as tmp:
        workdir = Path(tmp).resolve() / "wf"
        targets = prepare(case, workdir)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", "PYTHONPATH": str(workdir / "src")}
        digest = ["--digest"] if case in DIGESTED else []
        proc = subprocess.run(
            [sys.executable, __file__, "--jobs", str(workdir), *digest, *targets],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"DAG of {case} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
        return proc.stdout.splitlines()


def gold_path(case: str) -> Path:
    return GOLD / f"{case}.jsonl.gz"


def read_gold(case: str) -> list[str]:
    with gzip.open(gold_path(case), "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="rewrite the gold files")
    parser.add_argument("--jobs", type=Path, help="(child) print the job lines of a workflow copy's targets")
    parser.add_argument("--digest", action="store_true", help="(child) params as a digest")
    parser.add_argument("targets", nargs="*")
    args = parser.parse_args(argv)
    if args.jobs:
        for line in job_records(args.jobs, args.targets, data_dir(), args.digest):
            print(line)
        return 0
    if args.record:
        GOLD.mkdir(parents=True, exist_ok=True)
        for case in CASES:
            lines = compute(case)
            with gzip.GzipFile(gold_path(case), "wb", mtime=0) as handle:
                handle.write(("\n".join(lines) + "\n").encode("utf-8"))
            print(f"{case}: {len(lines)} jobs -> {gold_path(case)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
