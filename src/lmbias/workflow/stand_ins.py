"""Stand-ins: a model whose summaries read a smaller entry of a benchmark in place of the benchmark itself.

`models.<model>.stand_ins: {benchmark: entry}`. A tiny model's numbers mean nothing (random weights): it exercises
every code path, and reading BBQ's 5,672 questions or HolisticBias' 51,057 sentences to do so only costs the
main job time. Its stand-in is another entry of the same dataset and measure with a subset option (BBQ's
`max_templates`, HolisticBias' `max_descriptors`), so the real models of the same config keep the whole benchmark.

Words: the *benchmark* is the entry every other model reads (`bbq`); the *stand-in* is the entry that model
reads instead (`bbq-subset`). A stand-in is in no summary but those of the models that name it, and the
summaries of those models list the benchmark it stands for as left out, with the stand-in named, so a smaller
reading never passes for the whole one.
"""

from __future__ import annotations

from lmbias.errors import ConfigError
from lmbias.papers.grid import is_reading

STAND_INS_KEY = "stand_ins"


def stand_ins_of(config: dict, model: str) -> dict[str, str]:
    """{benchmark: the entry `model` reads in its place} (empty for most models). A pair neither of whose entries
    is configured is no stand-in: a config cut down to a few benchmarks (an overlay, a test) keeps its tiny models'
    stand_ins without naming every entry again. A pair with one side configured is checked (check_stand_ins)."""
    benchmarks = config["benchmarks"]
    pairs = config["models"][model].get(STAND_INS_KEY) or {}
    return {b: e for b, e in pairs.items() if b in benchmarks or e in benchmarks}


def stand_in_entries(config: dict) -> dict[str, list[str]]:
    """{stand-in entry: the benchmarks it stands for, for some model}, in config order."""
    out: dict[str, list[str]] = {}
    for model in config["models"]:
        for bench, entry in stand_ins_of(config, model).items():
            if bench not in out.setdefault(entry, []):
                out[entry].append(bench)
    return out


def apply_stand_ins(config: dict, model: str, names) -> list[str]:
    """`names` (benchmark entries that apply to `model`) as the model's summaries hold them: each benchmark with
    a stand-in replaced by it in place, every other model's stand-ins left out."""
    mine = stand_ins_of(config, model)
    theirs = set(stand_in_entries(config)) - set(mine.values())
    out: list[str] = []
    for name in names:
        if name in theirs or name in mine.values():
            continue  # a stand-in is read in its benchmark's place only, by the models that name it
        chosen = mine.get(name, name)
        if chosen not in out:
            out.append(chosen)
    return out


def stood_in_for(config: dict, model: str) -> list[dict]:
    """The `left_out` records of the benchmarks `model` reads through a stand-in."""
    return [
        {
            "benchmark": bench,
            "reason": f"read through its stand-in {entry!r}, a subset of it",
            "config_key": f"models.{model}.{STAND_INS_KEY}.{bench}",
        }
        for bench, entry in stand_ins_of(config, model).items()
    ]


def check_stand_ins(config: dict) -> None:
    """ConfigError naming `models.<model>.stand_ins.<benchmark>`: an unknown entry on either side, a peer reading
    on either side, a stand-in of another dataset or measure, a stand-in that is itself a benchmark with a stand-in,
    or a comparison of the model on a benchmark it reads through a stand-in."""
    benchmarks = config["benchmarks"]
    stood_for = {bench for model in config["models"] for bench in stand_ins_of(config, model)}
    for model in config["models"]:
        for bench, entry in stand_ins_of(config, model).items():
            key = f"models.{model}.{STAND_INS_KEY}.{bench}"
            for name in (bench, entry):
                if name not in benchmarks:
                    raise ConfigError(f"{key}: unknown benchmark {name!r}; configured: {', '.join(sorted(benchmarks))}")
                if is_reading(benchmarks[name]):
                    raise ConfigError(
                        f"{key}: {name!r} is a peer reading (benchmarks.{name}.reading); stand-ins replace our "
                        "own entries"
                    )
            if entry == bench:
                raise ConfigError(f"{key}: a benchmark cannot stand in for itself")
            if entry in stood_for:
                raise ConfigError(f"{key}: {entry!r} has a stand-in of its own; name one entry for both")
            differs = [k for k in ("dataset", "measure") if benchmarks[bench].get(k) != benchmarks[entry].get(k)]
            if differs:
                raise ConfigError(
                    f"{key}: {entry!r} reads another {differs[0]} ({benchmarks[entry].get(differs[0])!r}, not "
                    f"{benchmarks[bench].get(differs[0])!r}); a stand-in is a subset of the same data"
                )
    for name, comparison in (config.get("comparisons") or {}).items():
        for side in ("before", "after"):
            model = comparison[side]["model"]
            entry = stand_ins_of(config, model).get(comparison["benchmark"]) if model in config["models"] else None
            if entry:
                raise ConfigError(
                    f"comparisons.{name}.benchmark: {model!r} reads {comparison['benchmark']!r} through its stand-in "
                    f"{entry!r} (models.{model}.{STAND_INS_KEY}); compare on {entry!r} or drop the stand-in"
                )
