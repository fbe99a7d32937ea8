"""`results/summary.html`: the main job's results page, the headline numbers (`lmbias.metrics.headline`) as
figures, a table and their provenance, in one self-contained file.

The page holds, in order: one figure per headline (a benchmark's headline metric), one panel per model, a dot
per method (pretrained, the "before", in black) with its interval where the summary has one, a dotted line at
pretrained's value and a dashed line at what an unbiased model scores, so a glance says whether mitigation
moved the model toward unbiased; the headline table of `results/summary.md`; the paired pre/post tests; and
at the foot the provenance the summaries carry (`lmbias.metrics.summary.PROVENANCE_COLUMNS`): each model's id,
revision and hub commit, the lmbias version, the config hash and each benchmark's data sha256.

Why matplotlib rendered to inline SVG rather than SVG drawn by hand: the axes (nice ticks on any scale,
from 1e-4 gaps to perplexities in the hundreds), text layout and clipping come from the library the
paper figures (`lmbias.papers.figures`) already use, and the SVG is plain vector markup a browser shows
without JavaScript, external files or fonts (glyphs are written as paths). The output is deterministic: a
fixed `svg.hashsalt`, no date in the metadata (the metadata element is dropped), and each figure's ids are
prefixed so several SVGs share one page without clashing ids; the same summaries give the same bytes.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from lmbias.io import write_text_atomic
from lmbias.metrics.headline import (
    PAIRED_HEADER,
    HeadlineRow,
    Headlines,
    HeadlineValue,
    headline_markdown,
    headline_rows,
    headline_table,
    paired_lines,
    read_summaries,
)

BEFORE_METHOD = "pretrained"
#: rc settings every figure is drawn and saved under: svg.hashsalt fixes the SVG ids, glyphs become paths (the
#: page does not depend on the reader's fonts).
STYLE = {
    "svg.hashsalt": "lmbias-summary",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.spines.left": False,
    "axes.grid": True,
    "axes.grid.axis": "x",
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "path.simplify": True,
}
#: The paper figures' colours for the project's methods (lmbias.papers.figures.METHOD_COLOURS, Okabe & Ito),
#: so a method looks the same on this page and in the report; other names take EXTRA_COLOURS in turn.
METHOD_COLOURS = {
    "pretrained": "#000000",
    "cds": "#0072B2",
    "cda": "#E69F00",
    "er": "#009E73",
    "sd": "#CC79A7",
    "gpr-u": "#56B4E9",
    "gpr-a": "#D55E00",
    "online": "#7F7F7F",
}
EXTRA_COLOURS = ("#882255", "#44AA99", "#999933", "#AA4499", "#332288", "#117733", "#DDCC77", "#88CCEE")
UNBIASED_COLOUR = "#009E73"
RULE_COLOUR = "#d9dce1"
MUTED = "#555555"
#: Figure geometry in inches: width; height per method row, per model panel and for the axis below.
FIGURE_WIDTH, ROW_HEIGHT, PANEL_HEIGHT, AXIS_HEIGHT = 5.6, 0.25, 0.36, 0.4
#: Provenance shown at the foot of the page: (column of summary.parquet, heading).
MODEL_PROVENANCE = (
    ("model_id", "model id"),
    ("model_revision", "revision"),
    ("model_commit", "hub commit"),
    ("lmbias_version", "lmbias version"),
    ("config_hash", "config hash"),
)
NOT_RECORDED = "not recorded"
#: What an empty (recorded, "") value of a provenance column means (lmbias.metrics.summary.provenance).
EMPTY_MEANS = {
    "model_commit": "none (a local folder)",
    "data_sha256": "generated (no data files; pinned by the lmbias version)",
}


# ------------------------------------------------------------------------------------------ figures


def method_colours(methods: Sequence[str]) -> dict[str, str]:
    """A colour per method: the fixed one of a known method, else the next unused extra colour."""
    extra = iter(EXTRA_COLOURS * (1 + len(methods) // len(EXTRA_COLOURS)))
    return {m: METHOD_COLOURS.get(m) or next(extra) for m in methods}


def _by_model(keys: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """{model: methods} in the order the models first appear, pretrained first within a model."""
    out: dict[str, list[str]] = {}
    for model, method in keys:
        out.setdefault(model, []).append(method)
    return {model: sorted(methods, key=lambda m: m != BEFORE_METHOD) for model, methods in out.items()}


def _finite(*numbers: float) -> list[float]:
    return [x for x in numbers if x is not None and math.isfinite(x)]


def _x_limits(values: Sequence[HeadlineValue], unbiased: float | None) -> tuple[float, float]:
    """Limits holding every value, interval end and the unbiased value, with a margin."""
    xs = _finite(
        *(x for v in values for x in (v.value, v.ci_low, v.ci_high)), *([unbiased] if unbiased is not None else [])
    )
    if not xs:
        return 0.0, 1.0
    low, high = min(xs), max(xs)
    pad = (high - low) * 0.08 or abs(high) * 0.1 or 1.0  # one point: 10 % of it (of 1 at zero) either side
    return low - pad, high + pad


def headline_figure(row: HeadlineRow) -> Figure:
    """The figure of one headline: a panel per model (its name above its rows), a row per method (pretrained
    on top), one x axis for all.

    Artists carry labels the tests read back: `value:<method>` (the dot), `interval:<method>` (its interval
    bar), `pretrained` (the dotted line at pretrained's value) and `unbiased` (the dashed reference line)."""
    with matplotlib.rc_context(STYLE):
        by_model = _by_model(list(row.values))
        colours = method_colours(list(dict.fromkeys(m for _, m in row.values)))
        unbiased = row.headline.unbiased_value
        found = [v for v in row.values.values() if v is not None and math.isfinite(v.value)]
        x_limits = _x_limits(found, unbiased)
        heights = [PANEL_HEIGHT + ROW_HEIGHT * len(methods) for methods in by_model.values()]
        fig = Figure(figsize=(FIGURE_WIDTH, sum(heights) + AXIS_HEIGHT))
        FigureCanvasAgg(fig)
        grid = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.0)
        axes = [fig.add_subplot(grid[i, 0]) for i in range(len(heights))]
        for i, (ax, (model, methods)) in enumerate(zip(axes, by_model.items())):
            _model_panel(ax, model, methods, row, colours, unbiased)
            ax.set_xlim(*x_limits)
            if i < len(axes) - 1:
                ax.tick_params(axis="x", labelbottom=False, length=0)
                ax.spines["bottom"].set_visible(False)
            if i > 0:  # a rule between two models' panels
                ax.spines["top"].set_visible(True)
                ax.spines["top"].set_color(RULE_COLOUR)
        fig.subplots_adjust(
            left=0.22, right=0.97, top=1 - 0.04 / sum(heights), bottom=AXIS_HEIGHT / fig.get_figheight()
        )
        return fig


