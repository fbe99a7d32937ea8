"""The shipped-config run that tests/workflow/test_workflow.py reads: the shipped config.yaml's tiny models
(tiny-bert, its planted-bias twin, tiny-gpt2, tiny-bart) on every configured benchmark whose data is in
../shared/data, with a cheaper BOLD, CrowS-Pairs, StereoSet, WinoBias and GAP perplexity."""

from __future__ import annotations

from pathlib import Path

import yaml

from helpers.data_heads import write_data_heads
from helpers.workflow_runs import copy_workflow

MODELS = ["tiny-bert", "tiny-bert-he", "tiny-gpt2", "tiny-bart"]
PAIRED = "results/tables/paired/tiny-bert-vs-planted.parquet"  # config.yaml's example: tiny-bert vs tiny-bert-he
#: BOLD's generation cut for this run (its first prompts of each group, short continuations): the shipped entry
#: generates 3,204 continuations of 50 tokens on each causal and encoder-decoder model, about a minute each here.
CHEAP_BOLD = {"prompts_per_group": 8, "max_new_tokens": 16}
#: CrowS-Pairs and StereoSet cut to their gender examples (262 of 1,508 pairs; 255 of 2,106 intrasentence
#: examples): the masked models' pseudo-log-likelihoods of all nine bias types were half of this run's scoring.
GENDER_ONLY = ("crows_pairs", "stereoset")
#: WinoBias' first 100 lines of each dev file (of 396; the pro and anti files keep their line-by-line pairing): its
#: scoring on the four models was a quarter of this run (py-spy, 2026-11-29). helpers.data_heads.
#: Winogenerated's first 60 sentences (6 of 299 occupations) and BBQ's first 4 templates (32 questions of 5,672):
#: the whole of both would add half a minute of scoring per model to a run that only checks the mechanics.
DATA_HEADS = {
    "winobias": {f"{kind}_stereotyped_type{t}.txt.dev": 100 for kind in ("pro", "anti") for t in (1, 2)},
    "winogenerated": {"winogenerated_examples.jsonl": 60},
    "bbq": {"new_templates - Gender_identity.csv": 5},
}
#: GAP's perplexity over its first 8 test texts (the shipped entry: 20): a masked model's pseudo-perplexity is a
#: forward pass per token, and this benchmark was a quarter of the run's scoring (job timing files, 2026-11-29).
PERPLEXITY_TEXTS = 8


def prepare_shipped_run(tmp_path_factory, repo_root: Path, shared_data: Path) -> tuple[Path, list[str]]:
    workdir = copy_workflow(repo_root, tmp_path_factory.mktemp("wf"))
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["benchmarks"]["bold"]["scoring"].update(CHEAP_BOLD)
    for name in GENDER_ONLY:
        config["benchmarks"][name]["bias_types"] = ["gender"]
    config["benchmarks"]["perplexity_gap"]["scoring"]["limit_texts"] = PERPLEXITY_TEXTS
    write_data_heads(config, shared_data, workdir / "data-heads", DATA_HEADS)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    targets = [f"results/{m}/pretrained/summary.parquet" for m in MODELS] + [PAIRED]
    return workdir, [*targets, "--config", f"data_dir={shared_data}"]
