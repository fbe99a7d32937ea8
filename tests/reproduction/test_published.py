"""resources/published/*.yaml: the loader, and the transcriptions checked against the paper texts.

Values are read back from ../shared/papers/*.txt (fixture `shared_papers`) by parsing the printed tables, so
a typo in a transcription, a dropped row or a shifted column fails here. Manela et al.'s Table 2 is also
checked against the paper's own formulas (our lmbias.metrics.winobias.mu_stereo / mu_skew), with the rows
where the printed table contradicts itself pinned as such.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import yaml

from helpers.paths import REPO_ROOT
from lmbias.errors import DataError
from lmbias.metrics.winobias import mu_skew, mu_stereo
from lmbias.papers.published import METHOD_KINDS, PAPERS, load_published, published_path

# ----------------------------------------------------------------------------------------------- helpers


def paper_text(shared_papers: Path, paper: str) -> str:
    pub = load_published(paper)
    assert not pub.source_is_url, f"{paper}: its source is a URL, there is no paper text to read"
    return (shared_papers / pub.source).read_text(encoding="utf-8")


def tab_block(text: str, header: str, skip: int = 0) -> list[list[str]]:
    """The tab-separated lines after the line starting with `header` (after `skip` more header lines), up to
    the first line that is not part of the table (blank or without a tab)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 1 + skip :]:
        if "\t" not in line:
            break
        rows.append(line.split("\t"))
    return rows


def lines_between(text: str, start: str, end: str) -> list[str]:
    """Lines from the first line starting with `start` (exclusive) to the next line starting with `end`."""
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(end))
    return lines[i + 1 : j]


def by_label(table):
    return {row.label: row for row in table.rows}


# ------------------------------------------------------------------------------------------ every paper


@pytest.mark.parametrize("paper", PAPERS)
def test_every_paper_file_loads(paper, repo_root):
    pub = load_published(paper)
    assert published_path(paper) == repo_root / "resources" / "published" / f"{paper}.yaml"
    assert pub.paper == paper and pub.title
    assert pub.source.startswith("https://") if pub.source_is_url else pub.source.endswith(".txt")
    assert pub.tables or pub.figures
    for table in pub.tables.values():
        for row in table.rows:
            assert row.values or row.settings, f"{paper} {table.id} {row.label}: nothing transcribed"
            assert row.bold <= set(row.values)


@pytest.mark.parametrize("paper", PAPERS)
def test_source_file_is_a_paper_text(paper, request):
    """A file source is a text under ../shared/papers; a paper without one names itself by an https:// URL."""
    pub = load_published(paper)
    if pub.source_is_url:
        assert re.fullmatch(r"https://[\w.-]+\.[a-z]{2,}/\S+", pub.source), pub.source
    else:
        assert (request.getfixturevalue("shared_papers") / pub.source).is_file()


def test_loading_does_not_need_snakemake(repo_root):
    code = (
        "import sys; from lmbias.papers.published import load_published, PAPERS; "
        "[load_published(p) for p in PAPERS]; assert 'snakemake' not in sys.modules"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=repo_root,
        env={"PYTHONPATH": str(repo_root / "src"), "PATH": "/usr/bin:/bin"},
    )


def test_method_kinds_are_the_config_kinds():
    from lmbias.methods.kinds import METHOD_KEYS

    assert set(METHOD_KINDS) == set(METHOD_KEYS)


def _config():
    return yaml.safe_load((REPO_ROOT / "config.yaml").read_text())


def _selectors():
    for paper in PAPERS:
        pub = load_published(paper)
        for table in pub.tables.values():
            for col in table.columns:
                yield f"{paper}.{table.id}.{col.id}", col
        for fig in pub.figures:
            yield f"{paper}.figures.{fig.id}", fig


