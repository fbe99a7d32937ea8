"""A paper's published table rebuilt from our run: published and our numbers side by side.

Inputs: a `PublishedTable` (resources/published/{paper}.yaml), our summary rows (the concatenated
summary.parquet frames of the paper's configured (model, method) pairs; only seed == "mean" is read) and
one `pair` dict per (model, method): {model, method, kind, hub_id, settings}. `settings` is the pair's
resolved training settings (see `pair_settings`); it matters for rows that name settings (a sweep value)
and for settings tables (Table 12), whose columns are hyper-parameters rather than benchmark selectors.

Rows: the published rows in paper order (each joined with our pair of the "same model" — our hub_id equals
the row's model, our kind its method, and method_name / settings match where given), then our pairs that
match no published row. `difference` = ours - published only for the same model; a value we do not have,
or the paper does not print, stays missing (never invented).

Language modelling: debiasing that breaks the model is not debiasing, so every table that shows methods
also shows our perplexity (`lm_benchmarks`: one column per configured perplexity benchmark of the run, e.g.
WikiText-2 or the GAP stand-in), after the paper's columns and marked as ours only, unless the paper already
prints that benchmark (Meade et al.'s WikiText-2 perplexity is a published column with a selector).

Readings: a paper's grid may read a column's benchmark through another entry, the authors' computation of the
same data (`readings`: {benchmark: entry}, config.yaml `papers.<paper>.readings`, lmbias.papers.grid): the
entry's rows stand in for the benchmark's (`apply_readings`) and the notes say which entry each column reads.

The table as text (cells, legend, notes, Markdown, HTML) and writing its files: lmbias.papers.table_render.
"""

from __future__ import annotations

import math
import re

import pandas as pd
import pyarrow as pa

from lmbias.benchmarks import catalog
from lmbias.methods.kinds import TRAINED_METHOD_KINDS
from lmbias.methods.sweeps import base_method
from lmbias.papers.published import PublishedColumn

MISSING = "–"
AGGREGATE_SEED = "mean"

TABLE_SCHEMA = pa.schema(
    [
        ("table", pa.string()),
        ("row_order", pa.int64()),
        ("row", pa.string()),
        ("model", pa.string()),  # our model name (null: published row without our run)
        ("method", pa.string()),  # our method name
        ("published_model", pa.string()),  # the row's hub id as transcribed
        ("published_method", pa.string()),  # the row's method kind as transcribed
        ("column", pa.string()),
        ("header", pa.string()),
        ("published", pa.float64()),
        ("published_bold", pa.bool_()),
        ("ours", pa.float64()),
        ("ours_std", pa.float64()),  # over seeds, scaled like ours (null when the summary has no `std`)
        ("n_seeds", pa.int64()),
        ("difference", pa.float64()),  # ours - published, same model only
        ("p_value", pa.float64()),
        ("significant", pa.bool_()),  # p_value below the table's significance threshold (null: no test)
        ("n", pa.int64()),
        ("source", pa.string()),  # published | ours | both (ours: also our pairs' cells of a column the
        # paper does not print, i.e. our language-modelling columns)
    ]
)

#: The metric our language-modelling columns read (lmbias.metrics.perplexity rows, subset "all").
LM_METRIC = "perplexity"
LM_SUBSET = "all"

#: Hyper-parameter columns of a settings table (Table 12): normalised id or header -> our setting key.
SETTING_ALIASES = {
    "swaprate": "swap_rate",
    "lambda": "er_lambda",
    "λ": "er_lambda",
    "erlambda": "er_lambda",
    "ratioofpairs": "ratio_of_pairs",
    "batchsize": "batch_size",
    "learningrate": "learning_rate",
    "lr": "learning_rate",
    "epoch": "epochs",
    "epochs": "epochs",
}
#: Which method kind a setting is read from, when one model has several methods (the trainer settings
#: come from the first trained method of the paper's grid).
SETTING_KIND = {"swap_rate": "cds", "er_lambda": "er", "ratio_of_pairs": "sd"}


