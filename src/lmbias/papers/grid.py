"""config.yaml `papers:`: which of our (model, method) pairs each paper's tables and figures read.

A paper's grid is the cross product of its `models` and `methods`; a pair the model's family cannot run
(gpr on a causal or seq2seq model, anything but pretrained on a headless encoder) is simply not a pair:
it is skipped without an error, since a cross product always has such holes.

A pair whose inputs the user cannot have is *left out*, explicitly: Manela et al.'s GPR fine-tune needs the
licensed OntoNotes 5.0 (`corpora.ontonotes.path`), so without it the gpr pairs are not built, and every
table that would show them, and the run's log, say which pairs were left out and why (`left_out_pairs`).
The paper's other cells are still built.

A paper's grid also selects the *readings* its tables read (`papers.<paper>.readings`): {benchmark a table
column selects: benchmark entry read instead}, e.g. Meade et al.'s CrowS-Pairs column reads
`crows_pairs-biasbench`, bias-bench's computation, where our `crows_pairs` default is Nangia et al.'s. An entry
with a `reading:` text is such a peer reading: it is in no summary but those of the pairs of a paper that
selects it (`pair_readings`), so the default target costs what it did and a pair in two grids has one summary
(the default entries plus every reading its papers select).
"""

from __future__ import annotations

from lmbias.errors import ConfigError
from lmbias.methods import resolution
from lmbias.papers.published import OWN_GRIDS, PAPERS
from lmbias.papers.tables import pair_settings

#: The benchmark-entry key that marks a peer's reading (its text: whose computation the entry reproduces).
READING_KEY = "reading"


def is_reading(entry) -> bool:
    """Whether a benchmark entry is a peer's reading (summarised only for the paper grids that select it)."""
    return isinstance(entry, dict) and entry.get(READING_KEY) is not None


def check_papers(config: dict) -> None:
    """ConfigError naming the key: an unknown paper, or a model or method the config does not define, or a
    reading (`readings: {benchmark: entry}`) that is not another entry of the same dataset and measure."""
    papers = config.get("papers") or {}
    if not isinstance(papers, dict):
        raise ConfigError(f"papers: expected a mapping of paper -> {{models, methods}}, got {papers!r}")
    for paper, entry in papers.items():
        if paper not in PAPERS + OWN_GRIDS:
            raise ConfigError(f"papers.{paper}: unknown paper; known papers: {', '.join(PAPERS + OWN_GRIDS)}")
        if not isinstance(entry, dict):
            raise ConfigError(f"papers.{paper}: expected {{models: [...], methods: [...]}}, got {entry!r}")
        for key, known in (("models", config["models"]), ("methods", config["methods"])):
            names = entry.get(key)
            if not isinstance(names, list) or not names:
                raise ConfigError(f"papers.{paper}.{key}: expected a non-empty list of configured {key}")
            for i, name in enumerate(names):
                if name not in known:
                    raise ConfigError(
                        f"papers.{paper}.{key}[{i}]: unknown {key[:-1]} {name!r}; configured: "
                        f"{', '.join(sorted(known))}"
                    )
        _check_readings(config, paper, entry.get("readings"))


def _check_readings(config: dict, paper: str, readings) -> None:
    if readings is None:
        return
    key = f"papers.{paper}.readings"
    if not isinstance(readings, dict):
        raise ConfigError(
            f"{key}: expected a mapping {{benchmark a table reads: benchmark entry to read}}, got {readings!r}"
        )
    benchmarks = config["benchmarks"]
    for bench, entry in readings.items():
        for name in (bench, entry):
            if name not in benchmarks:
                raise ConfigError(
                    f"{key}.{bench}: unknown benchmark {name!r}; configured: {', '.join(sorted(benchmarks))}"
                )
        if is_reading(benchmarks[bench]):
            raise ConfigError(
                f"{key}.{bench}: {bench!r} is itself a reading (benchmarks.{bench}.{READING_KEY}); "
                "the key is the benchmark a table column selects"
            )
        same = [k for k in ("dataset", "measure") if benchmarks[bench].get(k) != benchmarks[entry].get(k)]
        if same:
            raise ConfigError(
                f"{key}.{bench}: {entry!r} reads another {same[0]} ({benchmarks[entry].get(same[0])!r}, "
                f"not {benchmarks[bench].get(same[0])!r}); a reading is another computation of the same data"
            )


def runs(config: dict, model: str, method: str) -> bool:
    try:
        resolution.check_method_family(model, config["models"][model]["family"], method, config["methods"][method])
    except ConfigError:
        return False
    return True


