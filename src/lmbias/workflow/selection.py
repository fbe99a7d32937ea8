"""Which seeds, methods and benchmarks apply: the benchmarks a (model, method) summary holds, and those it
leaves out with the reason (missing data, only_benchmarks, the method's kind or its `benchmarks:` list)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from lmbias.benchmarks import catalog
from lmbias.errors import ConfigError
from lmbias.methods import resolution
from lmbias.papers import grid as readings_grid
from lmbias.parsers import parse_inputs as benchmark_parse_inputs
from lmbias.parsers.sources import resolve_source as resolve_data_source
from lmbias.workflow.methods import check_model_method
from lmbias.workflow.stand_ins import apply_stand_ins, stand_in_entries, stood_in_for

_log = logging.getLogger(__name__)


def seeds_for(config: dict, method: str) -> list[int]:
    """The seeds `method` runs (config `seeds`; one for a method whose runs do not depend on the seed)."""
    return resolution.seeds_for(config["methods"][method], config["seeds"])


def method_names_of_kinds(config: dict, kinds) -> list[str]:
    """The configured methods of the given kinds, in config order."""
    return [name for name, entry in config["methods"].items() if entry["kind"] in kinds]


def missing_benchmark_data(config: dict, name: str) -> tuple[str, str, str] | None:
    """(missing path, config key of the file, where it was looked for) of benchmark `name`'s first local
    file that is not there, or None (generated benchmarks and downloads are never missing here). The files are
    those rule parse_benchmark reads: the benchmark's own dataset's and the other datasets' its parser declares
    (HONEST's lexicon, data.hurtlex; lmbias.parsers.parse_inputs), each named by its own dataset's keys."""
    bench = config["benchmarks"][name]
    for _, dataset, file in benchmark_parse_inputs(bench, config["data"], name, config.get("data_dir")):
        kind, location = resolve_data_source(dataset, file, config["data"], config.get("data_dir"))
        if kind == "local" and not Path(location).exists():
            folder_key = f"data.{dataset}.path" if config["data"][dataset].get("path") else "data_dir"
            return location, f"data.{dataset}.files.{file}", folder_key
    return None


def _log_warning(message: str) -> None:
    _log.warning(message)


class BenchmarkSelection:
    """The benchmarks the summaries of one config hold. Each answer is computed once (a DAG build asks for
    every job); `warn` gets each "left out" message once (the workflow passes Snakemake's logger)."""

    def __init__(self, config: dict, warn: Callable[[str], None] = _log_warning):
        self.config = config
        self._warn = warn
        self._warned: set[str] = set()
        self._verdicts: dict[str, dict | None] = {}
        self._selections: dict[str, tuple[list[str], list[dict]]] = {}
        self._stand_for: dict | None = None
        self._pair_readings: dict | None = None
        self._stand_in_entries: dict | None = None

    # --- peer readings (papers.<paper>.readings)

    def stand_for(self) -> dict[str, list[str]]:
        """{peer reading entry: the benchmarks it stands for in papers.<paper>.readings}."""
        if self._stand_for is None:
            self._stand_for = readings_grid.readings_stand_for(self.config)
        return self._stand_for

    def pair_readings(self) -> dict[tuple[str, str], list[str]]:
        """{(model, method): the peer readings its summary holds}: those its papers' grids select."""
        if self._pair_readings is None:
            self._pair_readings = readings_grid.pair_readings(self.config)
        return self._pair_readings

    def names_of(self, name: str) -> list[str]:
        """The benchmark and, for a peer reading or a model's stand-in (models.<model>.stand_ins), the benchmarks
        it stands for: a list (only_benchmarks, optional_benchmarks, methods.<name>.benchmarks) that names one of
        them names the reading or the stand-in too."""
        if self._stand_in_entries is None:
            self._stand_in_entries = stand_in_entries(self.config)
        return [name, *self.stand_for().get(name, ()), *self._stand_in_entries.get(name, ())]

    # --- every method of a model

    def verdict(self, name: str) -> dict | None:
        """None when benchmark `name` is kept, else {benchmark, reason, config_key} of why it is left out.

        No silent shrinking: a configured benchmark whose data is missing stops the run (ConfigError), naming
        the file and its config key, unless the user opted out: `only_benchmarks` (this run's list),
        `missing_data: skip`, or `optional_benchmarks` (left out when their data is missing). A peer reading
        counts as listed where a benchmark it stands for is. Reasons name no folder, so moving the data does
        not rerun summaries."""
        if name not in self._verdicts:
            self._verdicts[name] = self._verdict(name)
        return self._verdicts[name]

    def _verdict(self, name: str) -> dict | None:
        config = self.config
        only = config.get("only_benchmarks")
        if only is not None and not set(self.names_of(name)) & set(only):
            return {"benchmark": name, "reason": "not in this run's only_benchmarks", "config_key": "only_benchmarks"}
        missing = missing_benchmark_data(config, name)
        if missing is None:
            return None
        location, file_key, folder_key = missing
        if config.get("missing_data", "error") == "skip":
            opt_out = "missing_data"
        elif set(self.names_of(name)) & set(config.get("optional_benchmarks") or []):
            opt_out = "optional_benchmarks"
        else:
            raise ConfigError(
                f"benchmark {name!r}: its data file {location} is missing ({file_key}, looked for through "
                f"{folder_key}). Add the file, fix {folder_key}, or leave the benchmark out explicitly: "
                f"--config only_benchmarks=[...] for this run, optional_benchmarks: [{name}], or missing_data: skip"
            )
        self._warn_once(f"benchmark {name!r} left out of summaries ({opt_out}): {location} is missing ({file_key})")
        return {
            "benchmark": name,
            "reason": f"data missing: {file_key} is not in the {folder_key} folder",
            "config_key": opt_out,
        }

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self._warn(message)

    def _split(self, names) -> tuple[list[str], list[dict]]:
        kept, left_out = [], []
        for name in names:
            verdict = self.verdict(name)
            if verdict is None:
                kept.append(name)
            else:
                left_out.append(verdict)
        return kept, left_out

    def summary_selection(self, model: str) -> tuple[list[str], list[dict]]:
        """(benchmarks a summary of `model` holds, [{benchmark, reason, config_key}] of those it leaves out), the
        peer readings (entries with `reading:`) aside: a pair's summary holds those its papers select
        (reading_selection). A benchmark the model reads through a stand-in (models.<model>.stand_ins) is left
        out, the stand-in held in its place."""
        if model not in self._selections:
            benchmarks = self.config["benchmarks"]
            names = catalog.benchmarks_for(self.config["models"][model]["family"], benchmarks)
            names = apply_stand_ins(
                self.config, model, [n for n in names if not readings_grid.is_reading(benchmarks[n])]
            )
            kept, left_out = self._split(names)
            applicable = set(catalog.benchmarks_for(self.config["models"][model]["family"], benchmarks))
            stood_in = [entry for entry in stood_in_for(self.config, model) if entry["benchmark"] in applicable]
            self._selections[model] = (kept, stood_in + left_out)
        return self._selections[model]

    def reading_selection(self, model: str, method: str) -> tuple[list[str], list[dict]]:
        """(kept, left out) of the peer readings that the papers whose grids hold (model, method) select
        (papers.<paper>.readings) and that apply to the model's family; none for a pair in no paper's grid."""
        wanted = self.pair_readings().get((model, method))
        if not wanted:
            return [], []
        config = self.config
        applicable = set(catalog.benchmarks_for(config["models"][model]["family"], config["benchmarks"]))
        return self._split(w for w in wanted if w in applicable)

    # --- one (model, method) pair

    def method_choice(self, method: str, benchmark: str) -> str | None:
        """Why the method's `benchmarks:` list leaves `benchmark` out of its summaries, or None (a peer reading
        is kept when the list names it or a benchmark it stands for)."""
        entry = self.config["methods"][method]
        reasons = [resolution.method_benchmark_choice(method, entry, name) for name in self.names_of(benchmark)]
        return None if None in reasons else reasons[0]

    def method_exclusion(self, method: str, benchmark: str) -> str | None:
        """Why `method` does not apply to `benchmark` (Self-Debias: embedding benchmarks), or None."""
        config = self.config
        return resolution.method_benchmark_exclusion(method, config["methods"][method], config["benchmarks"][benchmark])

    def summary_benchmarks(self, model: str, method: str) -> list[str]:
        """The benchmarks the (model, method) summary holds; ConfigError when the method's family check fails
        or none is left."""
        config = self.config
        check_model_method(config, model, method)
        benches = list(self.summary_selection(model)[0]) + self.reading_selection(model, method)[0]
        if config["methods"][method]["kind"] == "online":  # Online Skewness Mitigation changes WinoBias only
            benches = [b for b in benches if config["benchmarks"][b]["dataset"] == "winobias"]
        benches = [b for b in benches if not self.method_exclusion(method, b)]
        benches = [b for b in benches if not self.method_choice(method, b)]
        if not benches:
            raise ConfigError(
                f"model {model!r}: no configured benchmark applies to family "
                f"{config['models'][model]['family']!r} (or only_benchmarks, or "
                f"methods.{resolution.base_method(method)}.benchmarks, leaves none)"
            )
        return benches

    def left_out(self, model: str, method: str) -> list[dict]:
        """The configured benchmarks the (model, method) summary leaves out, and why (recorded in the summary's
        metadata): missing data or only_benchmarks (every method of the model), and benchmarks the method does
        not apply to."""
        readings = self.reading_selection(model, method)
        left_out = [dict(entry) for entry in self.summary_selection(model)[1] + readings[1]]
        for name in self.summary_selection(model)[0] + readings[0]:
            reason = self.method_exclusion(method, name)
            if reason:
                left_out.append({"benchmark": name, "reason": reason, "config_key": f"methods.{method}.kind"})
                continue
            reason = self.method_choice(method, name)
            if reason:
                left_out.append(
                    {
                        "benchmark": name,
                        "reason": reason,
                        "config_key": f"methods.{resolution.base_method(method)}.benchmarks",
                    }
                )
        return left_out
