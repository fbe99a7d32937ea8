"""The shipped config.yaml as a new user meets it (no overlay): every paper target and the default target build
their DAG, the paper grids schedule the authors' recipes, and what a user cannot have is left out by name."""

from __future__ import annotations

import re

import pytest

from helpers.workflow_runs import SCORE_MODEL_JOB, copy_workflow, run_snakemake, scheduled_files

pytestmark = pytest.mark.workflow

PAPER_TARGETS = [
    "paper_manela2021",
    "paper_bartl2020",
    "paper_lu2018",
    "paper_over_debiasing",
    "paper_meade2022",
    "paper_llm_gender",
]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, repo_root):
    return copy_workflow(repo_root, tmp_path_factory.mktemp("shipped"))


_DRY_RUNS: dict = {}


def dry_run(workdir, target):
    """One dry run per target for the module (the over-debiasing grid alone is 2,000+ jobs)."""
    if target not in _DRY_RUNS:
        _DRY_RUNS[target] = run_snakemake(workdir, "-n", *([target] if target else []))
    return _DRY_RUNS[target]


def _methods(proc) -> set[str]:
    return set(re.findall(r"wildcards: model=[^,\n]+, method=([^,\n]+)", proc.stdout + proc.stderr))


@pytest.mark.parametrize("target", PAPER_TARGETS)
def test_every_paper_target_builds_its_dag_on_the_shipped_config(shipped, target):
    proc = dry_run(shipped, target)  # run_snakemake fails the test on a non-zero exit, printing the error
    assert re.search(rf"^{target}\s+1$", proc.stdout + proc.stderr, re.M), "the target is a job of the DAG"


def test_paper_grids_schedule_the_recipes(shipped):
    over = dry_run(shipped, "paper_over_debiasing")
    methods = _methods(over)
    assert {
        "cds-dagender",
        "er-dagender",
        "sd-dagender",
        "cds-dagender@swap_rate=0.7",
        "er-dagender@er_lambda=2.0",
        "sd-dagender@ratio_of_pairs=0.4",
    } <= methods
    assert not methods & {"cds", "er", "sd"}, "the paper target compares the authors' code, not the papers' text"
    outputs = scheduled_files(over)
    assert "results/corpora/gap/cds-dagender-1.0.parquet" in outputs  # BERT and BART: swap rate 1.0
    assert "results/corpora/gap/cds-dagender-0.9.parquet" in outputs  # GPT-2: 0.9 (Table 12)
    assert "results/corpora/bartl2020/gap-flipped.parquet" in outputs  # sd-dagender fits on the flipped sentences
    bartl = dry_run(shipped, "paper_bartl2020")
    assert "cds-bartl" in _methods(bartl)
    assert "results/bert-base/cds-bartl/seed0/model" in scheduled_files(bartl)


def test_meade_grid_runs_bias_bench_recipes_on_their_four_models(shipped):
    proc = dry_run(shipped, "paper_meade2022")
    methods = _methods(proc)
    assert {
        "pretrained",
        "cda-biasbench",
        "dropout-biasbench",
        "inlp-biasbench",
        "self_debias",
        "sd-biasbench",
    } == methods
    outputs = scheduled_files(proc)
    for model in ("bert-base", "albert-base", "roberta-base", "gpt2"):
        assert f"results/{model}/dropout-biasbench/seed0/model" in outputs
        assert f"results/{model}/self_debias/summary.parquet" in outputs
    assert re.search(r"^data_bias_bench\s+1$", proc.stdout + proc.stderr, re.M)  # their CDA word list, fetched
    tables = {
        f"results/papers/meade2022/{t}.parquet," for t in ("seat_gender", "stereoset_gender", "crows_pairs_gender")
    }
    assert tables <= set(outputs)  # (a job's first output)
    # the masked models' CDA reads the word list; GPT-2's is packed only (their run_clm.py never augments)
    text = proc.stdout + proc.stderr
    bert = re.search(r"input: ([^\n]*)\n\s*output: results/bert-base/cda-biasbench/seed0/model", text)
    gpt2 = re.search(r"input: ([^\n]*)\n\s*output: results/gpt2/cda-biasbench/seed0/model", text)
    assert "bias_attribute_words.json" in bert.group(1) and "bias_attribute_words.json" not in gpt2.group(1)


