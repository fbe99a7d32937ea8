"""The papers' figures (lmbias.papers.figures): every figure draws from real tiny-run summaries, plots the values
it is given (read back from the matplotlib objects), says what is missing instead of inventing it, refuses
unusable input, and writes identical files on a rerun.

tests/fixtures/figure_summaries.parquet holds the summary rows the figures read, from a real run of this
workflow (tiny-bert, tiny-gpt2, tiny-bart pretrained; tiny-bert cds with max_steps 4 and the bias probe every
step); tests/fixtures/figure_train_log.parquet is that cds model's train_log.parquet. Regenerate both with
`python tests/fixtures/make_figure_fixtures.py <workdir>` after such a run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from helpers.paths import FIXTURES
from lmbias.papers import (
    figure_data,
    figure_style,
    figures_bartl2020,
    figures_llm_gender,
    figures_lu2018,
    figures_manela2021,
    figures_over_debiasing,
)
from lmbias.papers import figures as F

# ------------------------------------------------------------------------------------------ inputs


@pytest.fixture(scope="module")
def real_summaries() -> pd.DataFrame:
    return pd.read_parquet(FIXTURES / "figure_summaries.parquet")


@pytest.fixture(scope="module")
def real_train_logs() -> dict:
    return {("tiny-bert", "cds", 0): pd.read_parquet(FIXTURES / "figure_train_log.parquet")}


def row(model, method, benchmark, metric, variant, subset, value, seed="mean", lo=np.nan, hi=np.nan, p=np.nan, n=10):
    return dict(
        model=model,
        method=method,
        seed=seed,
        benchmark=benchmark,
        metric=metric,
        variant=variant,
        subset=subset,
        value=value,
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        n=n,
    )


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows)


def texts(fig) -> str:
    """Every piece of text in a figure (titles, labels, notes, placeholders, legends)."""
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and not isinstance(a, Line2D)))


def points(ax) -> dict[str, tuple[float, float]]:
    """Single-point Line2D artists by label."""
    out = {}
    for line in ax.get_lines():
        x, y = line.get_xdata(), line.get_ydata()
        if len(x) == 1 and not line.get_label().startswith("_"):
            out[line.get_label()] = (float(x[0]), float(y[0]))
    return out


def data_axes(fig):
    return [ax for ax in fig.axes if ax.axison]


# ------------------------------------------------------------------------------------------ interface


def test_the_figure_table_names_every_paper_once():
    assert set(F.FIGURES) == {"manela2021", "bartl2020", "lu2018", "over_debiasing", "llm_gender"}
    ids = [(s.paper, s.id) for s in F.all_specs()]
    assert len(ids) == len(set(ids))
    for paper, specs in F.FIGURES.items():
        assert specs
        for spec in specs:
            assert spec.paper == paper and spec.id and spec.caption.strip().endswith(".")
            assert callable(spec.draw)
    assert [s.id for s in F.all_specs() if s.needs_train_logs] == ["training_curves"]
    assert F.get_spec("lu2018", "occupation_bias").paper == "lu2018"
    with pytest.raises(KeyError, match="known: "):
        F.get_spec("lu2018", "nope")


@pytest.mark.parametrize(
    "name, base, param, value",
    [
        ("pretrained", "pretrained", None, None),
        ("cds@swap_rate=0.7", "cds", "swap_rate", 0.7),
        ("er@er_lambda=1.25,seed=3", "er", "er_lambda", 1.25),
        ("sd@pairs=names", "sd", "pairs", "names"),
    ],
)
def test_method_names_and_sweep_instances(name, base, param, value):
    m = figure_data.parse_method(name)
    assert (m.base, m.param, m.value) == (base, param, value)
    assert m.is_sweep == (param is not None)


def test_methods_sort_pretrained_first_and_sweeps_by_value():
    names = ["er", "cds@swap_rate=10", "cds@swap_rate=2", "cds", "pretrained", "cds@swap_rate=0.65"]
    assert sorted(names, key=figure_data.method_sort_key) == [
        "pretrained",
        "cds",
        "cds@swap_rate=0.65",
        "cds@swap_rate=2",
        "cds@swap_rate=10",
        "er",
    ]
    colours = figure_style.method_colours(["cds@swap_rate=0.6", "cds", "mystery", "other"])
    assert colours["cds"] == figure_style.METHOD_COLOURS["cds"]
    assert colours["mystery"] != colours["other"] and set(colours) == {"cds", "mystery", "other"}


# ------------------------------------------------------------------------------------------ real summaries


@pytest.mark.parametrize("spec", F.all_specs(), ids=lambda s: f"{s.paper}/{s.id}")
def test_every_figure_draws_from_real_tiny_run_summaries(spec, real_summaries, real_train_logs, tmp_path):
    out = spec.draw(real_summaries, real_train_logs, tmp_path / spec.paper / spec.id)
    assert out == [tmp_path / spec.paper / f"{spec.id}.png", tmp_path / spec.paper / f"{spec.id}.svg"]
    from matplotlib.image import imread

    image = imread(out[0])
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 600
    svg = out[1].read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg
    assert not [p for p in out[0].parent.iterdir() if p.name.endswith(".tmp")]


def test_real_tradeoff_plots_each_models_pretrained_point(real_summaries):
    fig = figures_over_debiasing.tradeoff_figure(real_summaries)
    agg = figure_data.aggregate_rows(real_summaries)
    for ax in data_axes(fig):
        model, label = ax.get_title().split(": ")
        bench = {"SEAT-v1": "seat_v1", "SEAT-v2": "seat_v2", "logprob-score": "logprob"}[label]
        got = points(ax)["pretrained"]
        m = agg[(agg["model"] == model) & (agg["method"] == "pretrained")]
        bias = m[(m["benchmark"] == bench) & (m["metric"] == "effect_size")]
        bias = bias[bias["subset"] == ("test" if bench == "logprob" else "occupations-test")]
        da = m[(m["benchmark"] == "da_gender") & (m["metric"] == "da_score") & (m["subset"] == "all")]
        da = (
            da[da["variant"].str.startswith("association=ratio")]
            if (da["variant"].str.startswith("association=ratio")).any()
            else da
        )
        assert got == pytest.approx((bias["value"].iloc[0], 100 - da["value"].iloc[0]))
    relevant = agg[agg["benchmark"].isin(["seat_v1", "seat_v2", "logprob", "da_gender"])]
    assert {ax.get_title().split(":")[0] for ax in fig.axes} == set(relevant["model"])
    for model, rows in relevant.groupby("model"):
        if "logprob" not in set(rows["benchmark"]):
            assert f"{model}: no logprob-score" in texts(fig).replace("\n", " ")


def test_tradeoff_says_logprob_is_undefined_only_for_causal_models(real_summaries):
    """The reason 'not defined for causal LMs' comes from the family the figure job passes, never from a
    guess: a masked model without logprob rows (a run that left logprob out) gets no such reason."""
    mlm = real_summaries[(real_summaries["model"] == "tiny-bert") & (real_summaries["benchmark"] != "logprob")]
    clm = real_summaries[real_summaries["model"] == "tiny-gpt2"]
    frame = pd.concat([mlm, clm], ignore_index=True)
    assert not clm.empty and "logprob" not in set(clm["benchmark"]) and not mlm.empty
    frame.attrs["families"] = {"tiny-bert": "mlm", "tiny-gpt2": "clm"}
    notes = _logprob_notes(figures_over_debiasing.tradeoff_figure(frame))
    assert "causal" in notes["tiny-gpt2"] and "causal" not in notes["tiny-bert"], notes
    frame.attrs.pop("families")  # without families (a frame read by hand) no reason is claimed
    assert not any("causal" in note for note in _logprob_notes(figures_over_debiasing.tradeoff_figure(frame)).values())


def _logprob_notes(fig) -> dict[str, str]:
    """{model: the placeholder text of its logprob-score panel}."""
    notes = {}
    for t in fig.findobj(lambda a: hasattr(a, "get_text") and not isinstance(a, Line2D)):
        text = t.get_text().replace("\n", " ")
        if ": no logprob-score" in text:
            notes[text.split(":")[0]] = text
    return notes


def test_real_training_curves_plot_the_logged_loss_and_bias(real_summaries, real_train_logs):
    log = real_train_logs[("tiny-bert", "cds", 0)]
    fig = figures_lu2018.training_figure(real_summaries, real_train_logs)
    ax = next(a for a in fig.axes if a.get_title() == "tiny-bert / cds")
    loss = next(line for line in ax.get_lines() if line.get_label() == "loss (seed 0)")
    np.testing.assert_allclose(loss.get_ydata(), log.sort_values("step")["loss"])
    twin = next(a for a in fig.axes if a is not ax and a.bbox.bounds == ax.bbox.bounds)
    bias = next(line for line in twin.get_lines() if line.get_label() == "bias (seed 0)")
    assert log["bias_metric"].notna().any()
    np.testing.assert_allclose(bias.get_ydata(), log["bias_metric"].dropna())


# ------------------------------------------------------------------------------------------ known values


def tradeoff_rows():
    rows = []
    sweep = {"2.0": (0.6, 90.0), "10.0": (0.4, 80.0), "0.5": (0.8, 95.0)}
    for model in ("bert-base",):
        rows.append(
            row(
                model, "pretrained", "seat_v1", "effect_size", "version=v1,pooling=mean,ddof=1", "occupations-test", 1.1
            )
        )
        rows.append(
            row(
                model, "pretrained", "seat_v1", "effect_size", "version=v1,pooling=mean,ddof=0", "occupations-test", 9.9
            )
        )
        rows.append(
            row(
                model,
                "pretrained",
                "da_gender",
                "da_score",
                "association=ratio,masks=word",
                "all",
                97.0,
                lo=95.0,
                hi=98.0,
            )
        )
        rows.append(row(model, "pretrained", "da_gender", "da_score", "association=tm,masks=word", "all", 50.0))
        rows.append(
            row(model, "pretrained", "da_gender", "da_score", "association=ratio,masks=word", "ideal=male", 10.0)
        )
        for value, (es, da) in sweep.items():
            rows.append(
                row(
                    model,
                    f"er@er_lambda={value}",
                    "seat_v1",
                    "effect_size",
                    "version=v1,pooling=mean,ddof=1",
                    "occupations-test",
                    es,
                )
            )
            rows.append(
                row(model, f"er@er_lambda={value}", "da_gender", "da_score", "association=ratio,masks=word", "all", da)
            )
        rows.append(
            row(model, "sd", "seat_v1", "effect_size", "version=v1,pooling=mean,ddof=1", "occupations-test", 0.2)
        )
    return frame(rows)


def test_tradeoff_plots_effect_size_against_one_minus_da_and_joins_sweeps_in_value_order():
    fig = figures_over_debiasing.tradeoff_figure(tradeoff_rows())
    ax = next(a for a in fig.axes if a.get_title() == "bert-base: SEAT-v1")
    got = points(ax)
    assert got["pretrained"] == pytest.approx((1.1, 3.0))  # ddof=1 variant, association=ratio, subset all
    assert got["er@er_lambda=0.5"] == pytest.approx((0.8, 5.0))
    assert got["er@er_lambda=10.0"] == pytest.approx((0.4, 20.0))
    joined = [line for line in ax.get_lines() if line.get_label() == "_er sweep"]
    assert len(joined) == 1
    np.testing.assert_allclose(joined[0].get_xdata(), [0.8, 0.6, 0.4])  # 0.5, 2.0, 10.0: numeric order
    # sd has a SEAT-v1 value but no DA-score: named as missing, not plotted
    assert "sd" not in got
    assert "missing: sd (DA-score)" in texts(fig).replace("\n", " ")
    # SEAT-v2 and logprob rows are absent: their panels say so
    assert "no SEAT-v2 (seat_v2 effect_size) rows" in texts(fig).replace("\n", " ")


def manela_rows():
    rows = []
    plain = "cutoff=0.1,probability=pair"
    values = {
        ("pretrained", "none"): (40.0, 12.0),
        ("pretrained", "all_professions"): (20.0, 13.0),
        ("online", "all_professions"): (20.0, 13.0),
        ("gpr-u", "none"): (8.0, 30.0),
        ("gpr-a", "none"): (2.0, 31.0),
    }
    for (method, online), (skew, stereo) in values.items():
        variant = plain if online == "none" else f"{plain},online_skew={online}"
        for t, shift in (("type1", 1.0), ("type2", 0.0)):
            rows.append(row("bert-base", method, "winobias", "mu_skew", variant, t, skew + shift))
            rows.append(row("bert-base", method, "winobias", "mu_stereo", variant, t, stereo + shift))
    rows.append(row("bert-base", "pretrained", "winobias", "mu_skew", f"{plain},entities=names", "type2", 99.0))
    rows.append(row("bert-base", "pretrained", "winobias", "mu_skew", "cutoff=0.2,probability=pair", "type2", 77.0))
    rows.append(row("bert-base", "pretrained", "winobias", "mu_stereo", "cutoff=0.2,probability=pair", "type2", 77.0))
    return frame(rows)


def test_skew_stereotype_points_merge_methods_that_give_the_same_point():
    pts = figures_manela2021.skew_stereotype_points(manela_rows())
    t2 = pts[pts["subset"] == "type2"].set_index("label")
    assert t2.loc["pretrained", ["mu_skew", "mu_stereo"]].tolist() == [40.0, 12.0]
    assert t2.loc["pretrained-O = online-O", ["mu_skew", "mu_stereo"]].tolist() == [20.0, 13.0]
    assert t2.loc["gpr-a", "mu_skew"] == 2.0
    assert 99.0 not in pts["mu_skew"].tolist() and 77.0 not in pts["mu_skew"].tolist()  # names / other cut-off
    fig = figures_manela2021.skew_stereotype_figure(manela_rows())
    assert fig.axes[1].get_title().startswith("WinoBias T2")  # type 2 (the paper's focus) first
    scatter = points(fig.axes[1])
    assert scatter["bert-base · gpr-u"] == (8.0, 30.0)
    markers = {label: line.get_marker() for line in fig.axes[1].get_lines() for label in [line.get_label()]}
    assert len({markers["bert-base · pretrained"], markers["bert-base · gpr-u"], markers["bert-base · gpr-a"]}) == 3
    fills = {line.get_label(): line.get_fillstyle() for line in fig.axes[1].get_lines()}
    assert fills["bert-base · pretrained"] == "full" and fills["bert-base · pretrained-O = online-O"] == "none"
    bars = [p.get_width() for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert 40.0 in bars and 12.0 in bars


def bec_rows(methods=("pretrained", "cds")):
    rows = []
    for k, method in enumerate(methods):
        for g, base in (("male", 0.5), ("female", -0.4), ("balanced", 0.1), ("all", 0.0)):
            for person, sign in (("male", 1), ("female", -1)):
                v = base * sign / (k + 1)
                rows.append(
                    row(
                        "bert-base",
                        method,
                        "bec_pro_en",
                        "association_mean",
                        "test=wilcoxon",
                        f"prof={g}/person={person}",
                        v,
                        lo=v - 0.05,
                        hi=v + 0.05,
                    )
                )
        rows.append(
            row(
                "bert-base",
                method,
                "bec_pro_en",
                "association_mean",
                "test=wilcoxon",
                "profession=nurse/person=male",
                42.0,
            )
        )
    return frame(rows)


def bar_heights(ax, colour):
    from matplotlib.colors import to_hex

    return [
        p.get_height() for p in ax.patches if isinstance(p, Rectangle) and to_hex(p.get_facecolor()) == colour.lower()
    ]


def test_association_bars_are_the_group_means_before_and_after():
    fig = figures_bartl2020.association_figure(bec_rows())
    before, after = data_axes(fig)
    assert "before (pretrained)" in before.get_title() and "cds" in after.get_title()
    assert bar_heights(before, figure_style.MALE_COLOUR) == pytest.approx([0.5, -0.4, 0.1])
    assert bar_heights(before, figure_style.FEMALE_COLOUR) == pytest.approx([-0.5, 0.4, -0.1])
    assert bar_heights(after, figure_style.MALE_COLOUR) == pytest.approx([0.25, -0.2, 0.05])
    assert "English (bec_pro_en)" in before.get_title()


def test_association_without_a_fine_tuned_method_says_the_after_side_is_missing():
    fig = figures_bartl2020.association_figure(bec_rows(methods=("pretrained",)))
    assert len(data_axes(fig)) == 1
    assert "No fine-tuned method (e.g. cds)" in texts(fig).replace("\n", " ")


def occupation_rows():
    rows = []
    biases = {"nurse": -1.0, "engineer": 0.8, "teacher": -0.2, "pilot": 0.5}
    for method, scale in (("pretrained", 1.0), ("cda", 0.25)):
        for occ, b in biases.items():
            rows.append(
                row(
                    "gpt2",
                    method,
                    "occupations",
                    "occupation_bias",
                    "scoring=next_word_loglik",
                    f"occupation/{occ}",
                    b * scale,
                )
            )
        rows.append(row("gpt2", method, "occupations", "aob", "scoring=next_word_loglik", "all", 0.625 * scale))
    return frame(rows)


def test_occupation_bars_sorted_by_the_pretrained_bias():
    fig = figures_lu2018.occupation_figure(occupation_rows())
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["nurse", "teacher", "pilot", "engineer"]
    widths = {}
    for container, label in zip(ax.containers, [t.get_text() for t in ax.get_legend().get_texts()]):
        widths[label] = [p.get_width() for p in container]
    assert widths["pretrained (AOB 0.625)"] == pytest.approx([-1.0, -0.2, 0.5, 0.8])
    assert widths["cda (AOB 0.156)"] == pytest.approx([-0.25, -0.05, 0.125, 0.2])


def test_training_curves_note_a_log_without_bias_values():
    steps = np.arange(1, 6)
    log = pd.DataFrame({"step": steps, "epoch": [1, 1, 1, 2, 2], "loss": 5.0 - steps, "bias_metric": [np.nan] * 5})
    fig = figures_lu2018.training_figure(None, {("gpt2", "cda", 1): log})
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), 5.0 - steps)
    assert len(fig.axes) == 1  # no bias axis
    assert "set training.eval_bias_every_steps" in texts(fig).replace("\n", " ")
    boundaries = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert boundaries == [3.5]  # the epoch changes between steps 3 and 4


# ------------------------------------------------------------------------------------------ missing / bad input


@pytest.mark.parametrize("spec", [s for s in F.all_specs() if not s.needs_train_logs], ids=lambda s: s.id)
def test_a_figure_whose_rows_are_absent_draws_a_placeholder_naming_them(spec, tmp_path):
    only_other = frame([row("tiny-bert", "pretrained", "crows_pairs", "metric_score", "nangia", "all", 55.0)])
    paths = spec.draw(only_other, {}, tmp_path / spec.id)
    assert all(p.exists() for p in paths)
    make = {
        "tradeoff": figures_over_debiasing.tradeoff_figure,
        "skew_stereotype": figures_manela2021.skew_stereotype_figure,
        "associations": figures_bartl2020.association_figure,
        "occupation_bias": figures_lu2018.occupation_figure,
        "bias_vs_perplexity": figures_llm_gender.llm_bias_figure,
    }[spec.id]
    message = texts(make(only_other)).replace("\n", " ")
    assert "in the summaries" in message
    assert not data_axes(make(only_other))


def test_training_curves_without_logs_draw_a_placeholder(real_summaries, tmp_path):
    paths = F.get_spec("lu2018", "training_curves").draw(real_summaries, {}, tmp_path / "t")
    assert all(p.exists() for p in paths)
    assert "No training logs" in texts(figures_lu2018.training_figure(real_summaries, {}))


@pytest.mark.parametrize("spec", F.all_specs(), ids=lambda s: f"{s.paper}/{s.id}")
def test_no_rows_at_all_is_a_value_error_naming_what_is_needed(spec, tmp_path):
    empty = pd.DataFrame(columns=list(figure_data.SUMMARY_COLUMNS))
    with pytest.raises(ValueError, match="summary.parquet|train_log.parquet"):
        spec.draw(empty, {}, tmp_path / spec.id)
    assert not list(tmp_path.iterdir())


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="lack column.*value"):
        figures_over_debiasing.tradeoff_figure(tradeoff_rows().drop(columns=["value"]))
    with pytest.raises(ValueError, match=r"\(model, method, seed\)"):
        figures_lu2018.training_figure(tradeoff_rows(), {"tiny-bert": pd.DataFrame()})


def test_aggregate_rows_averages_seeds_only_where_the_summary_has_no_mean():
    rows = [
        row("m", "cds", "b", "x", "v", "s", 1.0, seed="0", lo=0.0, hi=2.0),
        row("m", "cds", "b", "x", "v", "s", 3.0, seed="1"),
        row("m", "er", "b", "x", "v", "s", 5.0, seed="0", lo=4.0, hi=6.0),
        row("m", "sd", "b", "x", "v", "s", 7.0, seed="0"),
        row("m", "sd", "b", "x", "v", "s", 8.0, seed="mean"),
    ]
    agg = figure_data.aggregate_rows(frame(rows)).set_index("method")
    assert agg.loc["cds", "value"] == 2.0 and agg.loc["cds", "n_seeds"] == 2 and np.isnan(agg.loc["cds", "ci_low"])
    assert agg.loc["er", "value"] == 5.0 and agg.loc["er", "ci_low"] == 4.0  # one seed keeps its interval
    assert agg.loc["sd", "value"] == 8.0  # the summary's own aggregate wins
    assert len(agg) == 3


# ------------------------------------------------------------------------------------------ output files


@pytest.mark.parametrize("spec", F.all_specs(), ids=lambda s: f"{s.paper}/{s.id}")
def test_two_draws_give_identical_files(spec, real_train_logs, tmp_path):
    # the small hand-built frames keep this cheap; the real summaries are drawn above
    rows = pd.concat([tradeoff_rows(), manela_rows(), bec_rows(), occupation_rows()], ignore_index=True)
    a = spec.draw(rows, real_train_logs, tmp_path / "a" / spec.id)
    b = spec.draw(rows, real_train_logs, tmp_path / "b" / spec.id)
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes(), x.name
    svg = a[1].read_text()
    assert "<dc:date>" not in svg


def test_a_failed_save_leaves_neither_file_nor_temp(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    real = Figure.savefig

    def failing(self, fname, *args, format=None, **kwargs):
        if format == "svg":
            raise OSError("disk full")
        return real(self, fname, *args, format=format, **kwargs)

    monkeypatch.setattr(Figure, "savefig", failing)
    with pytest.raises(OSError, match="disk full"):
        F.get_spec("lu2018", "occupation_bias").draw(occupation_rows(), {}, tmp_path / "occ")
    assert list(tmp_path.iterdir()) == []