def _norm(text: str) -> str:
    return re.sub(r"[^0-9a-zλ]", "", str(text).lower())


def setting_key(column) -> str | None:
    """Our setting key for a hyper-parameter column (no benchmark selector), or None."""
    if column.benchmark is not None:
        return None
    return SETTING_ALIASES.get(_norm(column.id)) or SETTING_ALIASES.get(_norm(column.header))


def is_parameter_table(table) -> bool:
    """A transposed hyper-parameter table (the transcription of Table 12): one row per setting (its
    `settings.parameter` names our key), one column per model (selectors null)."""
    return (
        bool(table.rows)
        and all(c.benchmark is None for c in table.columns)
        and all((r.settings or {}).get("parameter") for r in table.rows)
    )


def label_models(paper) -> dict[str, str]:
    """Normalised printed model name -> hub id, from the rows of a paper's tables that name their model
    (a parameter table's columns print only the name)."""
    out: dict[str, str] = {}
    for t in paper.tables.values() if paper is not None else ():
        for r in t.rows:
            if r.model:
                out.setdefault(_norm(r.label), r.model)
    return out


def _build_parameter_table(table, pairs: list[dict], models_by_label: dict[str, str]) -> pd.DataFrame:
    ours = model_settings(pairs)
    hub_of = {c.id: models_by_label.get(_norm(c.header)) or models_by_label.get(_norm(c.id)) for c in table.columns}
    columns = []  # (column id, header, our settings entry or None)
    matched = set()
    for c in table.columns:
        entry = next(
            (e for e in ours if hub_of[c.id] and e["hub_id"] == hub_of[c.id] and e["model"] not in matched), None
        )
        if entry is not None:
            matched.add(entry["model"])
        columns.append((c.id, c.header, entry, True))
    columns += [(e["model"], e["model"], e, False) for e in ours if e["model"] not in matched]
    records = []
    for order, row in enumerate(table.rows):
        key = row.settings["parameter"]
        for cid, header, entry, printed in columns:
            published = row.values.get(cid) if printed else None
            value = _num((entry or {}).get("settings", {}).get(key)) if entry else None
            records.append(
                {
                    "table": table.id,
                    "row_order": order,
                    "row": row.label,
                    "model": entry["model"] if entry else None,
                    "method": None,
                    "published_model": hub_of.get(cid),
                    "published_method": row.method,
                    "column": cid,
                    "header": header,
                    "published": published,
                    "published_bold": cid in row.bold,
                    "ours": value,
                    "ours_std": None,
                    "n_seeds": None,
                    "difference": (value - published) if (value is not None and published is not None) else None,
                    "p_value": None,
                    "significant": None,
                    "n": None,
                    "source": "both" if (printed and entry) else ("published" if printed else "ours"),
                }
            )
    return pd.DataFrame.from_records(records, columns=TABLE_SCHEMA.names)


def is_settings_table(table) -> bool:
    """A table of hyper-parameters (Table 12): no column selects a benchmark and some name a setting."""
    if is_parameter_table(table):
        return True
    return (
        bool(table.columns)
        and all(c.benchmark is None for c in table.columns)
        and any(setting_key(c) for c in table.columns)
    )


def pair_settings(model_entry: dict, method_entry: dict, resolved: dict) -> dict:
    """Flat settings of one resolved (model, method) pair: trainer settings, SentenceDebias options and the
    CDS swap rate (the model's `training` defaults merged under the method's)."""
    merged = {**(model_entry.get("training") or {}), **(method_entry.get("training") or {})}
    out = dict(resolved.get("settings") or {})
    out.update(resolved.get("sd_settings") or {})
    if resolved["kind"] == "cds" and merged.get("swap_rate") is not None:
        out["swap_rate"] = float(merged["swap_rate"])
    return out


