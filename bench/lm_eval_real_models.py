"""lm-evaluation-harness 0.4.13 and lmbias on the same real model folder: CrowS-Pairs gender, WinoGender, BBQ.

    nice -n 10 .venv/bin/python bench/lm_eval_real_models.py --model-folder DIR --model-name NAME [--chat-template]
        [--benchmarks crows_pairs,winogender,bbq] [--tol 1e-3] [--threads 2] [--lm-eval-batch-size 8]
        [--bbq-max-templates 10] [--max-tokens 2048] [--skip-plain] [--data-dir ../shared/data]

    (docs/peers.md, "Real models": SmolLM2-135M-Instruct with --chat-template, Gemma 3 270M with
    --benchmarks crows_pairs,winogender)

DIR is a saved Hugging Face folder of a causal model (config, weights, tokenizer; a GGUF file dequantized to
float32 and saved with save_pretrained, as the real models of issue 49 are). Both sides read that folder in float32:
lm-eval as `--model hf --model_args pretrained=DIR,dtype=float32` (HFLM in bench/.venv-lm-eval, installed by
bench/lm_eval_crows_pairs.py ensure_venv), lmbias through the model entry `{path: DIR, family: clm, revision: local,
dtype: fp32, precision: fp32, chat_template: true|false}` (bench/lm_eval_crows_pairs.py local_entry). The three
comparisons are those of the tiny-model benches, whose functions this script calls:

* crows_pairs (bench/lm_eval_crows_pairs.py): lm-eval's `crows_pairs_english_gender` through the local task file
  on Nangia's CSV, all 262 gender pairs, against score_crows_pairs + `metric.variant: lm_eval`; items = pairs, a
  log-likelihood per sentence; metrics pct_stereotype (equal) and likelihood_diff (within --tol). Not prompted:
  read without a chat template in every run.
* winogender (bench/lm_eval_winogender.py): lm-eval's tasks all, male, female, neutral and gotcha on the 720
  sentences of lmbias's parser against score_winogender; items = sentences, a log-likelihood per choice; metric
  each task's accuracy (equal).
* bbq (bench/lm_eval_bbq.py): lm-eval's `bbq` task (its own task file, the data replaced by the questions lmbias
  builds, written as the released jsonl) against score_bbq with `reading: lm_eval`; by default the workflow's
  stand-in `bbq-subset` (the first 10 template rows: 72 questions, --bbq-max-templates), 12 choices each; metrics
  acc, accuracy_amb, accuracy_disamb, amb_bias_score, disamb_bias_score (within 1e-9).

The prompted benchmarks (winogender, bbq) run without a chat template (lm-eval without --apply_chat_template,
lmbias `chat_template: false`) and, with --chat-template, behind the tokenizer's own template (lm-eval's
--apply_chat_template, no system instruction; lmbias `chat_template: true`, no system prompt); --skip-plain leaves
the first out.

Printed: one row per comparison (items, the largest |lmbias - lm-eval| of a per-item log-likelihood, metrics
equal, each side's wall time: lm-eval's driver process from launch to its JSON, with its interpreter start, model
load and evaluate call; lmbias's model load and scoring in this process) and the metrics of both sides.
Exit status 1 when a log-likelihood differs by more than --tol (1e-3 nats: float32 sums over a sentence on real
vocabularies; the tiny-model benches keep 1e-4) or a metric differs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lm_eval_bbq as bbq  # noqa: E402
import lm_eval_crows_pairs as crows  # noqa: E402
import lm_eval_winogender as wino  # noqa: E402

TOL = 1e-3
BENCHMARKS = ("crows_pairs", "winogender", "bbq")
#: WinoGender's five subsets of issue 49 (the tiny bench also runs gotcha_male and gotcha_female).
WINOGENDER_TASKS = [
    "winogender_all_local",
    "winogender_male_local",
    "winogender_female_local",
    "winogender_neutral_local",
    "winogender_gotcha_local",
]


def timed(call, *args, **kwargs):
    start = time.perf_counter()
    out = call(*args, **kwargs)
    return out, time.perf_counter() - start


def run_crows_pairs(folder: Path, entry: dict, python: Path, where: Path, args) -> dict:
    from lmbias.parsers import parse_crows_pairs

    csv = Path(args.data_dir) / "crows_pairs" / "crows_pairs_anonymized.csv"
    items = parse_crows_pairs(csv, bias_types=["gender"])
    where.mkdir()
    tasks = crows.task_dir(csv, where)
    theirs, their_s = timed(crows.run_theirs, python, folder, tasks, where, args.lm_eval_batch_size, 0)
    ours, our_s = timed(crows.run_ours, folder, items, 1, {**entry, "chat_template": False})
    worst, same = crows.compare(ours, theirs, args.tol)
    metrics = {m: (theirs["metrics"][m], ours["metrics"][m]) for m in ("pct_stereotype", "likelihood_diff")}
    return {
        "items": f"{items.num_rows} pairs",
        "worst": worst,
        "equal": same,
        "theirs_s": their_s,
        "ours_s": our_s,
        "metrics": metrics,
        "note": f"lmbias metric_score {ours['metrics']['metric_score']:.2f}",
    }


def run_winogender(folder: Path, entry: dict, python: Path, where: Path, args, chat: bool) -> dict:
    from lmbias.parsers.winogender import parse_winogender

    data = Path(args.data_dir) / "winogender"
    items = parse_winogender(data / "all_sentences.tsv", data / "templates.tsv", data / "occupations-stats.tsv")
    where.mkdir()
    tasks = wino.task_dir(wino.write_data(items, where), where)
    theirs, their_s = timed(
        wino.run_lm_eval, python, folder, tasks, where, args.lm_eval_batch_size, WINOGENDER_TASKS, chat
    )
    (scores, _), our_s = timed(wino.ours, items, folder, entry={**entry, "chat_template": chat})
    label = f"{args.model_name}{' + chat template' if chat else ''}"
    result = wino.compare(label, items, scores, theirs, WINOGENDER_TASKS, args.tol)
    return {
        "items": f"{items.num_rows} sentences",
        "worst": result["worst"],
        "equal": all(abs(a - b) < 1e-12 for a, b in result["acc"].values()),
        "theirs_s": their_s,
        "ours_s": our_s,
        "metrics": {t.removeprefix("winogender_").removesuffix("_local"): v for t, v in result["acc"].items()},
        "note": f"chat provenance {scores.schema.metadata.get(b'lmbias.chat', b'').decode()}" if chat else "",
    }


def run_bbq(folder: Path, entry: dict, python: Path, where: Path, args, chat: bool) -> dict:
    from lmbias.parsers.bbq import FILES, parse_bbq

    data = Path(args.data_dir) / "bbq"
    items = parse_bbq(*(data / f for f in FILES), seed=0, max_templates=args.bbq_max_templates or None)
    tasks = bbq.task_dir(items, where)
    theirs, their_s = timed(bbq.run_theirs, python, folder, tasks, where, args.lm_eval_batch_size, 1, chat)
    ours, our_s = timed(bbq.run_ours, folder, items, 1, {**entry, "chat_template": chat})
    result = bbq.compare(ours, theirs, args.tol)
    note = (
        f"questions whose chosen answer differs: {result['argmax_differs']}; lm-eval counts two biased answers "
        f"and the model named a person: {result['two_biased_named']}"
    )
    return {
        "items": f"{items.num_rows} questions",
        "worst": result["worst"],
        "equal": all(d <= bbq.METRIC_TOL for d in result["metric_diffs"].values()),
        "theirs_s": their_s,
        "ours_s": our_s,
        "metrics": {m: (theirs["metrics"][m], ours["metrics"][m]) for m in bbq.METRICS},
        "note": note,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-folder", required=True, type=Path, help="a saved Hugging Face causal model folder")
    ap.add_argument("--model-name", required=True, help="the model's name in the table")
    ap.add_argument(
        "--chat-template", action="store_true", help="also run WinoGender and BBQ behind the tokenizer's template"
    )
    ap.add_argument("--skip-plain", action="store_true", help="WinoGender and BBQ behind the chat template only")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="any of " + ", ".join(BENCHMARKS))
    ap.add_argument("--tol", type=float, default=TOL, help="largest |difference| of a log-likelihood, nats")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of both sides")
    ap.add_argument("--lm-eval-batch-size", type=int, default=8)
    ap.add_argument(
        "--bbq-max-templates", type=int, default=10, help="BBQ's first N template rows (10: bbq-subset; 0: all)"
    )
    ap.add_argument(
        "--max-tokens", type=int, default=2048, help="lmbias's padded tokens per forward pass (no number depends on it)"
    )
    ap.add_argument(
        "--data-dir", default=os.environ.get("LMBIAS_TEST_DATA", str(crows.ROOT.parent / "shared" / "data"))
    )
    args = ap.parse_args(argv)
    wanted = args.benchmarks.split(",")
    if unknown := set(wanted) - set(BENCHMARKS):
        ap.error(f"--benchmarks: unknown {sorted(unknown)}")
    if args.skip_plain and not args.chat_template:
        ap.error("--skip-plain leaves nothing of WinoGender and BBQ without --chat-template")
    import torch

    from lmbias.engine.batching import scoring_budget

    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the lm-eval processes inherit it
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    folder = args.model_folder.resolve()
    entry = crows.local_entry(folder, chat_template=args.chat_template)
    python = crows.ensure_venv()
    chats = ([False] if not args.skip_plain else []) + ([True] if args.chat_template else [])
    print(
        f"lm-eval {crows.LM_EVAL.split('==')[1]} (--model hf, dtype float32, batch size {args.lm_eval_batch_size}) vs "
        f"lmbias (entry {entry}, max_tokens {args.max_tokens}) on {args.model_name} ({folder}); torch threads "
        f"{args.threads}; tolerance {args.tol:g} nats",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="lmeval-real-") as tmp, scoring_budget(args.max_tokens):
        where = Path(tmp)
        for name in wanted:
            for chat in [False] if name == "crows_pairs" else chats:
                label = "chat template" if chat else "none"
                print(f"\n# {name}, chat template: {label}", flush=True)
                place = where / f"{name}-{int(chat)}"
                if name == "crows_pairs":
                    result = run_crows_pairs(folder, entry, python, place, args)
                elif name == "winogender":
                    result = run_winogender(folder, entry, python, place, args, chat)
                else:
                    result = run_bbq(folder, entry, python, place, args, chat)
                rows.append((name, label, result))
                print(
                    f"  {name} ({label}): {result['items']}, max |diff| {result['worst']:.2e}, metrics "
                    f"{'equal' if result['equal'] else 'DIFFERENT'}, lm-eval {result['theirs_s']:.0f} s, "
                    f"lmbias {result['ours_s']:.0f} s",
                    flush=True,
                )
    print(f"\n## {args.model_name}: lm-eval {crows.LM_EVAL.split('==')[1]} and lmbias on the same folder\n")
    print(
        "| benchmark | chat template | items | largest \\|diff\\| of a log-likelihood (nats) | metrics equal | "
        "lm-eval wall (s) | lmbias wall (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    ok = True
    for name, label, r in rows:
        good = r["worst"] <= args.tol and r["equal"]
        ok &= good
        print(
            f"| {name} | {label} | {r['items']} | {r['worst']:.1e} | {'yes' if r['equal'] else 'NO'} | "
            f"{r['theirs_s']:.0f} | {r['ours_s']:.0f} |"
        )
    print("\nMetrics, lm-eval / lmbias:\n")
    for name, label, r in rows:
        cells = ", ".join(f"{m} {a:.4f} / {b:.4f}" for m, (a, b) in r["metrics"].items())
        print(f"- {name} ({label}): {cells}{'; ' + r['note'] if r['note'] else ''}")
    print("\n$ " + " ".join(["bench/lm_eval_real_models.py", *(argv if argv is not None else sys.argv[1:])]))
    print("OK: equal" if ok else f"FAILED: a log-likelihood differs by more than {args.tol:g} or a metric differs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
