"""The shipped config.yaml as the Snakefile sees it (sweeps expanded into plain methods), for the unit tests of
lmbias.workflow: a fresh copy per call, so a test may edit it."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import yaml

from lmbias.methods.sweeps import expand_method_targets, expand_sweeps

REPO = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def _shipped() -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    config["targets"]["methods"] = expand_method_targets(config["targets"]["methods"], config["methods"])
    for paper, entry in (config.get("papers") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("methods"), list):
            entry["methods"] = expand_method_targets(entry["methods"], config["methods"], f"papers.{paper}.methods")
    config["methods"] = expand_sweeps(config["methods"])
    return config


def shipped_config() -> dict:
    return copy.deepcopy(_shipped())


def keep_benchmarks(config: dict, keep) -> dict:
    """`config` cut to the benchmark entries named in `keep`; a model's stand-in whose entry is cut while its
    benchmark is kept is dropped, so that model reads the whole benchmark (as the test grids did before the
    stand-in existed) rather than stop at models.<model>.stand_ins naming an unknown entry."""
    config["benchmarks"] = {k: v for k, v in config["benchmarks"].items() if k in keep}
    for model in config["models"].values():
        pairs = model.get("stand_ins")
        if pairs:
            model["stand_ins"] = {b: e for b, e in pairs.items() if not (b in keep and e not in keep)}
    return config
