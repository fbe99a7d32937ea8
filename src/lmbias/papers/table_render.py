"""A paper's table as people read it: the cells' text (ours beside the published number and their difference,
as many decimals as the paper prints), the legend and the notes under it (the recipe behind each method shown,
the pairs left out and why), Markdown and a self-contained HTML page, and `write_table`, which builds a table
(lmbias.papers.tables) and writes its parquet, Markdown and HTML."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from lmbias.io import write_table_atomic, write_text_atomic
from lmbias.papers.tables import (
    MISSING,
    TABLE_SCHEMA,
    build_table,
    is_parameter_table,
    is_settings_table,
    lm_columns,
    reading_entries,
    reading_notes,
)


def _decimals(table) -> dict[str, int]:
    """Per column: the most decimals the paper prints (as transcribed), 2 when it prints none."""
    out = {}
    for column in table.columns:
        places = []
        for row in table.rows:
            if column.id in row.values:
                text = repr(float(row.values[column.id]))  # 58.0 -> 1 place, 0.05 -> 2, 2e-05 -> general format
                places.append(0 if "e" in text else len(text.split(".")[1]) if "." in text else 0)
        out[column.id] = max(places) if places else 2
    return out


def _fmt(value, places: int | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if places is None:
        return f"{value:g}".replace("-", "−") if value < 0 else f"{value:g}"
    if value != 0 and abs(value) < 10**-places:
        return f"{value:.2g}"
    return f"{value:.{places}f}".replace("-", "−")


def _headers(long: pd.DataFrame) -> list[str]:
    first = long[long["row_order"] == long["row_order"].min()] if len(long) else long
    return list(first["header"])


def _cells(table, long: pd.DataFrame, bold) -> list[tuple[str, str, list[str]]]:
    places = {} if is_parameter_table(table) else _decimals(table)  # parameters: as short as exact (%g)
    lines = []
    for _, group in long.sort_values("row_order", kind="stable").groupby("row_order", sort=True):
        first = group.iloc[0]
        if is_parameter_table(table):  # one column per model: ours is in every column
            pair = "per column"
        else:
            pair = (
                MISSING
                if pd.isna(first["model"])
                else (first["model"] if pd.isna(first["method"]) else f"{first['model']} / {first['method']}")
            )
        cells = []
        for _, c in group.iterrows():
            d = places.get(c["column"], None if is_parameter_table(table) else 2)
            ours = None if pd.isna(c["ours"]) else float(c["ours"])
            pub = None if pd.isna(c["published"]) else float(c["published"])
            ours_text = _fmt(ours, d)
            if ours is not None and c["significant"] is True:
                ours_text = bold(ours_text)
            if c["source"] == "ours":
                cells.append(ours_text)
                continue
            pub_text = _fmt(pub, d)
            if pub is not None and bool(c["published_bold"]):
                pub_text = bold(pub_text)
            if c["source"] == "published":
                cells.append(f"{MISSING} ({pub_text})" if pub is not None else MISSING)
            elif ours is None and pub is None:
                cells.append(MISSING)
            else:
                diff = ""
                if not pd.isna(c["difference"]):
                    delta = float(c["difference"])
                    diff = f"; Δ {'+' if delta > 0 else ''}{_fmt(delta, d)}"
                cells.append(f"{ours_text} ({pub_text}{diff})")
        lines.append((str(first["row"]), pair, cells))
    return lines


def legend(table) -> str:
    if not table.rows:  # our own grid (published.OWN_GRIDS): no paper printed these cells
        return (
            f"Cells: ours only (no published numbers: a grid of lmbias's own). {MISSING} = not computed (a "
            "benchmark that does not apply to the method, or not in the run's summaries); a value is never filled in."
        )
    sig = ""
    if table.significance:
        sig = f" Bold ours: p < {table.significance.get('p_below')} (the paper's significance mark)."
    return (
        "Cells: ours (published; Δ = ours − published, only where our model is the paper's model). "
        f"{MISSING} = not computed or not printed; a value is never filled in. Published bold as printed."
        + sig
        + " Rows after the paper's: our pairs with no published row."
    )


def left_out_summary(left_out: list[dict]) -> str:
    """One line per reason: "gpr-a, gpr-u for bert-base, bert-large (needs corpora.ontonotes.path: ...)"."""
    by_reason: dict[str, tuple[list, list]] = {}
    for item in left_out:
        methods, models = by_reason.setdefault(item["reason"], ([], []))
        if item["method"] not in methods:
            methods.append(item["method"])
        if item["model"] not in models:
            models.append(item["model"])
    return "; ".join(
        f"{', '.join(methods)} for {', '.join(models)} ({reason})" for reason, (methods, models) in by_reason.items()
    )


def pair_notes(
    table, pairs: list[dict], left_out: list[dict] | None = None, lm_benchmarks: list[dict] | None = None
) -> list[str]:
    """The lines under a table that say what "ours" is: which recipe produced each method shown (a method
    entry's `recipe`, or the papers' text for one without), which pairs were left out and why, and what our
    language-modelling columns measure."""
    kinds = set(table.method_kinds or ())
    shown = [p for p in pairs if is_settings_table(table) or p["kind"] in kinds]
    lines = []
    described: dict[str, str] = {}
    for pair in shown:
        if pair["method"] in described or pair["kind"] in ("pretrained", "online"):
            continue
        described[pair["method"]] = pair.get("recipe") or "as the papers describe it (lmbias defaults)"
    if described:
        lines.append("Ours: " + "; ".join(f"{m} = {text}" for m, text in described.items()) + ".")
    dropped = [item for item in (left_out or []) if is_settings_table(table) or item["kind"] in kinds]
    if dropped:
        lines.append("Left out: " + left_out_summary(dropped) + ".")
    shown_lm = {c.benchmark for c in lm_columns(table, lm_benchmarks)}
    texts = [f"{b['header']} = {b['text']}" for b in (lm_benchmarks or []) if b["benchmark"] in shown_lm]
    if texts:
        lines.append("Language modelling, ours only (the paper prints no such column): " + "; ".join(texts) + ".")
    return lines


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def to_markdown(table, long: pd.DataFrame, notes: list[str] | None = None) -> str:
    header = ["Row", "Ours"] + _headers(long)
    out = [
        f"### {table.label}: {table.caption}".rstrip(": "),
        "",
        legend(table),
        "",
        *[line for note in (notes or []) for line in (note, "")],
        "| " + " | ".join(_md_escape(h) for h in header) + " |",
        "|" + "---|" * len(header),
    ]
    for label, pair, cells in _cells(table, long, lambda s: f"**{s}**"):
        out.append("| " + " | ".join(_md_escape(x) for x in [label, pair, *cells]) + " |")
    return "\n".join(out) + "\n"


def to_html(table, long: pd.DataFrame, notes: list[str] | None = None) -> str:
    """A self-contained HTML page of the same cells (for the Snakemake report)."""
    rows = []
    for label, pair, cells in _cells(table, long, lambda s: f"\x00{s}\x01"):
        tds = "".join(
            f"<td>{html.escape(x).replace(chr(0), '<b>').replace(chr(1), '</b>')}</td>" for x in [label, pair, *cells]
        )
        rows.append(f"<tr>{tds}</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["Row", "Ours"] + _headers(long))
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(table.label)}</title>'
        "<style>table{border-collapse:collapse;font-family:sans-serif;font-size:13px}"
        "td,th{border:1px solid #bbb;padding:3px 6px;text-align:right}"
        "td:first-child,td:nth-child(2){text-align:left}</style>"
        f"</head><body><h3>{html.escape(table.label)}</h3><p>{html.escape(table.caption)}</p>"
        f"<p><i>{html.escape(legend(table))}</i></p>"
        + "".join(f"<p>{html.escape(note)}</p>" for note in (notes or []))
        + f"<table><thead><tr>{head}</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></body></html>\n"
    )


def write_table(
    table,
    summaries: pd.DataFrame,
    pairs: list[dict],
    parquet: str | Path,
    markdown: str | Path,
    html_path: str | Path | None = None,
    paper=None,
    left_out: list[dict] | None = None,
    lm_benchmarks: list[dict] | None = None,
    readings=None,
) -> pd.DataFrame:
    """Build one table and write its parquet, markdown (and HTML) atomically. The notes (the transcription's
    `note`, then `reading_notes`: the entry each column reads where the paper selects a reading, then
    `pair_notes`: the recipe behind each method shown, the pairs left out and why, our language-modelling
    columns) go under the legend and into the parquet's metadata (`lmbias.notes`, `lmbias.left_out`,
    `lmbias.readings`, JSON)."""
    long = build_table(table, summaries, pairs, paper, lm_benchmarks, readings)
    # the transcription's own note first (e.g. Meade et al.'s numbers are quotations, not read from the paper)
    notes = (
        ([f"Published numbers: {table.note}"] if table.note else [])
        + reading_notes(table, readings)
        + pair_notes(table, pairs, left_out, lm_benchmarks)
    )
    arrow = pa.Table.from_pandas(long.replace({np.nan: None}), schema=TABLE_SCHEMA, preserve_index=False)
    write_text_atomic(markdown, to_markdown(table, long, notes))
    if html_path is not None:
        write_text_atomic(html_path, to_html(table, long, notes))
    write_table_atomic(
        arrow,
        parquet,
        TABLE_SCHEMA,
        metadata={
            "lmbias.notes": json.dumps(notes),
            "lmbias.left_out": json.dumps(left_out or []),
            "lmbias.readings": json.dumps(reading_entries(readings)),
        },
    )
    return long