def test_selectors_name_configured_benchmarks_and_metrics_our_code_writes(repo_root):
    """A selector's benchmark is a config.yaml benchmark; its metric a name the metric code writes (the
    quoted string appears in lmbias.metrics / lmbias.benchmarks), so a rename on either side fails here."""
    benchmarks = _config()["benchmarks"]
    code = "".join(
        p.read_text() for sub in ("metrics", "benchmarks") for p in (repo_root / "src" / "lmbias" / sub).glob("*.py")
    )
    used = 0
    for where, sel in _selectors():
        if sel.benchmark is None:
            continue
        used += 1
        assert sel.benchmark in benchmarks, f"{where}: {sel.benchmark!r} is not a configured benchmark"
        assert f'"{sel.metric}"' in code, f"{where}: no metric {sel.metric!r} in our metric code"
    assert used >= 25


def test_rows_use_the_hub_ids_config_yaml_uses():
    """ "Same model" joins compare hub ids: the papers' models we configure must carry config.yaml's id."""
    hub = {name: entry.get("hub_id") for name, entry in _config()["models"].items()}
    expected = {  # (paper, table, row label) -> config.yaml model name
        ("manela2021", "table2", "BERT"): "bert-base",
        ("manela2021", "table2", "BERT-large"): "bert-large",
        ("manela2021", "table2", "RoBERTa"): "roberta-base",
        ("manela2021", "table2", "RoBERTa-large"): "roberta-large",
        ("manela2021", "table2", "DistilBERT"): "distilbert",
        ("manela2021", "table2", "ALBERT-xxlarge"): "albert-xxlarge",
        ("manela2021", "table3", "BERT-A"): "bert-base",
        ("over_debiasing", "table7", "BERT-base Pre-deb."): "bert-base",
        ("over_debiasing", "table7", "BERT-large SD"): "bert-large",
        ("over_debiasing", "table7", "GPT2 CDS"): "gpt2",
        ("over_debiasing", "table7", "GPT2-medium ER"): "gpt2-medium",
        ("over_debiasing", "table8", "BART-base Pre-deb."): "bart-base",
        ("over_debiasing", "table8", "BART-large SD"): "bart-large",
        ("meade2022", "seat_gender", "BERT + CDA"): "bert-base",
        ("meade2022", "seat_gender", "RoBERTa + INLP"): "roberta-base",
        ("meade2022", "stereoset_gender", "GPT-2 + Self-Debias"): "gpt2",
    }
    for (paper, table, label), model in expected.items():
        assert by_label(load_published(paper).tables[table])[label].model == hub[model], (paper, table, label)


# ------------------------------------------------------------------------------------ Manela et al. 2021


def test_manela_table1_every_cell_as_printed(shared_papers):
    printed = tab_block(paper_text(shared_papers, "manela2021"), "Model\tT1\t", skip=1)
    table = load_published("manela2021").tables["table1"]
    assert len(printed) == 26 == len(table.rows)
    ids = [c.id for c in table.columns]
    for cells, row in zip(printed, table.rows):
        assert row.label == cells[0]
        assert row.values == dict(zip(ids, map(float, cells[1:]))), row.label


def test_manela_table2_every_cell_as_printed(shared_papers):
    printed = tab_block(paper_text(shared_papers, "manela2021"), "Embedding\tT2", skip=2)
    table = load_published("manela2021").tables["table2"]
    assert len(printed) == 17 == len(table.rows)
    ids = [c.id for c in table.columns]
    assert ids == ["f1_male_pro", "f1_male_anti", "f1_female_pro", "f1_female_anti", "stereo", "skew"]
    for cells, row in zip(printed, table.rows):
        assert row.label == cells[0]
        assert row.values == dict(zip(ids, map(float, cells[1:]))), row.label


#: Stereo/Skew are printed to one decimal from unrounded F1s: every consistent row agrees within 0.05.
TOL = 0.051