def _model_panel(
    ax, model: str, methods: list[str], row: HeadlineRow, colours: dict[str, str], unbiased: float | None
) -> None:
    """One model's rows: method i at y = -i, the model's name in the left margin above them."""
    ys = {method: -i for i, method in enumerate(methods)}
    top = PANEL_HEIGHT / ROW_HEIGHT - 0.5  # the panel's head room (in rows) holds the model's name
    ax.set_ylim(-len(methods) + 0.5, top)
    ax.set_yticks(list(ys.values()), methods)
    ax.tick_params(axis="y", length=0)
    ax.text(
        0.015,
        top - 0.15,
        model,
        transform=blended_transform_factory(ax.figure.transFigure, ax.transData),
        ha="left",
        va="top",
        fontsize=9,
        fontweight="bold",
    )
    if unbiased is not None:
        ax.axvline(unbiased, color=UNBIASED_COLOUR, linestyle=(0, (5, 3)), linewidth=1.2, label="unbiased", zorder=1)
    before = row.values.get((model, BEFORE_METHOD))
    if before is not None and math.isfinite(before.value) and len(methods) > 1:
        ax.axvline(before.value, color=MUTED, linestyle=":", linewidth=0.9, label=BEFORE_METHOD, zorder=1)
    for method, y in ys.items():
        value = row.values.get((model, method))
        colour = colours[method]
        if value is None or not math.isfinite(value.value):
            ax.text(
                0.01,
                y,
                "no value",
                transform=ax.get_yaxis_transform(),
                va="center",
                ha="left",
                fontsize=7.5,
                color=MUTED,
                fontstyle="italic",
            )
            continue
        if value.has_interval:
            ax.hlines(y, value.ci_low, value.ci_high, color=colour, linewidth=1.6, label=f"interval:{method}", zorder=2)
            ax.plot(
                [value.ci_low, value.ci_high],
                [y, y],
                linestyle="none",
                marker="|",
                markersize=7,
                color=colour,
                zorder=2,
            )
        ax.plot(
            [value.value],
            [y],
            linestyle="none",
            marker="o",
            markersize=5.5,
            color=colour,
            markeredgecolor="white",
            markeredgewidth=0.6,
            label=f"value:{method}",
            zorder=3,
        )


