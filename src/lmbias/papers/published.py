"""Published numbers of the four papers (resources/published/{paper}.yaml; /work/notes/published_format.md).

Minimal stand-in for the transcriptions helper's loader (same API): the merger keeps that version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lmbias.errors import ConfigError

PAPERS = ("manela2021", "bartl2020", "lu2018", "over_debiasing")
_ROOT = Path(__file__).resolve().parents[3] / "resources" / "published"


@dataclass(frozen=True)
class PublishedColumn:
    id: str
    header: str
    benchmark: str | None = None
    metric: str | None = None
    variant: str | None = None
    subset: str | None = None
    scale: float = 1.0


@dataclass(frozen=True)
class PublishedRow:
    label: str
    model: str | None
    method: str
    method_name: str | None = None
    settings: dict | None = None
    values: dict = field(default_factory=dict)
    bold: frozenset = frozenset()


@dataclass(frozen=True)
class PublishedTable:
    id: str
    label: str
    caption: str
    method_kinds: tuple
    significance: dict | None
    columns: list
    rows: list


@dataclass(frozen=True)
class PublishedPaper:
    paper: str
    title: str
    source: str
    tables: dict


def published_path(paper: str, root: Path | None = None) -> Path:
    return Path(root or _ROOT) / f"{paper}.yaml"


def load_published(paper: str, root: Path | None = None) -> PublishedPaper:
    if paper not in PAPERS:
        raise ConfigError(f"unknown paper {paper!r}; known: {', '.join(PAPERS)}")
    path = published_path(paper, root)
    if not path.is_file():
        raise ConfigError(f"{path}: no published numbers for paper {paper!r}")
    data = yaml.safe_load(path.read_text()) or {}
    tables = {}
    for tid, t in (data.get("tables") or {}).items():
        columns = [PublishedColumn(id=c["id"], header=c.get("header", c["id"]), benchmark=c.get("benchmark"),
                                   metric=c.get("metric"), variant=c.get("variant"), subset=c.get("subset"),
                                   scale=float(c.get("scale", 1) or 1)) for c in t.get("columns") or []]
        ids = {c.id for c in columns}
        rows = []
        for i, r in enumerate(t.get("rows") or []):
            values = {k: float(v) for k, v in (r.get("values") or {}).items()}
            for k in values:
                if k not in ids:
                    raise ConfigError(f"{path}: tables.{tid}.rows[{i}].values.{k}: unknown column")
            rows.append(PublishedRow(label=r["label"], model=r.get("model"), method=r["method"],
                                     method_name=r.get("method_name"), settings=r.get("settings"),
                                     values=values, bold=frozenset(r.get("bold") or ())))
        tables[tid] = PublishedTable(id=tid, label=t.get("label", tid), caption=t.get("caption", ""),
                                     method_kinds=tuple(t.get("method_kinds") or ()),
                                     significance=t.get("significance"), columns=columns, rows=rows)
    return PublishedPaper(paper=data.get("paper", paper), title=data.get("title", ""), source=data.get("source", ""),
                          tables=tables)