#: The benchmarks a causal model is scored on (docs/llms.md, "An LLM grid"): BEC-Pro and logprob-score are masked-only.
CAUSAL_BENCHMARKS = (
    "winobias",
    "crows_pairs",
    "stereoset",
    "seat",
    "seat_v1",
    "seat_v2",
    "occupations",
    "da_gender",
    "perplexity_wikitext2",
    "perplexity_gap",
    "winogender",
    "bold",
)


def test_llm_grid_runs_lora_and_post_hoc_methods_on_every_causal_benchmark(shipped):
    """papers.llm_gender: three hub decoders and two instruct siblings (fetched, bf16 where the GPU has it),
    LoRA-CDA/CDS trained as adapters, Self-Debias, SentenceDebias and INLP fitted or decoded, each scored on every
    causal benchmark (SEAT and BOLD left out for Self-Debias), one table and one figure."""
    proc = dry_run(shipped, "paper_llm_gender")
    outputs, text = set(scheduled_files(proc)), proc.stdout + proc.stderr
    models = ("qwen2.5-7b", "qwen2.5-7b-instruct", "olmo-2-7b", "olmo-2-7b-instruct", "pythia-6.9b")
    assert _methods(proc) == {"pretrained", "cda-lora", "cds-lora", "self_debias", "sd", "inlp"}
    assert re.search(r"^fetch_hub_model\s+5$", text, re.M) and re.search(r"^finetune\s+10$", text, re.M)
    # one scoring job per (model, method, seed), each loading its model once (5 models x 6 methods, one seed)
    assert re.search(r"^score_model\s+30$", text, re.M) and not re.search(r"^score_benchmark\s", text, re.M)
    for model in models:
        assert f"results/{model}/cds-lora/seed0/model" in outputs and f"results/{model}/inlp/seed0/model" in outputs
        for bench in CAUSAL_BENCHMARKS:
            assert f"results/{model}/cda-lora/seed0/scores/{bench}.parquet" in outputs, (model, bench)
            scheduled = f"results/{model}/self_debias/seed0/scores/{bench}.parquet" in outputs
            assert scheduled == (not bench.startswith("seat") and bench != "bold"), (model, bench)
        assert not [o for o in outputs if o.startswith(f"results/{model}/") and ("bec_pro" in o or "logprob" in o)]
    assert "results/papers/llm_gender/bias_and_perplexity.parquet," in outputs  # (a job's first output)
    assert "results/plots/llm_gender/bias_vs_perplexity.png," in outputs


def test_manela_without_ontonotes_leaves_gpr_out_by_name(shipped):
    proc = dry_run(shipped, "paper_manela2021")
    text = proc.stdout + proc.stderr
    assert re.search(
        r"paper_manela2021: left out gpr-u-manela, gpr-a-manela for bert-base, .*"
        r"\(needs corpora\.ontonotes\.path: licensed OntoNotes 5\.0",
        text,
    ), text[-3000:]
    assert not any("gpr" in m for m in _methods(proc))
    assert {"pretrained", "online"} <= _methods(proc)


def test_default_target_is_a_before_and_after_grid(shipped):
    proc = dry_run(shipped, None)
    outputs = scheduled_files(proc)
    for method in ("pretrained", "cds", "sd"):
        assert f"results/tiny-bert/{method}/summary.parquet" in outputs
    assert "results/tables/paired/tiny-bert-cds.parquet" in outputs
    text = proc.stdout + proc.stderr  # one scoring job per (model, method, seed): tiny-bert x 3 methods
    assert re.search(r"^score_model\s+3$", text, re.M) and not re.search(r"^score_benchmark\s", text, re.M)
    assert re.search(r"output: results/summary\.md, results/summary\.html$", proc.stdout + proc.stderr, re.M)