_ID_USE = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def figure_svg(fig: Figure, id_prefix: str, title: str) -> str:
    """The figure as an `<svg>` element to inline in HTML: no XML prolog, comments or metadata, every id
    prefixed with `id_prefix` (unique per figure on a page), `role="img"` with `title` as its accessible name."""
    buffer = io.StringIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<!--.*?-->\s*", "", svg, flags=re.S)
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    svg = _ID_USE.sub(lambda m: m.group(1) + (id_prefix + m.group(2) if m.group(2) in ids else m.group(2)), svg)
    label = html.escape(title, quote=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1).strip() + "\n"


def figure_caption(row: HeadlineRow) -> str:
    """What the figure shows beyond its dots: the unbiased value and where intervals are missing (HTML)."""
    notes = [f"benchmark <code>{html.escape(row.benchmark)}</code>"]
    unbiased = row.headline.unbiased_value
    notes.append(
        f"unbiased: {html.escape(row.headline.unbiased)}"
        if unbiased is not None
        else "no unbiased value (not a bias measure)"
    )
    values = [v for v in row.values.values() if v is not None]
    if any(v.tests is not None for v in values):
        notes.append("mean over the tests, no interval")
    elif values and not any(v.has_interval for v in values):
        notes.append(
            "no interval (see the table for p-values)"
            if any(not math.isnan(v.p_value) for v in values)
            else "no interval"
        )
    return " · ".join(notes)


# ------------------------------------------------------------------------------------------ the page


CSS = """
:root{--ink:#1d1d1f;--muted:#5f6368;--rule:#d9dce1;--band:#f5f6f8;--accent:#0072B2}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:28px 24px 40px}
h1{font-size:26px;margin:0 0 6px}
h2{font-size:19px;margin:34px 0 10px;padding-bottom:4px;border-bottom:2px solid var(--rule)}
p{margin:6px 0;max-width:78ch}
.lead{color:var(--muted)}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.key{display:flex;flex-wrap:wrap;gap:6px 22px;color:var(--muted);font-size:13.5px;margin:8px 0 14px}
.key span{white-space:nowrap}
.swatch{display:inline-block;width:22px;height:0;vertical-align:middle;margin-right:6px;border-top:2px solid}
.swatch.bar{border-color:#0072B2;border-top-width:2px;border-left:2px solid #0072B2;border-right:2px solid #0072B2;
height:7px;border-bottom:0;transform:translateY(3px)}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;background:#000;margin-right:6px}
.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:18px}
figure{margin:0;padding:12px 12px 6px;border:1px solid var(--rule);border-radius:8px;background:#fff}
figcaption{margin-bottom:6px}
figcaption strong{display:block;font-size:15px}
figcaption span{color:var(--muted);font-size:13px}
figure svg{display:block;width:100%;height:auto}
.table{overflow-x:auto;margin:8px 0}
table{border-collapse:collapse;font-size:13.5px}
th,td{padding:5px 10px;border-bottom:1px solid var(--rule);text-align:left;vertical-align:top}
thead th{background:var(--band);border-bottom:2px solid #c3c7cf;white-space:nowrap}
tbody tr:nth-child(even){background:#fafbfc}
tbody tr:hover{background:#eef4fa}
.headline td:nth-child(2){min-width:15em}
.headline td:nth-child(n+3){font-variant-numeric:tabular-nums;white-space:nowrap}
.headline small{display:block;color:var(--muted);font-size:12px}
.provenance td:nth-child(-n+2){white-space:nowrap}
footer{margin-top:40px;color:var(--muted);font-size:13px}
footer h2{color:var(--ink)}
"""

KEY = (
    '<div class="key"><span><span class="dot"></span>mean over seeds (pretrained, the &ldquo;before&rdquo;, '
    'in black)</span><span><span class="swatch bar"></span>its 95 % interval, where the metric has one</span>'
    f'<span><span class="swatch" style="border-color:{UNBIASED_COLOUR};border-top-style:dashed"></span>'
    f'what an unbiased model scores</span><span><span class="swatch" style="border-color:{MUTED};'
    'border-top-style:dotted"></span>pretrained&rsquo;s value</span></div>'
)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], css_class: str) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class="table {css_class}"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _escaped(rows: Sequence[Sequence[str]]) -> list[list[str]]:
    return [[html.escape(str(c)) for c in r] for r in rows]


def _headline_cells(rows: Sequence[Sequence[str]]) -> list[list[str]]:
    """The headline table's rows as HTML cells: a value cell `51.57 [49.65, 53.48]` shows the value with its
    interval (or p-value, or test count) on a line below it."""
    out = []
    for benchmark, label, unbiased, *cells in rows:
        shown = []
        for cell in cells:
            value, _, detail = str(cell).partition(" ")
            shown.append(html.escape(value) + (f"<small>{html.escape(detail)}</small>" if detail else ""))
        out.append([*_escaped([[benchmark, label, unbiased]])[0], *shown])
    return out


