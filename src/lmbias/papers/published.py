"""Published numbers of the source papers as data: resources/published/{paper}.yaml.

Each file transcribes one paper's result tables as printed (format: docs/papers.md, "Published numbers"). A table
is a list of columns and a list of rows. A column carries a *selector* naming the row of our
``summary.parquet`` that measures the same thing (benchmark, metric, variant, subset, and a scale from our
unit to the paper's); ``benchmark: null`` marks a column we do not compute. A row names the model (its
HuggingFace hub id) and our method kind it corresponds to, and holds the printed values by column id.
``figures`` (optional) holds numbers or directions that a paper states only in its text or a plot.
``source`` names the paper text the numbers were read from: a file name under ../shared/papers/ (tests read
the printed tables back from it), or an https:// URL for a paper without a shared copy.

Our own grids (`OWN_GRIDS`, e.g. llm_gender: today's decoders, pretrained vs LoRA and post-hoc methods) use the
same file format and the same table and figure rules, but no paper printed them: ``source: null`` and every
table has ``rows: []``, so each table lists our pairs only (the columns still select our summary rows).

File layout (top level: paper, title, source, tables, figures)::

    tables:
      <table id>:                       # lower-case letters, digits, '_' (it names result files)
        label, caption, note            # as printed; note optional
        method_kinds: [<kind>, ...]     # our method kinds the table prints
        significance: null | {p_below: 0.01, mark: bold}
        columns: [{id, header, benchmark, metric, variant, subset, scale, note}, ...]
        rows: [{label, model, method, method_name, settings, values: {<column id>: number}, bold, note}, ...]

`load_published` validates a file completely and returns frozen dataclasses; every error names the file and
the key path (``resources/published/manela2021.yaml: tables.table2.rows[3].values.f1_prx: unknown column``).
Pure: no Snakemake, no summary files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lmbias.errors import DataError
from lmbias.io import SAFE_YAML_LOADER

PAPERS = ("manela2021", "bartl2020", "lu2018", "over_debiasing", "meade2022")
#: Grids of ours laid out like a paper (config.yaml `papers:`, target paper_<name>) without published numbers.
OWN_GRIDS = ("llm_gender",)
#: Our config's method kinds (config.yaml `methods.<name>.kind`; lmbias.methods.kinds.METHOD_KEYS).
METHOD_KINDS = ("pretrained", "cds", "cda", "er", "sd", "gpr", "online", "inlp", "dropout", "self_debias")
SIGNS = ("positive", "negative")
SIGNIFICANCE_MARKS = ("bold",)
#: A paper without a text under ../shared/papers/ names its source by URL instead of by file name.
URL_PREFIX = "https://"

REPO_ROOT = Path(__file__).resolve().parents[3]
PUBLISHED_DIR = Path("resources") / "published"


@dataclass(frozen=True)
class PublishedColumn:
    id: str
    header: str
    benchmark: str | None
    metric: str | None
    variant: str | None
    subset: str | None
    scale: float = 1.0
    note: str | None = None


@dataclass(frozen=True)
class PublishedRow:
    label: str
    model: str | None
    method: str | None
    method_name: str | None
    settings: dict[str, Any] | None
    values: dict[str, float]
    bold: frozenset[str] = frozenset()
    note: str | None = None


@dataclass(frozen=True)
class PublishedTable:
    id: str
    label: str
    caption: str
    method_kinds: tuple[str, ...]
    significance: dict[str, Any] | None
    columns: list[PublishedColumn]
    rows: list[PublishedRow]
    note: str | None = None

    def column(self, column_id: str) -> PublishedColumn:
        for c in self.columns:
            if c.id == column_id:
                return c
        raise KeyError(f"{self.id}: no column {column_id!r}")


@dataclass(frozen=True)
class PublishedFigure:
    """A number (value, unit) or a direction (sign) the paper states in its text; selector as for a column."""

    id: str
    label: str
    text: str
    value: float | None
    unit: str | None
    sign: str | None
    model: str | None
    method: str | None
    benchmark: str | None
    metric: str | None
    variant: str | None
    subset: str | None
    scale: float = 1.0
    note: str | None = None


@dataclass(frozen=True)
class PublishedPaper:
    paper: str
    title: str
    source: str | None  # a file name under ../shared/papers/, an https:// URL where no text is shared; None: our grid
    tables: dict[str, PublishedTable]
    figures: list[PublishedFigure] = field(default_factory=list)

    @property
    def source_is_url(self) -> bool:
        return self.source is not None and is_source_url(self.source)


def is_source_url(source: str) -> bool:
    """A `source` naming the paper by URL (no copy under ../shared/papers/) rather than by file name."""
    return source.startswith(URL_PREFIX)


def published_path(paper: str, root: Path | None = None) -> Path:
    """resources/published/{paper}.yaml under the repository (or under `root`)."""
    return (REPO_ROOT if root is None else Path(root)) / PUBLISHED_DIR / f"{paper}.yaml"


class _UniqueKeyLoader(SAFE_YAML_LOADER):
    """The safe loader (lmbias.io.SAFE_YAML_LOADER) that refuses a mapping key given twice (PyYAML silently keeps
    the last one)."""


def _construct_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Checker:
    """Type checks that raise DataError(`<key path>: <problem>`, file)."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, problem: str):
        raise DataError(f"{where or '(top level)'}: {problem}", self.path)

    def mapping(self, obj, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(obj, dict):
            self.fail(where, f"expected a mapping, got {type(obj).__name__}")
        for key in obj:
            if not isinstance(key, str):
                self.fail(where, f"key {key!r} is not a string")
        for key in required:
            if key not in obj:
                self.fail(f"{where}.{key}" if where else key, "missing required key")
        unknown = sorted(set(obj) - set(required) - set(optional))
        if unknown:
            self.fail(
                f"{where}.{unknown[0]}" if where else unknown[0],
                f"unknown key (known: {', '.join(required + optional)})",
            )
        return obj

    def string(self, obj, where: str, nullable: bool = False) -> str | None:
        if obj is None and nullable:
            return None
        if not isinstance(obj, str) or not obj.strip():
            self.fail(where, f"expected a non-empty string{' or null' if nullable else ''}, got {obj!r}")
        return obj

    def number(self, obj, where: str) -> float:
        if isinstance(obj, bool) or not isinstance(obj, (int, float)):
            self.fail(where, f"expected a number, got {obj!r}")
        value = float(obj)
        if not math.isfinite(value):
            self.fail(where, f"expected a finite number, got {obj!r}")
        return value

    def method(self, obj, where: str) -> str | None:
        if obj is None:
            return None
        if obj not in METHOD_KINDS:
            self.fail(where, f"unknown method kind {obj!r} (known: {', '.join(METHOD_KINDS)})")
        return obj

    def selector(self, obj: dict, where: str) -> dict:
        """benchmark, metric, variant, subset, scale: all null when benchmark is null; metric needs benchmark."""
        benchmark = self.string(obj.get("benchmark"), f"{where}.benchmark", nullable=True)
        metric = self.string(obj.get("metric"), f"{where}.metric", nullable=True)
        variant = self.string(obj.get("variant"), f"{where}.variant", nullable=True)
        subset = self.string(obj.get("subset"), f"{where}.subset", nullable=True)
        scale = self.number(obj.get("scale", 1), f"{where}.scale")
        if benchmark is None:
            for key, value in (("metric", metric), ("variant", variant), ("subset", subset)):
                if value is not None:
                    self.fail(
                        f"{where}.{key}",
                        f"{key} {value!r} given without a benchmark (benchmark: null marks a column we do not compute)",
                    )
        elif metric is None:
            self.fail(f"{where}.metric", f"benchmark {benchmark!r} needs a metric")
        if scale == 0:
            self.fail(f"{where}.scale", "must not be 0")
        return {"benchmark": benchmark, "metric": metric, "variant": variant, "subset": subset, "scale": scale}


_SELECTOR_KEYS = ("benchmark", "metric", "variant", "subset", "scale")


def _column(c: _Checker, obj, where: str) -> PublishedColumn:
    c.mapping(obj, where, ("id", "header"), _SELECTOR_KEYS + ("note",))
    return PublishedColumn(
        id=c.string(obj["id"], f"{where}.id"),
        header=c.string(obj["header"], f"{where}.header"),
        note=c.string(obj.get("note"), f"{where}.note", nullable=True),
        **c.selector(obj, where),
    )


def _row(c: _Checker, obj, where: str, column_ids: list[str]) -> PublishedRow:
    c.mapping(obj, where, ("label", "model", "method", "values"), ("method_name", "settings", "bold", "note"))
    values = obj["values"]
    if values is None:
        values = {}
    if not isinstance(values, dict):
        c.fail(f"{where}.values", f"expected a mapping of column id to number, got {type(values).__name__}")
    parsed = {}
    for key, value in values.items():
        if key not in column_ids:
            c.fail(f"{where}.values.{key}", f"unknown column (columns: {', '.join(column_ids)})")
        parsed[key] = c.number(value, f"{where}.values.{key}")
    bold = obj.get("bold") or []
    if not isinstance(bold, list):
        c.fail(f"{where}.bold", f"expected a list of column ids, got {bold!r}")
    for i, key in enumerate(bold):
        if key not in parsed:
            c.fail(f"{where}.bold[{i}]", f"{key!r} is not a column this row has a value for")
    settings = obj.get("settings")
    if settings is not None:
        if not isinstance(settings, dict) or not settings:
            c.fail(f"{where}.settings", f"expected a non-empty mapping or null, got {settings!r}")
        for key, value in settings.items():
            if not isinstance(key, str) or not isinstance(value, (str, int, float)) or isinstance(value, bool):
                c.fail(f"{where}.settings.{key}", f"expected a number or string, got {value!r}")
    return PublishedRow(
        label=c.string(obj["label"], f"{where}.label"),
        model=c.string(obj["model"], f"{where}.model", nullable=True),
        method=c.method(obj["method"], f"{where}.method"),
        method_name=c.string(obj.get("method_name"), f"{where}.method_name", nullable=True),
        settings=dict(settings) if settings is not None else None,
        values=parsed,
        bold=frozenset(bold),
        note=c.string(obj.get("note"), f"{where}.note", nullable=True),
    )


def _significance(c: _Checker, obj, where: str) -> dict | None:
    if obj is None:
        return None
    c.mapping(obj, where, ("p_below", "mark"))
    p = c.number(obj["p_below"], f"{where}.p_below")
    if not 0 < p < 1:
        c.fail(f"{where}.p_below", f"must be between 0 and 1, got {p}")
    if obj["mark"] not in SIGNIFICANCE_MARKS:
        c.fail(f"{where}.mark", f"unknown mark {obj['mark']!r} (known: {', '.join(SIGNIFICANCE_MARKS)})")
    return {"p_below": p, "mark": obj["mark"]}


def _table(c: _Checker, table_id, obj, where: str, own_grid: bool = False) -> PublishedTable:
    if (
        not isinstance(table_id, str)
        or not table_id
        or table_id != table_id.lower()
        or not all(ch.isalnum() or ch == "_" for ch in table_id)
    ):
        c.fail(where, "table id must be lower-case letters, digits and '_' (it names result files)")
    c.mapping(obj, where, ("label", "caption", "method_kinds", "significance", "columns", "rows"), ("note",))
    kinds = obj["method_kinds"]
    if not isinstance(kinds, list):
        c.fail(f"{where}.method_kinds", f"expected a list of method kinds, got {kinds!r}")
    for i, kind in enumerate(kinds):
        if kind is None:
            c.fail(f"{where}.method_kinds[{i}]", "null is not a method kind")
        c.method(kind, f"{where}.method_kinds[{i}]")
    if len(set(kinds)) != len(kinds):
        c.fail(f"{where}.method_kinds", f"duplicate kinds in {kinds}")
    if not isinstance(obj["columns"], list) or not obj["columns"]:
        c.fail(f"{where}.columns", "expected a non-empty list")
    columns = []
    for i, col in enumerate(obj["columns"]):
        column = _column(c, col, f"{where}.columns[{i}]")
        if any(prev.id == column.id for prev in columns):
            c.fail(f"{where}.columns[{i}].id", f"duplicate column id {column.id!r}")
        columns.append(column)
    if own_grid:
        if obj["rows"] != []:
            c.fail(f"{where}.rows", f"our own grid ({', '.join(OWN_GRIDS)}) has no published rows: expected []")
    elif not isinstance(obj["rows"], list) or not obj["rows"]:
        c.fail(f"{where}.rows", "expected a non-empty list")
    ids = [col.id for col in columns]
    rows = [_row(c, row, f"{where}.rows[{i}]", ids) for i, row in enumerate(obj["rows"])]
    labels = [r.label for r in rows]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            c.fail(f"{where}.rows[{i}].label", f"duplicate row label {label!r}")
    return PublishedTable(
        id=table_id,
        label=c.string(obj["label"], f"{where}.label"),
        caption=c.string(obj["caption"], f"{where}.caption"),
        method_kinds=tuple(kinds),
        significance=_significance(c, obj["significance"], f"{where}.significance"),
        columns=columns,
        rows=rows,
        note=c.string(obj.get("note"), f"{where}.note", nullable=True),
    )


def _figure(c: _Checker, obj, where: str) -> PublishedFigure:
    c.mapping(
        obj, where, ("id", "label", "text"), ("value", "unit", "sign", "model", "method", "note") + _SELECTOR_KEYS
    )
    value = obj.get("value")
    sign = obj.get("sign")
    if value is None and sign is None:
        c.fail(where, "needs a value or a sign")
    if sign is not None and sign not in SIGNS:
        c.fail(f"{where}.sign", f"expected one of {', '.join(SIGNS)}, got {sign!r}")
    return PublishedFigure(
        id=c.string(obj["id"], f"{where}.id"),
        label=c.string(obj["label"], f"{where}.label"),
        text=c.string(obj["text"], f"{where}.text"),
        value=None if value is None else c.number(value, f"{where}.value"),
        unit=c.string(obj.get("unit"), f"{where}.unit", nullable=True),
        sign=sign,
        model=c.string(obj.get("model"), f"{where}.model", nullable=True),
        method=c.method(obj.get("method"), f"{where}.method"),
        note=c.string(obj.get("note"), f"{where}.note", nullable=True),
        **c.selector(obj, where),
    )


def _display_path(path: Path) -> Path:
    try:
        return path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return path


def load_published(paper: str, root: Path | None = None) -> PublishedPaper:
    """Read and validate resources/published/{paper}.yaml (under `root`, default this repository)."""
    if paper not in PAPERS + OWN_GRIDS:
        raise DataError(f"unknown paper {paper!r} (known: {', '.join(PAPERS + OWN_GRIDS)})")
    return load_published_file(published_path(paper, root), paper)


def load_published_file(path: str | Path, paper: str | None = None) -> PublishedPaper:
    """Validate one published-numbers file; `paper` (default: the file stem) must equal its `paper` key."""
    path = Path(path)
    c = _Checker(_display_path(path))
    if not path.is_file():
        raise DataError("no such file", c.path)
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataError(
            f"not valid YAML: {getattr(exc, 'problem', None) or exc}", c.path, None if mark is None else mark.line + 1
        ) from exc
    c.mapping(doc, "", ("paper", "title", "source", "tables"), ("figures",))
    expected = paper or path.stem
    if doc["paper"] != expected:
        c.fail("paper", f"{doc['paper']!r} does not match the file name ({expected!r})")
    tables_obj = doc["tables"]
    if tables_obj is None:
        tables_obj = {}
    if not isinstance(tables_obj, dict):
        c.fail("tables", f"expected a mapping of table id to table, got {type(tables_obj).__name__}")
    own_grid = doc["paper"] in OWN_GRIDS
    tables = {tid: _table(c, tid, t, f"tables.{tid}", own_grid) for tid, t in tables_obj.items()}
    figures_obj = doc.get("figures") or []
    if not isinstance(figures_obj, list):
        c.fail("figures", f"expected a list, got {type(figures_obj).__name__}")
    figures = []
    for i, f in enumerate(figures_obj):
        figure = _figure(c, f, f"figures[{i}]")
        if any(prev.id == figure.id for prev in figures):
            c.fail(f"figures[{i}].id", f"duplicate figure id {figure.id!r}")
        figures.append(figure)
    if own_grid:
        if doc["source"] is not None:
            c.fail("source", f"our own grid ({doc['paper']}) has no published source: expected null")
        return PublishedPaper(
            paper=doc["paper"], title=c.string(doc["title"], "title"), source=None, tables=tables, figures=figures
        )
    source = c.string(doc["source"], "source")
    if is_source_url(source):
        if len(source) == len(URL_PREFIX) or any(ch.isspace() for ch in source):
            c.fail("source", f"expected an https:// URL without spaces, got {source!r}")
    elif "://" in source:
        c.fail("source", f"a URL source must start with {URL_PREFIX}, got {source!r}")
    elif "/" in source or "\\" in source:
        c.fail("source", f"expected a file name under ../shared/papers/, got {source!r}")
    return PublishedPaper(
        paper=doc["paper"], title=c.string(doc["title"], "title"), source=source, tables=tables, figures=figures
    )
