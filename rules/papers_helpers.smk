# Input functions and params of rules/papers.smk, kept out of that file so it holds rules only
# (`snakemake --lint`); rules/papers.smk includes this file itself.
#
# The published numbers (resources/published/{paper}.yaml) are read lazily, when a paper's files are
# asked for, so a checkout without a transcription still builds everything else.

from pathlib import Path as _PapersPath

from lmbias.errors import ConfigError as _PapersConfigError
from lmbias.papers import grid as _papers_grid
from lmbias.papers import table_render as _papers_table_render
from lmbias.papers import published as _papers_published
from lmbias.papers import tables as _papers_tables

try:  # written by the figures module's owner; without it a paper has tables only
    from lmbias.papers.figures import FIGURES as _PAPERS_FIGURES
except ImportError:
    _PAPERS_FIGURES = {}

_PAPERS = config.get("papers") or {}
_PAPERS_LIBRARY = [f"src/lmbias/papers/{m}.py" for m in ("__init__", "published", "tables", "grid")] + [
    "src/lmbias/io.py"
]
# the figure registry, the shared data and style helpers and one module per paper
_PAPERS_FIGURES_LIBRARY = sorted(
    str(p.relative_to(workflow.basedir)) for p in _PapersPath(workflow.basedir, "src/lmbias/papers").glob("figure*.py")
)


