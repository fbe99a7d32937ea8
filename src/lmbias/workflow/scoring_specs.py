"""Scoring specs: what scores depend on from the config, in small files that the scoring jobs read instead of
params.

- `results/scoring/{model}.json`: the model entry (rule scoring_model_spec), one per model;
- `results/scoring/{variant}/{benchmark}.json`: the benchmark's scoring slice and the method entry of a scoring
  variant (rule scoring_spec). The variant is what scoring reads of a method: its kind (`cds`: every method of
  that kind, a sweep's eight swap rates among them, scores with the same spec, their differences being in their
  model folders), or `<kind>.<method>` for a method whose entry holds scoring options (Self-Debias' prefix and
  constants).

Each is rewritten when what it holds is edited (its rule's param is a short digest, spec_digest). The scoring
jobs (score_model, score_benchmark) take them as inputs, so:

- an edit of one benchmark's options rewrites that benchmark's specs alone, and `snakemake -n` gives the scoring
  jobs the reason "Input files updated by another job: results/scoring/pretrained/crows_pairs.json", naming the
  benchmark, where their params used to print the whole benchmarks block;
- a score file written by the model's job, which Snakemake holds no record of, is still seen as older than an
  edited spec when a target asks for that benchmark alone (rule score_benchmark reruns by file times).

Specs per variant and per model, not per (model, method, benchmark), keep a large grid's DAG small
(bench/dag_build.py: 2,407 spec jobs for the full paper grid that way, about a hundred this way).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from lmbias.errors import ConfigError

#: Method kinds whose method entry holds scoring options besides the kind: one spec per method of the kind.
KINDS_WITH_SCORING_OPTIONS = ("self_debias",)


def scoring_variant(method_config: dict, method: str) -> str:
    """What scoring reads of the method `method` (config.methods.<method>): its kind, or `<kind>.<method>` for a
    kind whose entry holds scoring options (module docstring)."""
    kind = method_config["kind"]
    return f"{kind}.{method}" if kind in KINDS_WITH_SCORING_OPTIONS else kind


def scoring_variants(config: dict) -> list[str]:
    return sorted({scoring_variant(entry, name) for name, entry in config["methods"].items()})


def model_spec_file(model: str) -> str:
    return f"results/scoring/{model}.json"


def spec_file(variant: str, benchmark: str) -> str:
    return f"results/scoring/{variant}/{benchmark}.json"


def method_spec_file(config: dict, method: str, benchmark: str) -> str:
    """The spec a scoring job of `method` reads for `benchmark`."""
    return spec_file(scoring_variant(config["methods"][method], method), benchmark)


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def spec_digest(name: str, spec: dict) -> str:
    """`crows_pairs: entry 1a2b3c4d5e, method_entry …`: a spec job's recorded param, so that the reason of an
    edit names what it is the spec of, and which part changed, in a line."""
    return f"{name}: " + ", ".join(f"{part} {_short(spec[part])}" for part in sorted(spec))


def write_spec(path: str | os.PathLike, name: str, spec: dict) -> None:
    """Write a spec atomically: {"name", and each part of `spec`}."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"name": name, **spec}, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_spec(path: str | os.PathLike, parts: tuple[str, ...]) -> dict:
    """A spec's content; ConfigError naming the file when it lacks a part (rule scoring_spec or
    scoring_model_spec writes it again once it is deleted)."""
    try:
        content = json.loads(Path(path).read_text(encoding="utf-8"))
        missing = [part for part in ("name", *parts) if part not in content]
        if missing:
            raise KeyError(", ".join(missing))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path}: not a scoring spec ({type(exc).__name__}: {exc}); delete it and rerun: the workflow writes "
            "it again from the config"
        ) from None
    return content


def read_benchmark_spec(path: str | os.PathLike) -> dict:
    """{"name": benchmark, "entry": its scoring slice, "method_entry"}."""
    return read_spec(path, ("entry", "method_entry"))


def read_model_spec(path: str | os.PathLike) -> dict:
    """{"name": model, "model_entry"}."""
    return read_spec(path, ("model_entry",))


def shared_method_entry(specs: list[dict], paths) -> dict:
    """The method entry of a model job's benchmark specs, which all hold the same one (one method)."""
    entry = specs[0]["method_entry"]
    for spec, path in zip(specs, paths):
        if spec["method_entry"] != entry:
            raise ConfigError(f"{path}: its method entry differs from {paths[0]}'s; delete both and rerun")
    return entry