def test_manela_table2_bert_row_gives_stereo_and_skew_by_the_papers_formula():
    v = by_label(load_published("manela2021").tables["table2"])["BERT"].values
    f1 = (v["f1_male_pro"], v["f1_male_anti"], v["f1_female_pro"], v["f1_female_anti"])
    assert f1 == (69.3, 58.0, 31.4, 8.2)
    # 17.25 and 43.85 from the rounded F1s: the paper rounded from its unrounded F1s (one goes up, one down)
    assert mu_stereo(*f1) == pytest.approx(17.25) and mu_skew(*f1) == pytest.approx(43.85)
    assert mu_stereo(*f1) == pytest.approx(17.3, abs=TOL) and mu_skew(*f1) == pytest.approx(43.8, abs=TOL)
    assert (v["stereo"], v["skew"]) == (17.3, 43.8)


#: Rows whose printed Stereo/Skew are the formulas' Skew/Stereo: their F1 columns read as
#: (Pro M, Pro F, Anti M, Anti F). The text (section 4.3.2) agrees with the printed Stereo/Skew.
SWAPPED_ROWS = {"BERT-U", "BERT-UO", "BERT-A", "BERT-AO"}
#: Printed Stereo/Skew match neither column order.
INCONSISTENT_ROWS = {"RoBERTa-large"}


def test_manela_table2_derived_columns_follow_the_formula_except_the_pinned_rows():
    table = load_published("manela2021").tables["table2"]
    tol = TOL
    for row in table.rows:
        v = row.values
        f1 = (v["f1_male_pro"], v["f1_male_anti"], v["f1_female_pro"], v["f1_female_anti"])
        stereo, skew = mu_stereo(*f1), mu_skew(*f1)
        # the same F1s read in the order (Pro M, Pro F, Anti M, Anti F)
        alt = (f1[0], f1[2], f1[1], f1[3])
        alt_stereo, alt_skew = mu_stereo(*alt), mu_skew(*alt)
        as_printed = abs(stereo - v["stereo"]) <= tol and abs(skew - v["skew"]) <= tol
        reordered = abs(alt_stereo - v["stereo"]) <= tol and abs(alt_skew - v["skew"]) <= tol
        if row.label in SWAPPED_ROWS:
            assert not as_printed and reordered, row.label
            assert abs(stereo - v["skew"]) <= tol and abs(skew - v["stereo"]) <= tol, row.label
        elif row.label in INCONSISTENT_ROWS:
            assert not as_printed and not reordered, row.label
        else:
            assert as_printed, row.label
        # the pinned rows, and only they, say so in their note
        flagged = bool(row.note and "Stereo/Skew" in row.note)
        assert flagged == (row.label in SWAPPED_ROWS | INCONSISTENT_ROWS), row.label


def test_manela_table3_transposed_as_printed(shared_papers):
    printed = tab_block(paper_text(shared_papers, "manela2021"), "Competency\tBERT\tBERT-U\tBERT-A")
    assert [cells[0] for cells in printed] == ["Incompetent", "Neutral", "Competent"]
    rows = by_label(load_published("manela2021").tables["table3"])
    assert list(rows) == ["BERT", "BERT-U", "BERT-A"]
    for cells in printed:
        for label, value in zip(["BERT", "BERT-U", "BERT-A"], cells[1:]):
            assert rows[label].values[cells[0].lower()] == float(value), (cells[0], label)


def test_manela_methods_per_row():
    table = load_published("manela2021").tables["table1"]
    for row in table.rows:
        if row.label in {"BERT-UO", "BERT-AO"}:
            assert row.method is None and "no method of ours" in row.note
        elif row.label.endswith("-O"):
            assert row.method == "online"
        elif row.label in {"BERT-U", "BERT-A"}:
            assert (row.method, row.method_name) == ("gpr", "gpr-" + row.label[-1].lower())
        else:
            assert row.method == "pretrained"


# ---------------------------------------------------------------------------- over-debiasing (DA-Gender)

METHOD_HEADERS = {"Pre-deb.": "pretrained", "CDS": "cds", "ER": "er", "SD": "sd"}