#: Corpora a user may not have, by path prefix: (config key that provides them, why it may be unset).
UNAVAILABLE_CORPORA = {
    "results/corpora/ontonotes/": ("corpora.ontonotes.path", "licensed OntoNotes 5.0 (LDC2013T19), not downloadable"),
}


def unavailable_reason(config: dict, method: str) -> str | None:
    """Why `method`'s inputs cannot be had with this config (e.g. "needs corpora.ontonotes.path: licensed
    OntoNotes 5.0 ..."), or None when they can."""
    corpus = str((config["methods"][method] or {}).get("corpus") or "")
    for prefix, (key, why) in UNAVAILABLE_CORPORA.items():
        if corpus.startswith(prefix):
            value = config
            for part in key.split("."):
                value = (value or {}).get(part) if isinstance(value, dict) else None
            if not value:
                return f"needs {key}: {why}"
    return None


def _grid(config: dict, paper: str) -> list[tuple[str, str]]:
    entry = (config.get("papers") or {})[paper]
    return [(m, k) for m in entry["models"] for k in entry["methods"] if runs(config, m, k)]


def paper_pairs(config: dict, paper: str) -> list[tuple[str, str]]:
    """The paper's (model, method) pairs in grid order (models outer), without the ones a family cannot run
    and without the ones left out for inputs the user cannot have (`left_out_pairs`)."""
    return [(m, k) for m, k in _grid(config, paper) if unavailable_reason(config, k) is None]


def paper_readings(config: dict, paper: str) -> dict[str, str]:
    """{benchmark a table column selects: entry its cells read} of `papers.<paper>.readings` (empty: the
    benchmarks as configured)."""
    return dict(((config.get("papers") or {}).get(paper) or {}).get("readings") or {})


def readings_stand_for(config: dict) -> dict[str, list[str]]:
    """{reading entry: the benchmarks it stands for in some paper's tables}: `only_benchmarks`,
    `optional_benchmarks` and a method's `benchmarks` list that name one of those also hold the reading."""
    out: dict[str, list[str]] = {}
    for paper in config.get("papers") or {}:
        for bench, entry in paper_readings(config, paper).items():
            if bench not in out.setdefault(entry, []):
                out[entry].append(bench)
    return out


def pair_readings(config: dict) -> dict[tuple[str, str], list[str]]:
    """{(model, method): the peer readings (entries with `reading:`) its summary holds}: those that the papers
    whose grids contain the pair select, in paper order. A pair in no such grid holds none."""
    out: dict[tuple[str, str], list[str]] = {}
    for paper in config.get("papers") or {}:
        entries = [e for e in paper_readings(config, paper).values() if is_reading(config["benchmarks"].get(e))]
        if not entries:
            continue
        for pair in paper_pairs(config, paper):
            held = out.setdefault(pair, [])
            held += [e for e in entries if e not in held]
    return out


def table_readings(config: dict, paper: str, benchmarks) -> dict[str, dict]:
    """{benchmark: {entry, reading}} of the paper's readings for the benchmarks a table's columns select: what
    its cells read and the text its notes print."""
    out = {}
    for bench, entry in paper_readings(config, paper).items():
        if bench in benchmarks:
            text = config["benchmarks"][entry].get(READING_KEY)
            out[bench] = {"entry": entry, "reading": str(text) if text is not None else None}
    return out


def left_out_pairs(config: dict, paper: str) -> list[dict]:
    """{model, method, kind, reason} of each grid pair left out because its inputs cannot be had."""
    out = []
    for m, k in _grid(config, paper):
        reason = unavailable_reason(config, k)
        if reason is not None:
            out.append({"model": m, "method": k, "kind": config["methods"][k]["kind"], "reason": reason})
    return out


def pair_info(config: dict, model: str, method: str, with_settings: bool) -> dict:
    """What a table job needs of one pair: names, kind (a sweep instance's kind is its base kind), hub id,
    the method's `recipe` (whose code it reproduces; None for the papers' text) and (only when the table
    reads them) the resolved training settings."""
    model_entry, method_entry = config["models"][model], config["methods"][method]
    info = {
        "model": model,
        "method": method,
        "kind": method_entry["kind"],
        "hub_id": model_entry.get("hub_id"),
        "recipe": method_entry.get("recipe"),
    }
    if with_settings:
        resolved = resolution.resolve_method(model, model_entry, method, method_entry, config["models"])
        info["settings"] = pair_settings(model_entry, method_entry, resolved)
    return info
