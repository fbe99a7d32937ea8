"""How every paper figure looks and is written: the rc style (deterministic SVG output), the colour-blind-safe
colours, pyplot-free figures and panels, placeholders and notes that say what is missing, atomic saving.
"""

from __future__ import annotations

import os
import tempfile
import textwrap
from collections.abc import Iterable
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from lmbias.io import file_mode
from lmbias.papers.figure_data import parse_method

DPI = 150
#: rc settings every figure is drawn and saved under (svg.hashsalt fixes the SVG ids; glyphs become paths,
#: so the SVG does not depend on the fonts of the machine that opens it).
STYLE = {
    "svg.hashsalt": "lmbias",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "savefig.dpi": DPI,
    "figure.dpi": DPI,
    "image.composite_image": True,
    "path.simplify": True,
}
#: Okabe & Ito (2008), colour-blind safe; black last.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
#: Fixed colours for the project's method names, so a method keeps its colour in every figure.
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
#: Further colour-blind-safe colours (Paul Tol's muted scheme) for method names not listed above.
EXTRA_COLOURS = ("#882255", "#44AA99", "#999933", "#AA4499", "#332288", "#117733", "#DDCC77", "#88CCEE")
MALE_COLOUR, FEMALE_COLOUR = "#0072B2", "#D55E00"
MUTED = "#555555"


def method_colours(methods: Iterable[str]) -> dict[str, str]:
    """Colour per method *base* name (sweep instances share their base's colour)."""
    bases = sorted({parse_method(m).base for m in methods})
    unknown = [b for b in bases if b not in METHOD_COLOURS]
    out = {b: METHOD_COLOURS[b] for b in bases if b in METHOD_COLOURS}
    out.update({b: EXTRA_COLOURS[i % len(EXTRA_COLOURS)] for i, b in enumerate(unknown)})
    return out


def model_colours(models: Iterable[str]) -> dict[str, str]:
    return {m: OKABE_ITO[i % len(OKABE_ITO)] for i, m in enumerate(sorted(set(models)))}


# ------------------------------------------------------------------------------------------ drawing helpers


def styled(make):
    """Run a figure function under STYLE: artists read rcParams when they are created, not when saved."""
    import functools

    @functools.wraps(make)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return make(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure on the Agg canvas (no global state, safe in threads)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def subplots(fig: Figure, nrows: int, ncols: int, **kwargs) -> np.ndarray:
    with matplotlib.rc_context(STYLE):
        axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return axes


def placeholder(ax, message: str, width: int = 40) -> None:
    """An empty panel that says what is missing."""
    ax.set_axis_off()
    ax.text(
        0.5,
        0.5,
        textwrap.fill(message, width),
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=8,
        color="#333333",
        bbox={"boxstyle": "round,pad=0.6", "fc": "#f5f5f5", "ec": "#bbbbbb"},
    )


def add_note(ax, message: str, width: int = 60, below: bool = False) -> None:
    """A small note in a panel (what is missing from it, which variant it shows): inside the lower left
    corner, or under the x label (constrained layout makes room for it)."""
    text = (
        textwrap.fill(message, width)
        if "\n" not in message
        else "\n".join(textwrap.fill(line, width) for line in message.split("\n"))
    )
    if below:
        ax.annotate(
            text,
            xy=(0.0, 0.0),
            xycoords="axes fraction",
            xytext=(0, -34),
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=6.5,
            color=MUTED,
            annotation_clip=False,
        )
    else:
        ax.text(0.01, 0.01, text, ha="left", va="bottom", transform=ax.transAxes, fontsize=6.5, color=MUTED, zorder=5)


@styled
def placeholder_figure(title: str, message: str) -> Figure:
    fig = new_figure(6.4, 2.6)
    ax = subplots(fig, 1, 1)[0, 0]
    placeholder(ax, message, width=70)
    fig.suptitle(textwrap.fill(title, 80), fontsize=10)
    return fig


def save_figure(fig: Figure, out_stem: str | os.PathLike) -> list[Path]:
    """Write `<out_stem>.png` (150 dpi) and `<out_stem>.svg`: both rendered to temp files, then renamed."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    targets = [out_stem.parent / f"{out_stem.name}.png", out_stem.parent / f"{out_stem.name}.svg"]
    temps = []
    try:
        with matplotlib.rc_context(STYLE):
            for path in targets:
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                os.close(fd)
                temps.append(Path(tmp))
                fmt = path.suffix[1:]
                metadata = {"Date": None} if fmt == "svg" else None
                fig.savefig(tmp, format=fmt, dpi=DPI, metadata=metadata)
                os.chmod(tmp, file_mode())
        for tmp, path in zip(temps, targets):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise
    return targets


def add_legend(fig: Figure, handles: list, ncol: int | None = None, title: str | None = None) -> None:
    if handles:
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=ncol or min(len(handles), 5),
            frameon=False,
            title=title,
            title_fontsize=8,
        )