def _model_metric_rows(text: str, first_metric: str):
    """{(model, metric): [Pre-deb., CDS, ER, SD]} of Table 7 or 8 (the model is printed on its first row)."""
    # the header line is shared by Tables 7 and 8: take the block whose first metric matches
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line == "Model\tMetric\tPre-deb.\tCDS\tER\tSD"]
    start = next(i for i in starts if lines[i + 1].startswith(f"BERT-base\t{first_metric}"))
    printed, model = {}, None
    for line in lines[start + 1 :]:
        cells = line.split("\t")
        if len(cells) != 6:
            break
        model = cells[0] or model
        printed[(model, cells[1])] = cells[2:]
    return printed


def test_over_debiasing_table7_every_cell_as_printed(shared_papers):
    printed = _model_metric_rows(paper_text(shared_papers, "over_debiasing"), "SEAT-v1")
    assert len(printed) == 22  # 6 models x 4 metrics, GPT2 and GPT2-medium without logprob-score
    table = load_published("over_debiasing").tables["table7"]
    rows = by_label(table)
    assert len(table.rows) == 24 and sum(len(r.values) for r in table.rows) == 22 * 4
    column = {c.header: c.id for c in table.columns}
    for (model, metric), cells in printed.items():
        for header, cell in zip(METHOD_HEADERS, cells):
            row = rows[f"{model} {header}"]
            assert row.method == METHOD_HEADERS[header]
            assert row.values[column[metric]] == float(cell), (model, metric, header)


def test_over_debiasing_table8_every_cell_as_printed(shared_papers):
    printed = _model_metric_rows(paper_text(shared_papers, "over_debiasing"), "DA-score")
    assert len(printed) == 12
    table = load_published("over_debiasing").tables["table8"]
    rows = by_label(table)
    assert len(table.rows) == 24 and sum(len(r.values) for r in table.rows) == 12 * 4
    for (model, metric), cells in printed.items():
        base = {"DA-score": "da_score", "LM-score": "lm_score"}[metric]
        for header, cell in zip(METHOD_HEADERS, cells):
            column = base if header == "Pre-deb." else f"{base}_diff"
            assert rows[f"{model} {header}"].values[column] == float(cell), (model, metric, header)
    # the differences have no selector: ours would be a difference of two summaries
    assert all(c.benchmark is None for c in table.columns if c.id.endswith("_diff"))


def test_over_debiasing_table11_sweep_values_as_printed(shared_papers):
    text = paper_text(shared_papers, "over_debiasing")
    printed = {
        cells[0]: [float(x) for x in re.findall(r"[\d.]+", cells[1])]
        for cells in tab_block(text, "Hyper-parameter\tValues")
    }
    assert list(printed) == ["Swap rate", "λ", "Ratio of pairs"] and all(len(v) == 8 for v in printed.values())
    table = load_published("over_debiasing").tables["table11"]
    assert len(table.rows) == 24
    key = {"Swap rate": ("cds", "swap_rate"), "λ": ("er", "er_lambda"), "Ratio of pairs": ("sd", "ratio_of_pairs")}
    for name, values in printed.items():
        method, setting = key[name]
        rows = [r for r in table.rows if r.label.startswith(f"{name} = ")]
        assert [r.settings[setting] for r in rows] == values == [r.values["value"] for r in rows]
        assert {r.method for r in rows} == {method}


TABLE12_MODELS = {
    "bert_base": "bert-base",
    "bert_large": "bert-large",
    "gpt2": "gpt2",
    "gpt2_medium": "gpt2-medium",
    "bart_base": "bart-base",
    "bart_large": "bart-large",
}


def test_over_debiasing_table12_settings_as_printed(shared_papers):
    text = paper_text(shared_papers, "over_debiasing")
    printed = tab_block(text, "Hyper-parameter\tBERT-base\tBERT-large\tGPT2\tGPT2-medium\tBART-base\tBART-large")
    assert len(printed) == 6
    table = load_published("over_debiasing").tables["table12"]
    assert [r.label for r in table.rows] == [cells[0] for cells in printed]
    for cells, row in zip(printed, table.rows):
        assert row.values == dict(zip([c.id for c in table.columns], map(float, cells[1:]))), row.label
    assert all(c.benchmark is None for c in table.columns)


