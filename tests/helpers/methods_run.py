"""The methods workflow run that tests/workflow/test_workflow_methods.py reads: every tiny family x every method it
supports, the paper targets, on a cheap copy of config.yaml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from helpers.data_heads import write_data_heads
from helpers.paths import FIXTURES
from helpers.shipped_config import keep_benchmarks
from helpers.workflow_runs import copy_workflow
from lmbias.methods.kinds import TRAINED_METHOD_KINDS

MLM_METHODS = ["pretrained", "cds", "cda", "er", "sd", "gpr-u", "gpr-a", "online"]
OTHER_METHODS = ["pretrained", "cds", "cda", "er", "sd", "online"]
#: The authors' code (docs/methods/recipes.md) on every tiny family; Manela et al.'s GPR on
#: tiny-bert, with the WinoBias CoNLL files standing in for OntoNotes.
RECIPES = ["cds-dagender", "er-dagender", "sd-dagender", "cds-bartl"]
MANELA = ["gpr-u-manela", "gpr-a-manela"]
#: bias-bench's further methods: INLP (fitted, like sd), Dropout (trained, like cds), Self-Debias (decoding
#: time; not defined for seq2seq).
BIAS_BENCH = ["inlp", "dropout", "self_debias"]
#: bias-bench's training (recipe biasbench): packed blocks, their block CDA on the masked model, packing only on
#: GPT-2 (their run_clm.py never augments).
BIAS_BENCH_RECIPES = ["cda-biasbench", "dropout-biasbench"]
#: A LoRA method (training.adapter, lmbias.training.adapters): its folder holds the adapter, scoring loads base +
#: adapter.
LORA = "cds-lora"
GRID = {
    "tiny-bert": MLM_METHODS + RECIPES + MANELA + BIAS_BENCH + BIAS_BENCH_RECIPES,
    "tiny-roberta": MLM_METHODS,
    "tiny-gpt2": OTHER_METHODS + RECIPES + BIAS_BENCH + ["cda-biasbench", LORA],
    "tiny-bart": OTHER_METHODS + RECIPES + ["inlp", "dropout"],
}
TRAINED_KINDS = TRAINED_METHOD_KINDS  # the fine-tuned kinds (lmbias.methods.kinds)
PAIRED = "results/tables/paired/tiny-bert-cds.parquet"
TARGETS = [f"results/{m}/{k}/summary.parquet" for m, methods in GRID.items() for k in methods] + [PAIRED]
PAPERS = ["manela2021", "bartl2020", "lu2018", "over_debiasing", "meade2022"]
PAPER_TARGETS = [f"paper_{p}" for p in PAPERS]
PAPER_MODELS = ["tiny-bert", "tiny-gpt2", "tiny-bart"]
PAPER_METHODS = {
    "manela2021": ["pretrained", "online", "gpr-u", "gpr-a"],
    "bartl2020": ["pretrained", "cds"],
    "lu2018": ["pretrained", "cda"],
    "over_debiasing": ["pretrained", "cds", "er", "sd", "sd@*"],
    "meade2022": ["pretrained", "cda", "dropout", "inlp", "self_debias", "sd"],
}
#: A few of bias-bench's gender pairs (data/bias_attribute_words.json), written into the run: tests have no network.
BIAS_BENCH_WORDS = {
    "gender": [
        ["he", "she"],
        ["his", "her"],
        ["him", "her"],
        ["man", "woman"],
        ["men", "women"],
        ["father", "mother"],
        ["boy", "girl"],
        ["mr.", "mrs."],
    ]
}
BIAS_BENCH_WORDS_FILE = "bias_bench_words_test.json"
#: The grid's one sweep (Table 11 style): SentenceDebias at a second ratio of pairs, fit-only so it stays cheap.
SWEEP = "sd@ratio_of_pairs=0.5"
PUBLISHED_FIXTURES = FIXTURES / "published"
#: bias-bench's StereoSet reading (config.yaml benchmarks.stereoset-biasbench), read by Meade et al.'s tables here.
READING = "stereoset-biasbench"


def _cheap(config: dict, shared_data) -> dict:
    config["data_dir"] = str(shared_data)
    keep = {"gap", "winobias", "bec_pro_en", "seat_v1", "stereoset", "stereoset-biasbench"}
    keep_benchmarks(config, keep)
    # none: StereoSet's data is in ../shared/data (a missing file must fail here); the shipped list also
    # names perplexity_wikitext2, which this grid drops
    config["optional_benchmarks"] = []
    config["benchmarks"]["stereoset"]["bias_types"] = ["gender"]  # 255 of its 2,106 intrasentence examples
    config["benchmarks"]["stereoset-biasbench"]["bias_types"] = ["gender"]
    config["benchmarks"]["gap"]["splits"] = ["validation"]
    config["benchmarks"]["winobias"]["types"] = [1]
    config["benchmarks"]["winobias"]["scoring"]["conditions"] = ["professions_masked", "referent_masked"]
    config["benchmarks"]["winobias"]["metric"]["bootstrap"] = 0
    config["benchmarks"]["winobias"]["metric"]["alice_bob"] = False
    config["corpora"]["gap"]["interventions"] = {
        k: v
        for k, v in config["corpora"]["gap"]["interventions"].items()
        if k in ("cda-grammatical", "cds-1.0", "cds-0.9", "cds-dagender-{swap_rate}", "cda-dagender")
    }
    config["corpora"]["ontonotes"].update(
        path=str(shared_data / "winobias" / "conll_format"), pattern="dev_type1_*_conll"
    )
    for model in GRID:
        config["models"][model]["training"].update(max_steps=2, limit_examples=16, batch_size=4)
    for method in ("gpr-u", "gpr-a", *MANELA):
        config["methods"][method]["training"]["epochs"] = 2
    for method in BIAS_BENCH_RECIPES:  # their 2,000 steps of 32 x 16 blocks of 512, cut to 2 steps of 4 blocks of 64
        config["methods"][method]["training"].update(
            max_steps=2, batch_size=4, gradient_accumulation_steps=1, max_length=64
        )
    config["methods"]["cda-biasbench"]["training"]["block_augmentation_words"] = {"mlm": BIAS_BENCH_WORDS_FILE}
    # Methods whose tests read their training or fit, not their scores: WinoBias only (plus the embedding
    # benchmark where a fitted projection changes embeddings); their summaries record why the rest is left out.
    for method in ("cds-dagender", "er-dagender", "cds-bartl", *MANELA, "dropout", *BIAS_BENCH_RECIPES, LORA):
        config["methods"][method]["benchmarks"] = ["winobias"]
    for method in ("sd-dagender", "inlp"):
        config["methods"][method]["benchmarks"] = ["winobias", "seat_v1"]
    # Self-Debias: WinoBias, the StereoSet reading Meade et al.'s table reads, and SEAT (left out for a reason of its
    # own: embeddings); the every-combination test scores it on every benchmark. Our own StereoSet reading under it
    # was the run's costliest job (py-spy, 2026-11-29: 22 s of 203 on tiny-gpt2: two passes and a float64
    # rescaling over GPT-2's 50,257 tokens at every position).
    config["methods"]["self_debias"]["benchmarks"] = ["winobias", "seat_v1", READING]
    config["methods"]["sd"]["limit_sentences"] = 64
    config["methods"]["inlp"].update(limit_sentences=400, n_iterations=3, sentences_per_class=60)
    # their whitespace, case-sensitive matching of the first pairs finds few sentences in 64: all pairs, 400 sentences
    config["methods"]["sd-dagender"].update(limit_sentences=400, ratio_of_pairs=1.0)
    for method in ("cds", "er", "cds-dagender", "er-dagender", "sd-dagender"):  # the shipped Table 11 grids; only
        config["methods"][method].pop("sweep", None)  # the sd sweep below runs here
    config["methods"]["sd"]["sweep"] = {"ratio_of_pairs": [0.5]}
    config["papers"] = {p: {"models": PAPER_MODELS, "methods": PAPER_METHODS[p]} for p in PAPERS}
    # Meade et al.'s StereoSet column reads bias-bench's reading, as the shipped papers.meade2022.readings (cut to the
    # one benchmark this run scores): a scoring job for each meade pair that scores StereoSet (11), no other pair
    config["papers"]["meade2022"]["readings"] = {"stereoset": READING}
    config["comparisons"] = {
        "tiny-bert-cds": {
            "benchmark": "bec_pro_en",
            "test": "wilcoxon",
            "before": {"model": "tiny-bert", "method": "pretrained"},
            "after": {"model": "tiny-bert", "method": "cds"},
        }
    }
    # the main job's page (results/summary.md) over the same pairs as the shipped default target
    config["targets"] = {
        "models": ["tiny-bert"],
        "methods": ["pretrained", "cds", "sd"],
        "comparisons": ["tiny-bert-cds"],
    }
    return config


#: What the run builds: every pair's summary, the paired table, the paper targets and the main job's page.
RUN_TARGETS = [*TARGETS, *PAPER_TARGETS, "results/summary.md"]


#: The first lines of real data files that the run reads, where the whole file only makes it slower (py-spy of the
#: run, 2026-11-29: scoring WinoBias' 792 type-1 dev sentences was half its CPU, spaCy on GAP's validation split
#: a seventh): dataset -> {file: lines kept} (helpers.data_heads). WinoBias' pro and anti files keep their
#: line-by-line pairing; GAP's header line is one of its lines.
DATA_HEADS = {
    "winobias": {"pro_stereotyped_type1.txt.dev": 100, "anti_stereotyped_type1.txt.dev": 100},
    "gap": {"gap-validation.tsv": 151},
}


def prepare_methods_workdir(tmp_path_factory, repo_root: Path, shared_data: Path) -> Path:
    workdir = copy_workflow(repo_root, tmp_path_factory.mktemp("methods"))
    # the cheap config replaces config.yaml (a --configfile overlay can add keys but not remove benchmarks)
    config = _cheap(yaml.safe_load((workdir / "config.yaml").read_text()), shared_data)
    write_data_heads(config, shared_data, workdir / "data-heads", DATA_HEADS)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (workdir / BIAS_BENCH_WORDS_FILE).write_text(json.dumps(BIAS_BENCH_WORDS))
    for paper in PAPERS:  # the transcriptions when the checkout has them, else the test fixtures
        if not (workdir / f"resources/published/{paper}.yaml").exists():
            (workdir / "resources/published").mkdir(parents=True, exist_ok=True)
            shutil.copy(PUBLISHED_FIXTURES / f"{paper}.yaml", workdir / f"resources/published/{paper}.yaml")
    return workdir