def _distinct(frame: pd.DataFrame, column: str) -> str:
    """The distinct recorded values of a provenance column, sorted and comma-joined; only "" recorded: what
    that means (EMPTY_MEANS); nothing recorded (a summary written before the column existed): NOT_RECORDED."""
    recorded = {str(v) for v in frame[column] if v is not None and not pd.isna(v)} if column in frame else set()
    values = sorted(recorded - {""})
    if values:
        return ", ".join(values)
    return EMPTY_MEANS.get(column, NOT_RECORDED) if recorded else NOT_RECORDED


def _code(text: str) -> str:
    return text if text == NOT_RECORDED or text in EMPTY_MEANS.values() else f"<code>{html.escape(text)}</code>"


def provenance_tables(summaries: dict[tuple[str, str], pd.DataFrame]) -> str:
    """The page's foot: per (model, method) the model id, revision, hub commit, lmbias version and config
    hash; per benchmark its data sha256 (a generated benchmark has none: the lmbias version pins it)."""
    model_rows = [
        [html.escape(model), html.escape(method), *(_code(_distinct(frame, column)) for column, _ in MODEL_PROVENANCE)]
        for (model, method), frame in summaries.items()
    ]
    out = [_table(["model", "method", *(heading for _, heading in MODEL_PROVENANCE)], model_rows, "provenance")]
    benchmarks = sorted({b for frame in summaries.values() for b in frame["benchmark"].unique()})
    data_rows = []
    for benchmark in benchmarks:
        rows = pd.concat([frame[frame["benchmark"] == benchmark] for frame in summaries.values()])
        data_rows.append([f"<code>{html.escape(str(benchmark))}</code>", _code(_distinct(rows, "data_sha256"))])
    out.append(_table(["benchmark", "data sha256"], data_rows, "provenance"))
    return "".join(out)


def summary_html(
    summaries: dict[tuple[str, str], pd.DataFrame], headlines: Headlines, paired: Sequence[Sequence[str]] = ()
) -> str:
    """The self-contained results page: figures, the headline table, the paired tests and the provenance."""
    rows = headline_rows(summaries, headlines)
    figures = []
    for i, row in enumerate(rows):
        fig = headline_figure(row)
        svg = figure_svg(fig, f"f{i}-", f"{row.label}: every model and method")
        figures.append(
            f"<figure><figcaption><strong>{html.escape(row.label)}</strong>"
            f"<span>{figure_caption(row)}</span></figcaption>{svg}</figure>"
        )
    header = ["benchmark", "headline", "unbiased", *[f"{m} / {k}" for m, k in summaries]]
    parts = [
        "<h1>lmbias: before and after mitigation</h1>",
        '<p class="lead">Mean over seeds; [95 % interval] where the metric has one, (p) where it has a test '
        "instead. <em>unbiased</em> is what a model without gender bias scores. Every row of every benchmark "
        "is in <code>results/&lt;model&gt;/&lt;method&gt;/summary.parquet</code>.</p>",
        "<h2>Headline figures</h2>",
        "<p>One figure per benchmark headline, one panel per model, one row per method. The closer a dot to "
        "the dashed line, the less biased the model by that measure.</p>",
        KEY,
        f'<div class="figures">{"".join(figures)}</div>' if figures else "<p>No headline in these summaries.</p>",
        "<h2>Headline table</h2>",
        _table(header, _headline_cells(headline_table(summaries, headlines)), "headline"),
    ]
    if paired:
        parts += [
            "<h2>Paired pre/post tests</h2>",
            "<p>Item by item; mean association change after &minus; before, all professions.</p>",
            _table(PAIRED_HEADER, _escaped(paired), "paired"),
        ]
    parts += [
        "<footer><h2>Provenance</h2>",
        "<p>What computed these numbers, as the summaries record it.</p>",
        provenance_tables(summaries),
        "</footer>",
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>lmbias: before and after mitigation</title><style>{CSS.strip()}</style></head>\n"
        "<body><main>\n" + "\n".join(parts) + "\n</main></body></html>\n"
    )


def write_summary_pages(summary_paths, headlines: Headlines, paired_paths, markdown_path, html_path) -> str:
    """Write results/summary.md and results/summary.html atomically; returns the markdown."""
    summaries = read_summaries(summary_paths)
    paired = paired_lines(paired_paths)
    text = headline_markdown(summaries, headlines, paired)
    write_text_atomic(markdown_path, text)
    write_text_atomic(html_path, summary_html(summaries, headlines, paired))
    return text