def model_settings(pairs: list[dict]) -> list[dict]:
    """One settings pair per model for a settings table: swap_rate from its cds method, er_lambda from er,
    ratio_of_pairs from sd, the other trainer settings from its first trained method (grid order)."""
    by_model: dict[str, dict] = {}
    for pair in pairs:
        entry = by_model.setdefault(
            pair["model"],
            {"model": pair["model"], "method": "settings", "kind": None, "hub_id": pair.get("hub_id"), "settings": {}},
        )
        for key, value in (pair.get("settings") or {}).items():
            wanted = SETTING_KIND.get(key)
            if wanted is not None and pair["kind"] != wanted:
                continue
            if wanted is None and pair["kind"] not in TRAINED_METHOD_KINDS:
                continue
            if key not in entry["settings"]:
                entry["settings"][key] = value
    return list(by_model.values())


def lm_benchmark_columns(benchmarks: dict, names) -> list[dict]:
    """{benchmark, header, text} of the perplexity benchmarks among `names` (config.yaml `benchmarks` entries
    with `measure: perplexity`), WikiText-2 first: what a table's language-modelling columns read."""
    out = []
    for name in names:
        entry = benchmarks.get(name) or {}
        if catalog.measure_of(entry, name) != LM_METRIC:
            continue
        wikitext = entry.get("dataset") == "wikitext2"
        if wikitext:
            where = f"WikiText-2 {entry.get('split', 'test')}"
        else:
            splits = entry.get("splits")
            where = f"{entry.get('dataset')} {'+'.join(splits) if splits else 'all'} stand-in"
        out.append(
            (
                not wikitext,
                name,
                {
                    "benchmark": name,
                    "header": f"PPL (ours, {where})",
                    "text": f"benchmarks.{name}: perplexity (causal) or pseudo-perplexity (masked, seq2seq) on {where}"
                    + (
                        ""
                        if wikitext
                        else ", not WikiText-2; for fine-tuned methods the GAP corpora contain these "
                        "texts, so theirs is an optimistic bound"
                    ),
                },
            )
        )
    return [column for _, _, column in sorted(out, key=lambda item: item[:2])]


def shows_methods(table) -> bool:
    """A results table with method rows (not a hyper-parameter table, not a table of other systems)."""
    return bool(table.method_kinds) and not is_settings_table(table) and not is_parameter_table(table)


def lm_columns(table, lm_benchmarks: list[dict] | None) -> list:
    """Our language-modelling columns for `table`: one per perplexity benchmark the paper does not print."""
    if not lm_benchmarks or not shows_methods(table):
        return []
    printed = {(c.benchmark, c.metric) for c in table.columns}
    return [
        PublishedColumn(
            id=f"ours_{b['benchmark']}",
            header=b["header"],
            benchmark=b["benchmark"],
            metric=LM_METRIC,
            variant=None,
            subset=LM_SUBSET,
        )
        for b in lm_benchmarks
        if (b["benchmark"], LM_METRIC) not in printed
    ]