def _papers_pattern(names):
    names = sorted(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def _papers_load(paper):
    if paper not in _PAPERS:
        raise _PapersConfigError(
            f"papers.{paper}: not configured; add it to `papers:` in config.yaml "
            f"(configured: {', '.join(_PAPERS) or 'none'})"
        )
    return _papers_published.load_published(paper, _PapersPath(workflow.basedir))


def _papers_settings_tables():
    """{paper: [settings table ids]} of the transcriptions present now (rule choice needs them at parse
    time); a missing or broken file is reported by the input functions when its paper is asked for."""
    out = {}
    for paper in _PAPERS:
        try:
            out[paper] = [t.id for t in _papers_load(paper).tables.values() if _papers_tables.is_settings_table(t)]
        except Exception:
            out[paper] = []
    return out


_PAPERS_SETTINGS_TABLES = _papers_settings_tables()
_PAPERS_SETTINGS_PATTERN = _papers_pattern({t for ts in _PAPERS_SETTINGS_TABLES.values() for t in ts})


def _papers_table(wildcards):
    tables = _papers_load(wildcards.paper).tables
    if wildcards.table not in tables:
        raise _PapersConfigError(
            f"results/papers/{wildcards.paper}/{wildcards.table}: no table {wildcards.table!r} in "
            f"resources/published/{wildcards.paper}.yaml (tables: {', '.join(tables)})"
        )
    return tables[wildcards.table]


def _papers_table_pairs_of(wildcards):
    table = _papers_table(wildcards)
    pairs = _papers_grid.paper_pairs(config, wildcards.paper)
    if not _papers_tables.is_settings_table(table):
        pairs = [(m, k) for m, k in pairs if config["methods"][k]["kind"] in table.method_kinds]
    return table, pairs


def paper_table_pairs(wildcards):
    """The slice a table job reads: its pairs (names, kind, hub id; resolved settings only where the table
    compares settings), so editing a method reruns only the tables that show it."""
    table, pairs = _papers_table_pairs_of(wildcards)
    with_settings = _papers_tables.is_settings_table(table) or any(r.settings for r in table.rows)
    return [_papers_grid.pair_info(config, m, k, with_settings) for m, k in pairs]


def paper_table_left_out(wildcards):
    """The grid pairs this table would show that are left out (inputs the user cannot have), with the reason."""
    table = _papers_table(wildcards)
    left_out = _papers_grid.left_out_pairs(config, wildcards.paper)
    if _papers_tables.is_settings_table(table):
        return left_out
    return [item for item in left_out if item["kind"] in table.method_kinds]


def paper_table_lm_benchmarks(wildcards):
    """Our language-modelling columns of a table that shows methods: the perplexity benchmarks the summaries
    of its pairs hold (lmbias.papers.tables.lm_benchmark_columns); none for a settings table."""
    table, pairs = _papers_table_pairs_of(wildcards)
    if not _papers_tables.shows_methods(table):
        return []
    names = []
    for model in dict.fromkeys(m for m, _ in pairs):
        names += [b for b in _summary_selection(model)[0] if b not in names]
    return _papers_tables.lm_benchmark_columns(config["benchmarks"], names)


def paper_table_readings(wildcards):
    """{benchmark: {entry, reading}} of the paper's readings (papers.<paper>.readings) for this table's columns:
    the entries its cells read and the notes' text. Editing a reading another table does not read leaves this
    table's params as they were."""
    table = _papers_table(wildcards)
    return _papers_grid.table_readings(config, wildcards.paper, {c.benchmark for c in table.columns})


def paper_table_inputs(wildcards):
    table, pairs = _papers_table_pairs_of(wildcards)
    summaries = (
        [] if _papers_tables.is_settings_table(table) else [f"results/{m}/{k}/summary.parquet" for m, k in pairs]
    )
    return {
        "summaries": summaries,
        "published": f"resources/published/{wildcards.paper}.yaml",
        "job": "src/lmbias/papers/jobs.py",
        "library": _PAPERS_LIBRARY,
    }


def paper_table_caption(wildcards):
    table = _papers_table(wildcards)
    return {
        "label": table.label,
        "caption": table.caption,
        "kinds": list(table.method_kinds),
        "significance": table.significance,
    }


def _papers_figure(wildcards):
    specs = {f.id: f for f in _PAPERS_FIGURES.get(wildcards.paper, [])}
    if wildcards.figure not in specs:
        raise _PapersConfigError(
            f"results/plots/{wildcards.paper}/{wildcards.figure}: no figure {wildcards.figure!r} for "
            f"paper {wildcards.paper!r} (figures: {', '.join(specs) or 'none'})"
        )
    return specs[wildcards.figure]


def _papers_trained_runs(paper):
    """(model, method, seed) of the paper's pairs that have a training run."""
    out = []
    for m, k in _papers_grid.paper_pairs(config, paper):
        if config["methods"][k]["kind"] in resolution.TRAINED_METHOD_KINDS:
            out += [(m, k, s) for s in seeds_for(k)]
    return out


def paper_figure_inputs(wildcards):
    _papers_load(wildcards.paper)
    spec = _papers_figure(wildcards)
    runs = _papers_trained_runs(wildcards.paper) if spec.needs_train_logs else []
    return {
        "summaries": [f"results/{m}/{k}/summary.parquet" for m, k in _papers_grid.paper_pairs(config, wildcards.paper)],
        "models": [f"results/{m}/{k}/seed{s}/model" for m, k, s in runs],
        "job": "src/lmbias/papers/jobs.py",
        "library": _PAPERS_FIGURES_LIBRARY + _PAPERS_LIBRARY,
    }


def paper_figure_runs(wildcards):
    spec = _papers_figure(wildcards)
    return [[m, k, s] for m, k, s in _papers_trained_runs(wildcards.paper)] if spec.needs_train_logs else []


def paper_figure_families(wildcards):
    """{model: family} of the paper's pairs: a figure says why a benchmark is missing (logprob-score is not
    defined for causal LMs) only where the family says so."""
    return {m: config["models"][m]["family"] for m, _ in _papers_grid.paper_pairs(config, wildcards.paper)}


def paper_figure_readings(wildcards):
    """{benchmark: entry} of the paper's readings: a figure reads what the paper's tables read."""
    return _papers_grid.paper_readings(config, wildcards.paper)


def paper_figure_caption(wildcards):
    return _papers_figure(wildcards).caption


_PAPERS_LEFT_OUT_LOGGED = set()


def _papers_log_left_out(paper):
    """Say once per run, in the run's log, which pairs of the paper's grid are left out and why."""
    left_out = _papers_grid.left_out_pairs(config, paper)
    if left_out and paper not in _PAPERS_LEFT_OUT_LOGGED:
        _PAPERS_LEFT_OUT_LOGGED.add(paper)
        from snakemake.logging import logger as _papers_logger

        _papers_logger.warning(
            f"paper_{paper}: left out {_papers_table_render.left_out_summary(left_out)}; their cells stay "
            "missing and each table's notes say why"
        )


def paper_targets(paper):
    """Every table (parquet, md, html) and figure (png, svg) of one paper."""
    _papers_log_left_out(paper)
    tables = _papers_load(paper).tables
    out = [f"results/papers/{paper}/{t}.{ext}" for t in tables for ext in ("parquet", "md", "html")]
    out += [f"results/plots/{paper}/{f.id}.{ext}" for f in _PAPERS_FIGURES.get(paper, []) for ext in ("png", "svg")]
    return out
