"""The tiny LLM grid run that tests/papers/test_llm_grid.py reads: paper_llm_gender on the shipped config cut to
tiny-llama (standing in for the 7B decoders, base and instruct) and a few items per benchmark."""

from __future__ import annotations

from pathlib import Path

import yaml

from helpers.shipped_config import keep_benchmarks
from helpers.workflow_runs import copy_workflow

METHODS = ["pretrained", "cda-lora", "cds-lora", "self_debias", "sd", "inlp"]
TINY = "tiny-llama"
KEEP = {"gap", "crows_pairs", "seat_v1", "perplexity_gap", "bold"}
#: The tiny model stands in for an instruct sibling too: BOLD's prompts go through this template (lmbias.engine.chat).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def tiny_grid_config(config: dict, shared_data) -> dict:
    """The shipped config cut to tiny-llama standing in for the decoders and a few items per benchmark."""
    config["data_dir"] = str(shared_data)
    keep_benchmarks(config, KEEP)
    config["optional_benchmarks"] = []
    config["benchmarks"]["crows_pairs"]["bias_types"] = ["gender"]
    config["benchmarks"]["perplexity_gap"]["scoring"]["limit_texts"] = 5
    config["benchmarks"]["gap"]["splits"] = ["validation"]
    config["benchmarks"]["bold"]["scoring"].update(prompts_per_group=2, max_new_tokens=8)
    config["models"][TINY].update(chat_template=CHAT_TEMPLATE, system_prompt="Answer in one sentence.")
    # naive (dictionary) swaps and the punctuation splitter: no spaCy parse in this test
    config["corpora"]["gap"]["splitter"] = "sentencizer"
    config["corpora"]["gap"]["interventions"] = {
        "cda-grammatical": {"method": "cda", "intervention": "naive", "names": False},
        "cds-1.0": {"method": "cds", "intervention": "naive", "names": False, "swap_rate": 1.0, "seed": 0},
    }
    config["models"][TINY]["training"].update(max_steps=2, limit_examples=16, batch_size=4, swap_rate=1.0)
    config["methods"]["sd"]["limit_sentences"] = 64
    config["methods"]["sd"].pop("sweep", None)
    config["methods"]["inlp"].update(limit_sentences=400, n_iterations=2, sentences_per_class=60)
    config["papers"] = {"llm_gender": {"models": [TINY], "methods": METHODS}}
    config["comparisons"] = {}
    config["targets"] = {"models": [TINY], "methods": ["pretrained"], "comparisons": []}
    return config


def prepare_llm_grid_run(tmp_path_factory, repo_root: Path, shared_data: Path) -> tuple[Path, list[str]]:
    workdir = copy_workflow(repo_root, tmp_path_factory.mktemp("llm_grid"))
    config = tiny_grid_config(yaml.safe_load((workdir / "config.yaml").read_text()), shared_data)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return workdir, ["paper_llm_gender"]