def test_config_yaml_hub_models_carry_table12():
    """config.yaml's training defaults of the paper's six models are Table 12's settings."""
    models = _config()["models"]
    for row in load_published("over_debiasing").tables["table12"].rows:
        for column, value in row.values.items():
            training = models[TABLE12_MODELS[column]]["training"]
            assert training[row.settings["parameter"]] == value, (row.label, column)


# -------------------------------------------------------------------------------------- Lu et al. 2018


def _lu_rows(text: str, caption: str, n_values: int) -> dict[str, list]:
    """{index: values} of a space-separated Lu et al. table: the lines between its header line ("Index
    Debiasing Configuration ...") and its caption; values are the last `n_values` tokens of a line ("-" =
    empty, "%" dropped, a token that is no number kept as text)."""
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith(caption))
    start = max(i for i in range(end) if lines[i].startswith("Index Debiasing Configuration"))
    out = {}
    for line in lines[start + 1 : end]:
        m = re.match(r"(\d\.\d) ", line)
        assert m, line
        values = []
        for tok in line.split()[-n_values:]:
            if tok == "-":
                values.append(None)
                continue
            try:
                values.append(float(tok.rstrip("%")))
            except ValueError:
                values.append(tok)
        out[m.group(1)] = values
    return out


def _check_lu(table, printed):
    assert len(table.rows) == len(printed)
    ids = [c.id for c in table.columns]
    for (index, values), row in zip(printed.items(), table.rows):
        assert row.label.split()[0] == index
        assert row.values == {k: v for k, v in zip(ids, values) if v is not None}, index


def test_lu_table2_as_printed(shared_papers):
    text = paper_text(shared_papers, "lu2018")
    printed = _lu_rows(text, "Table 2:", 4)
    assert list(printed) == ["1.1", "1.2", "1.3", "1.4"]
    # Row 1.1 prints its F1 glued to footnote 4 ("67.20444Matches state-of-the-art ... (2017)."): the last
    # four tokens hold (2017)., -, 3.00, -; read the F1 from the glued token instead.
    assert printed["1.1"][0] == "(2017)."
    line = next(line for line in text.splitlines() if line.startswith("1.1 None"))
    printed["1.1"][0] = float(re.search(r"(\d+\.\d\d)444Matches", line).group(1))
    _check_lu(load_published("lu2018").tables["table2"], printed)


def test_lu_table3_as_printed(shared_papers):
    text = paper_text(shared_papers, "lu2018")
    printed = _lu_rows(text, "Table 3:", 5)
    assert list(printed) == [f"2.{k}" for k in range(1, 9)]
    _check_lu(load_published("lu2018").tables["table3"], printed)


def test_lu_table4_as_printed_and_naive_row_inferred_from_the_text(shared_papers):
    text = paper_text(shared_papers, "lu2018")
    printed = _lu_rows(text, "Table 4:", 4)
    assert list(printed) == ["3.1", "3.2", "3.3", "3.4"]
    table = load_published("lu2018").tables["table4"]
    _check_lu(table, printed)
    # Section 5.2: naive augmentation "almost completely eliminates bias" with "a lower perplexity hit".
    assert "naive augmentation almost completely eliminates bias" in text
    cda = [r for r in table.rows if r.method == "cda"]
    naive = min(cda, key=lambda r: r.values["aob"])
    assert naive.settings == {"intervention": "naive"}
    assert naive.values["test_perplexity_diff"] == min(r.values["test_perplexity_diff"] for r in cda)
    assert table.column("aob").benchmark == "occupations"


# ------------------------------------------------------------------------------------ Bartl et al. 2020


