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