BIAS_BENCH_READINGS = ("crows_pairs-biasbench", "stereoset-biasbench", "seat-biasbench")
DAGENDER_READINGS = ("seat_v1-dagender", "seat_v2-dagender", "logprob-dagender")


def test_meade_grid_scores_bias_benchs_readings(shipped):
    """papers.meade2022.readings: every pair of Meade et al.'s grid, GPT-2's included, is scored on bias-bench's
    CrowS-Pairs, StereoSet and SEAT (config.yaml *-biasbench; their options:
    tests/reproduction/test_paper_readings.py), and its seed's metrics job reads those scores; Self-Debias leaves
    SEAT out (embeddings)."""
    proc = dry_run(shipped, "paper_meade2022")
    outputs, text = set(scheduled_files(proc)), proc.stdout + proc.stderr
    for model in ("bert-base", "albert-base", "roberta-base", "gpt2"):
        for method in (
            "pretrained",
            "cda-biasbench",
            "dropout-biasbench",
            "inlp-biasbench",
            "self_debias",
            "sd-biasbench",
        ):
            for reading in BIAS_BENCH_READINGS:
                scheduled = f"results/{model}/{method}/seed0/scores/{reading}.parquet" in outputs
                assert scheduled == (not (method == "self_debias" and reading == "seat-biasbench")), (
                    model,
                    method,
                    reading,
                )
    # scored by the pair's one scoring job (its items among that job's inputs), whose manifest the metrics read
    jobs = {(m, k): inputs for inputs, m, k, _ in SCORE_MODEL_JOB.findall(text)}
    for reading in BIAS_BENCH_READINGS:
        assert f"results/data/{reading}.parquet" in jobs[("gpt2", "pretrained")], reading
    metrics = re.search(r"input: ([^\n]*)\n\s*output: results/gpt2/self_debias/seed0/metrics\.parquet", text).group(1)
    assert "results/gpt2/self_debias/seed0/scores.json" in metrics
    scored = jobs[("gpt2", "self_debias")]
    assert "data/crows_pairs-biasbench.parquet" in scored and "data/crows_pairs.parquet" in scored
    assert "seat-biasbench" not in scored


def test_over_debiasing_grid_scores_its_codes_readings_and_no_other_pair_does(shipped):
    """papers.over_debiasing.readings: the DA-Gender code's SEAT-v1, SEAT-v2 and logprob-score (not for GPT-2:
    logprob is not defined for causal models) on its pairs. A pair in two grids holds both papers' readings
    (gpt2/pretrained: Meade's too), a pair in a grid without readings none (gpt2/cda, Lu et al.), and the
    default target none at all: it costs what it did."""
    over = scheduled_files(dry_run(shipped, "paper_over_debiasing"))
    for reading in DAGENDER_READINGS:
        assert f"results/bert-base/sd-dagender/seed0/scores/{reading}.parquet" in over
        assert f"results/bart-large/cds-dagender@swap_rate=0.7/seed0/scores/{reading}.parquet" in over
    assert "results/gpt2/er-dagender/seed0/scores/seat_v2-dagender.parquet" in over
    assert "results/gpt2/er-dagender/seed0/scores/logprob-dagender.parquet" not in over
    assert not [o for o in over if any(f"/scores/{r}." in o for r in BIAS_BENCH_READINGS) and "/pretrained/" not in o]
    lu = set(scheduled_files(dry_run(shipped, "paper_lu2018")))
    assert "results/gpt2/pretrained/seed0/scores/crows_pairs-biasbench.parquet" in lu
    assert "results/gpt2/pretrained/seed0/scores/seat_v1-dagender.parquet" in lu
    assert not [o for o in lu if "/cda/" in o and any(r in o for r in BIAS_BENCH_READINGS + DAGENDER_READINGS)]
    default = scheduled_files(dry_run(shipped, None))
    assert not [o for o in default if any(r in o for r in BIAS_BENCH_READINGS + DAGENDER_READINGS)]