def test_bartl_figures_quote_the_poster(shared_papers):
    text = paper_text(shared_papers, "bartl2020").replace("**", "")
    figures = load_published("bartl2020").figures
    assert len(figures) == 11
    for fig in figures:
        for part in fig.text.split(" ... "):
            assert part in text, f"{fig.id}: {part!r} is not in the poster"
        if fig.value is not None:
            assert float(re.search(r"\d[\d,]*", fig.text).group(0).replace(",", "")) == fig.value, fig.id
    values = {f.id: f.value for f in figures if f.value is not None}
    assert values["corpus_sentences"] == 5400 == 5 * 18 * 60  # patterns x person words x professions
    signs = [f for f in figures if f.sign is not None]
    assert {(f.method, f.sign) for f in signs} == {("pretrained", "negative"), ("cds", "positive"), ("cds", "negative")}


# ------------------------------------------------------------------------------------ Meade et al. 2022
# No copy of the paper is shared: its numbers are quotations (see the file's header), so these tests check the
# transcription against itself and the paper's own formula, not against a text.

MEADE_MODELS = {"bert-base-uncased", "albert-base-v2", "roberta-base", "gpt2"}
SEAT_TESTS = ("seat6", "seat6b", "seat7", "seat7b", "seat8", "seat8b")


def test_meade_row_counts_per_table_and_model():
    tables = load_published("meade2022").tables
    counts = {tid: Counter(row.model for row in table.rows) for tid, table in tables.items()}
    assert counts == {
        "seat_gender": {"bert-base-uncased": 5, "albert-base-v2": 5, "roberta-base": 5},
        "stereoset_gender": {"bert-base-uncased": 6, "roberta-base": 6, "gpt2": 4},
        "crows_pairs_gender": {"bert-base-uncased": 6, "roberta-base": 6, "gpt2": 4},
        "perplexity": {"bert-base-uncased": 1},
    }
    assert sum(len(row.values) for row in tables["seat_gender"].rows) == 15 * 7
    # no LM score where only the leaderboard has one (GPT-2: its "LMS (Overall)" disagrees with the quotations)
    lms = {row.label for row in tables["stereoset_gender"].rows if "lms" in row.values}
    assert lms == {row.label for row in tables["stereoset_gender"].rows if row.model != "gpt2"}


def test_meade_rows_name_the_four_hub_models_and_configured_method_kinds():
    configured = {entry["kind"] for entry in _config()["methods"].values()}
    for table in load_published("meade2022").tables.values():
        assert set(table.method_kinds) <= configured, table.id
        for row in table.rows:
            assert row.model in MEADE_MODELS, (table.id, row.label)
            assert row.method in table.method_kinds, (table.id, row.label)
        # one row per (model, method): the "same model" join is unambiguous
        pairs = [(row.model, row.method) for row in table.rows]
        assert len(pairs) == len(set(pairs)), table.id
    # Self-Debias only rescales output distributions: it has no SEAT rows
    assert "self_debias" not in load_published("meade2022").tables["seat_gender"].method_kinds


def test_meade_seat_average_is_the_mean_absolute_effect_size():
    """The paper's last SEAT column is the mean |effect size| of the six tests, computed from unrounded sizes:
    from the printed 3-decimal cells it must agree within 0.0005 (cell rounding) + 0.0005 (its own rounding)."""
    table = load_published("meade2022").tables["seat_gender"]
    assert [c.id for c in table.columns] == [*SEAT_TESTS, "avg_abs"]
    avg = table.column("avg_abs")  # our mean |effect size| row of the same six tests
    assert (avg.benchmark, avg.metric, avg.subset) == ("seat", "mean_abs_effect_size", "sent-weat6-8b")
    for row in table.rows:
        mean_abs = sum(abs(row.values[t]) for t in SEAT_TESTS) / len(SEAT_TESTS)
        assert abs(mean_abs - row.values["avg_abs"]) <= 0.001 + 1e-12, (row.label, mean_abs)
    # a worked case: BERT + CDA, (0.846 + 0.186 + 0.278 + 1.342 + 0.831 + 0.849) / 6 = 0.722 exactly
    cda = by_label(table)["BERT + CDA"].values
    assert sum(abs(cda[t]) for t in SEAT_TESTS) == pytest.approx(6 * 0.722) and cda["avg_abs"] == 0.722