def _same(value, wanted) -> bool:
    try:
        return math.isclose(float(value), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return value == wanted


def _matches(row, pair, settings_table: bool) -> bool:
    if not row.model or not pair.get("hub_id") or row.model != pair["hub_id"]:
        return False
    if settings_table:
        return True
    if row.method != pair["kind"]:
        return False
    if row.method_name and row.method_name not in (pair["method"], base_method(pair["method"])):
        return False
    if row.settings:
        have = pair.get("settings") or {}
        return all(k in have and _same(have[k], v) for k, v in row.settings.items())
    return True


def _best(row, candidates: list[dict]) -> dict:
    """The candidate our run would call this row: the method named exactly as the row, else one that is
    not a sweep instance, else the first."""
    for pair in candidates:
        if pair["method"] in (row.method_name, row.method):
            return pair
    for pair in candidates:
        if "@" not in pair["method"] or row.settings:
            return pair
    return candidates[0]


def _select(frame: pd.DataFrame, column) -> pd.Series | None:
    """Our summary row for a column selector (frame: one pair's seed == "mean" rows, in file order)."""
    if column.benchmark is None:
        return None
    sel = frame[(frame["benchmark"] == column.benchmark) & (frame["metric"] == column.metric)]
    if column.subset is not None:
        sel = sel[sel["subset"] == column.subset]
    if column.variant is not None:
        sel = sel[sel["variant"] == column.variant]
    elif len(sel):  # the metric's default variant: metric code writes it first
        sel = sel[sel["variant"] == sel["variant"].iloc[0]]
    return sel.iloc[0] if len(sel) else None


def _num(value):
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _ours_cells(columns, pair: dict, frame: pd.DataFrame, settings_table: bool) -> dict:
    cells = {}
    for column in columns:
        cell = {"ours": None, "ours_std": None, "n_seeds": None, "p_value": None, "n": None}
        if settings_table:
            key = setting_key(column)
            if key is not None:
                cell["ours"] = _num((pair.get("settings") or {}).get(key))
        else:
            hit = _select(frame, column)
            if hit is not None:
                scale = column.scale if column.scale is not None else 1.0
                value = _num(hit["value"])
                cell["ours"] = None if value is None else value * scale
                std = _num(hit.get("std")) if "std" in hit.index else None
                cell["ours_std"] = None if std is None else std * abs(scale)
                if "n_seeds" in hit.index and _num(hit["n_seeds"]) is not None:
                    cell["n_seeds"] = int(hit["n_seeds"])
                cell["p_value"] = _num(hit.get("p_value"))
                n = _num(hit.get("n"))
                cell["n"] = None if n is None else int(n)
        cells[column.id] = cell
    return cells


def reading_entries(readings) -> dict[str, str]:
    """{benchmark: entry} of a readings mapping whose values are entry names or {entry, reading} dicts."""
    return {bench: (value["entry"] if isinstance(value, dict) else value) for bench, value in (readings or {}).items()}


def apply_readings(summaries: pd.DataFrame, readings) -> pd.DataFrame:
    """The summary rows as a paper reads them: for each {benchmark: entry} (or {benchmark: {entry, reading}}),
    the entry's rows under the benchmark's name, the benchmark's own rows dropped. A pair whose summary has
    no rows of the entry shows nothing for that benchmark (a missing cell), never the default reading."""
    entries = reading_entries(readings)
    if not entries or summaries is None or len(summaries) == 0 or "benchmark" not in summaries.columns:
        return summaries
    kept = summaries[~summaries["benchmark"].isin(list(entries))]
    parts = [kept]
    for bench, entry in entries.items():
        rows = summaries[summaries["benchmark"] == entry]
        if len(rows):
            parts.append(rows.assign(benchmark=bench))
    out = pd.concat(parts, ignore_index=True)
    out.attrs = dict(summaries.attrs)
    return out


def reading_notes(table, readings) -> list[str]:
    """The line under a table that says which entry each of its columns reads where the paper's grid selects a
    reading (`papers.<paper>.readings`), with that entry's `reading` text."""
    texts = []
    for bench, value in (readings or {}).items():
        entry = value["entry"] if isinstance(value, dict) else value
        text = value.get("reading") if isinstance(value, dict) else None
        headers = [c.header for c in table.columns if c.benchmark == bench]
        if not headers:
            continue
        texts.append(
            f"{', '.join(headers)} read benchmarks.{entry} instead of {bench}" + (f" ({entry}: {text})" if text else "")
        )
    return ["Readings (this paper's `readings` in config.yaml): " + "; ".join(texts) + "."] if texts else []


def build_table(
    table,
    summaries: pd.DataFrame,
    pairs: list[dict],
    paper=None,
    lm_benchmarks: list[dict] | None = None,
    readings=None,
) -> pd.DataFrame:
    """The long table (TABLE_SCHEMA columns) of one published table for our pairs.

    `pairs` lists our (model, method) pairs in grid order; only those whose kind is in the table's
    `method_kinds` are shown (every pair for a settings table, one line per model). `paper` (the whole
    PublishedPaper) maps a parameter table's printed model names to hub ids through its other tables.
    `lm_benchmarks` (`lm_benchmark_columns`) adds our perplexity columns to a table that shows methods.
    `readings` ({benchmark: entry or {entry, reading}}): the columns of those benchmarks read the entries."""
    if is_parameter_table(table):
        return _build_parameter_table(table, pairs, label_models(paper))
    settings_table = is_settings_table(table)
    kinds = set(table.method_kinds or ())
    if settings_table:  # every pair of the paper: the settings come from its methods of each kind
        ours_pairs = model_settings(pairs)
    else:
        ours_pairs = [p for p in pairs if p["kind"] in kinds]
    if summaries is None or len(summaries) == 0:
        summaries = pd.DataFrame(
            columns=["model", "method", "seed", "benchmark", "metric", "variant", "subset", "value", "p_value", "n"]
        )
    summaries = apply_readings(summaries, readings)
    mean = summaries[summaries["seed"].astype(str) == AGGREGATE_SEED]
    frames = {(m, k): g for (m, k), g in mean.groupby(["model", "method"], sort=False)}
    empty = mean.iloc[0:0]
    threshold = (table.significance or {}).get("p_below") if table.significance else None
    extra = lm_columns(table, lm_benchmarks)
    columns = list(table.columns) + extra
    ours_only = {c.id for c in extra}

    lines = []  # (label, pair or None, published row or None)
    used = set()
    for row in table.rows:
        candidates = [
            p for p in ours_pairs if (p["model"], p["method"]) not in used and _matches(row, p, settings_table)
        ]
        pair = _best(row, candidates) if candidates else None
        if pair is not None:
            used.add((pair["model"], pair["method"]))
        lines.append((row.label, pair, row))
    for pair in ours_pairs:
        if (pair["model"], pair["method"]) not in used:
            label = pair["model"] if settings_table else f"{pair['model']} / {pair['method']}"
            lines.append((label, pair, None))

    records = []
    for order, (label, pair, row) in enumerate(lines):
        cells = (
            _ours_cells(columns, pair, frames.get((pair["model"], pair["method"]), empty), settings_table)
            if pair
            else {}
        )
        for column in columns:
            cell = cells.get(column.id, {})
            published = row.values.get(column.id) if row is not None else None
            if column.id in ours_only and pair is not None:  # a column the paper does not print
                source = "ours"
            else:
                source = (
                    "both" if (row is not None and pair is not None) else ("published" if row is not None else "ours")
                )
            ours = cell.get("ours")
            p_value = cell.get("p_value")
            significant = None
            if threshold is not None and ours is not None and p_value is not None:
                significant = bool(p_value < float(threshold))
            records.append(
                {
                    "table": table.id,
                    "row_order": order,
                    "row": label,
                    "model": pair["model"] if pair else None,
                    "method": (None if settings_table else pair["method"]) if pair else None,
                    "published_model": row.model if row is not None else None,
                    "published_method": row.method if row is not None else None,
                    "column": column.id,
                    "header": column.header,
                    "published": published,
                    "published_bold": bool(row is not None and column.id in row.bold),
                    "ours": ours,
                    "ours_std": cell.get("ours_std"),
                    "n_seeds": cell.get("n_seeds"),
                    "difference": (ours - published)
                    if (row is not None and pair is not None and ours is not None and published is not None)
                    else None,
                    "p_value": p_value,
                    "significant": significant,
                    "n": cell.get("n"),
                    "source": source,
                }
            )
    return pd.DataFrame.from_records(records, columns=TABLE_SCHEMA.names)


def read_summaries(paths) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
