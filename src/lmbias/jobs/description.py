"""The description of a scoring job: which benchmarks of one (model, method, seed) to score, from which files, into
which files, and what each score key covers. Both scoring rules build one (scripts/score_model.py,
scripts/score_benchmark.py), `lmbias.jobs.model_scoring.score_benchmarks` runs it, and an `accelerate launch`
reads it back from JSON (`lmbias score --job FILE`), so it is plain data: strings, numbers and config dicts.

The score key of each benchmark (lmbias.metrics.score_keys.score_key) is computed from these fields' values; the
types that hold them do not enter it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from lmbias.errors import ConfigError


def _path_or_none(value) -> str | None:
    return None if value in (None, "") else str(value)


@dataclasses.dataclass(frozen=True)
class BenchmarkTask:
    """One benchmark of a job: its scoring slice of the config (`entry`), items file, score file, the library
    fingerprint files its score key covers, and (in a launched job only) the score key the launching job
    computed, which the launched processes write without computing it again."""

    entry: Mapping
    items: str
    scores: str
    library: tuple[str, ...] = ()
    score_key: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "items", str(self.items))
        object.__setattr__(self, "scores", str(self.scores))
        object.__setattr__(self, "library", tuple(str(f) for f in self.library))


@dataclasses.dataclass(frozen=True)
class ScoringJob:
    """The benchmarks of one (model, method, seed) to score with the model loaded once. `method_entry` carries
    `model_dir` (the method's model folder, fine-tuned or fitted, or None); `weights_dir` is the pretrained
    model's folder; `max_tokens` the token budget (a resource: no score depends on it); `manifest` the
    scores.json a model's job (rule score_model) writes, None for one benchmark's; `timing` the job's timing
    file."""

    model_name: str
    model_entry: Mapping
    method_entry: Mapping
    benchmarks: Mapping[str, BenchmarkTask]
    weights_dir: str | None = None
    seed: int = 0
    threads: int | None = None
    max_tokens: int | None = None
    manifest: str | None = None
    timing: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "weights_dir", _path_or_none(self.weights_dir))
        object.__setattr__(self, "manifest", _path_or_none(self.manifest))
        object.__setattr__(self, "timing", _path_or_none(self.timing))
        object.__setattr__(self, "benchmarks", dict(self.benchmarks))

    def launched(self, keys: Mapping[str, str]) -> ScoringJob:
        """The job an `accelerate launch` reads: the benchmarks in `keys` alone, each with its score key."""
        return dataclasses.replace(
            self,
            benchmarks={name: dataclasses.replace(self.benchmarks[name], score_key=key) for name, key in keys.items()},
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str, source: str = "the job description") -> ScoringJob:
        """The job `to_json` wrote; ConfigError naming `source` for a field this version does not know."""
        data = json.loads(text)
        fields = {f.name for f in dataclasses.fields(cls)}
        task_fields = {f.name for f in dataclasses.fields(BenchmarkTask)}
        unknown = sorted(set(data) - fields) + sorted(
            f"benchmarks.{name}.{k}"
            for name, task in data.get("benchmarks", {}).items()
            for k in set(task) - task_fields
        )
        if unknown:
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(fields))})")
        data["benchmarks"] = {name: BenchmarkTask(**task) for name, task in data["benchmarks"].items()}
        return cls(**data)

    @classmethod
    def read(cls, path: str | os.PathLike) -> ScoringJob:
        return cls.from_json(Path(path).read_text(encoding="utf-8"), str(path))


def one_benchmark_job(
    items_path,
    output_path,
    model_name: str,
    model_entry: Mapping,
    method_entry: Mapping,
    benchmark_name: str,
    benchmark_entry: Mapping,
    *,
    weights_dir=None,
    threads: int | None = None,
    max_tokens: int | None = None,
    timing=None,
    library: Iterable = (),
    seed: int = 0,
) -> ScoringJob:
    """The job of one benchmark's score file (rule score_benchmark, and a caller scoring one benchmark in
    process): `library` the fingerprint files its score key covers."""
    return ScoringJob(
        model_name,
        model_entry,
        method_entry,
        {benchmark_name: BenchmarkTask(benchmark_entry, items_path, output_path, tuple(library))},
        weights_dir=weights_dir,
        seed=seed,
        threads=threads,
        max_tokens=max_tokens,
        timing=timing,
    )