def test_meade_selectors_are_the_gender_rows_of_our_benchmarks():
    tables = load_published("meade2022").tables
    seat = tables["seat_gender"]
    assert [(c.benchmark, c.metric, c.subset) for c in seat.columns[:6]] == [
        ("seat", "effect_size", f"sent-weat{t[4:]}") for t in SEAT_TESTS
    ]
    assert set(f"sent-weat{t[4:]}" for t in SEAT_TESTS) <= set(_config()["benchmarks"]["seat"]["tests"])
    stereoset = tables["stereoset_gender"]
    assert [(c.benchmark, c.metric, c.subset) for c in stereoset.columns] == [
        ("stereoset", "ss", "gender"),
        ("stereoset", "lms", "all"),
    ]
    crows = tables["crows_pairs_gender"].column("stereotype_score")
    assert (crows.benchmark, crows.metric, crows.subset) == ("crows_pairs", "metric_score", "gender")


# ---------------------------------------------------------------------------------------- bad input


GOOD = textwrap.dedent("""\
    paper: manela2021
    title: t
    source: manela2021_stereotype_and_skew.txt
    tables:
      table2:
        label: "Table 2"
        caption: c
        method_kinds: [pretrained]
        significance: null
        columns:
          - {id: f1_pro_m, header: "F1 pro (M)", benchmark: winobias, metric: f1_male, variant: null,
             subset: type2/pro, scale: 1}
          - {id: other, header: "Other", benchmark: null}
        rows:
          - {label: BERT, model: bert-base-uncased, method: pretrained, values: {f1_pro_m: 69.3}}
    """)


def _write(tmp_path: Path, text: str, paper: str = "manela2021") -> Path:
    path = tmp_path / "resources" / "published" / f"{paper}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_good_minimal_file_loads(tmp_path):
    _write(tmp_path, GOOD)
    pub = load_published("manela2021", root=tmp_path)
    col = pub.tables["table2"].columns[0]
    assert (col.benchmark, col.metric, col.variant, col.subset, col.scale) == (
        "winobias",
        "f1_male",
        None,
        "type2/pro",
        1.0,
    )
    assert pub.tables["table2"].rows[0].values == {"f1_pro_m": 69.3}
    assert pub.tables["table2"].rows[0].bold == frozenset()


@pytest.mark.parametrize(
    "old, new, where, problem",
    [
        ("values: {f1_pro_m: 69.3}", "values: {f1_prx: 69.3}", "tables.table2.rows[0].values.f1_prx", "unknown column"),
        ("{id: other,", "{id: f1_pro_m,", "tables.table2.columns[1].id", "duplicate column id"),
        (
            '{id: other, header: "Other", benchmark: null}',
            '{id: other, header: "Other", benchmark: null, metric: f1_male}',
            "tables.table2.columns[1].metric",
            "without a benchmark",
        ),
        (
            "values: {f1_pro_m: 69.3}",
            "values: {f1_pro_m: 2e-5}",  # YAML 1.1 reads 2e-5 as a string
            "tables.table2.rows[0].values.f1_pro_m",
            "expected a number",
        ),
        (
            "values: {f1_pro_m: 69.3}",
            "values: {f1_pro_m: true}",
            "tables.table2.rows[0].values.f1_pro_m",
            "expected a number",
        ),
        (
            "method: pretrained, values",
            "method: debias, values",
            "tables.table2.rows[0].method",
            "unknown method kind 'debias'",
        ),
        (
            "method_kinds: [pretrained]",
            "method_kinds: [pretrained, magic]",
            "tables.table2.method_kinds[1]",
            "unknown method kind 'magic'",
        ),
        ("model: bert-base-uncased, ", "", "tables.table2.rows[0].model", "missing required key"),
        ("    caption: c\n", "", "tables.table2.caption", "missing required key"),
        ("title: t\n", "", "title", "missing required key"),
        (
            "benchmark: winobias, metric: f1_male,",
            "benchmark: winobias,",
            "tables.table2.columns[0].metric",
            "needs a metric",
        ),
        (
            "values: {f1_pro_m: 69.3}",
            "values: {f1_pro_m: 69.3}, bold: [other]",
            "tables.table2.rows[0].bold[0]",
            "not a column this row has a value for",
        ),
        (
            "significance: null",
            "significance: {p_below: 0.01, mark: italic}",
            "tables.table2.significance.mark",
            "unknown mark",
        ),
        ("paper: manela2021", "paper: lu2018", "paper", "does not match the file name"),
        ("  table2:", "  Table2:", "tables.Table2", "lower-case"),
        ("scale: 1}", "scale: 1, colour: red}", "tables.table2.columns[0].colour", "unknown key"),
        (
            "source: manela2021_stereotype_and_skew.txt",
            "source: papers/manela2021.txt",
            "source",
            "expected a file name under ../shared/papers/",
        ),
        (
            "source: manela2021_stereotype_and_skew.txt",
            "source: http://arxiv.org/abs/2110.08527",
            "source",
            "a URL source must start with https://",
        ),
        (
            "source: manela2021_stereotype_and_skew.txt",
            "source: https://arxiv.org/abs/2110.08527 v3",
            "source",
            "expected an https:// URL without spaces",
        ),
        (
            "source: manela2021_stereotype_and_skew.txt",
            "source: 'https://'",
            "source",
            "expected an https:// URL without spaces",
        ),
    ],
)
def test_bad_file_error_names_file_and_key_path(tmp_path, old, new, where, problem):
    assert old in GOOD
    _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(DataError) as err:
        load_published("manela2021", root=tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'resources/published/manela2021.yaml'}: {where}: "), message
    assert problem in message


def test_an_https_url_is_a_source(tmp_path):
    _write(
        tmp_path, GOOD.replace("source: manela2021_stereotype_and_skew.txt", "source: https://arxiv.org/abs/2110.08527")
    )
    pub = load_published("manela2021", root=tmp_path)
    assert pub.source == "https://arxiv.org/abs/2110.08527" and pub.source_is_url
    _write(tmp_path, GOOD)
    assert not load_published("manela2021", root=tmp_path).source_is_url


def test_duplicate_table_id_is_an_error_with_its_line(tmp_path):
    body = GOOD.split("tables:\n")[1]
    _write(tmp_path, GOOD + body)
    with pytest.raises(DataError, match=r"manela2021\.yaml:\d+: .*duplicate key 'table2'"):
        load_published("manela2021", root=tmp_path)


def test_duplicate_row_label_and_figure_id_are_errors(tmp_path):
    row = "      - {label: BERT, model: bert-base-uncased, method: pretrained, values: {f1_pro_m: 69.3}}\n"
    _write(tmp_path, GOOD + row)
    with pytest.raises(DataError, match=r"tables\.table2\.rows\[1\]\.label: duplicate row label 'BERT'"):
        load_published("manela2021", root=tmp_path)
    figure = "  - {id: f, label: Data, text: words, value: 1}\n"
    _write(tmp_path, GOOD + "figures:\n" + figure + figure)
    with pytest.raises(DataError, match=r"figures\[1\]\.id: duplicate figure id 'f'"):
        load_published("manela2021", root=tmp_path)


def test_missing_file_and_unknown_paper_are_named(tmp_path):
    with pytest.raises(DataError, match=r"resources/published/lu2018\.yaml: no such file"):
        load_published("lu2018", root=tmp_path)
    with pytest.raises(DataError, match="unknown paper 'manela2020'"):
        load_published("manela2020")


def test_figure_needs_a_value_or_a_sign(tmp_path):
    _write(tmp_path, GOOD + "figures:\n  - {id: f, label: Data, text: words}\n")
    with pytest.raises(DataError, match=r"figures\[0\]: needs a value or a sign"):
        load_published("manela2021", root=tmp_path)
