"""lm-evaluation-harness's BBQ (multiple choice) side by side with lmbias's `lm_eval` reading: same numbers, and speed.

    .venv/bin/python bench/lm_eval_bbq.py [--data-dir ../shared/data/bbq] [--items 1000] [--timing-items 16]
        [--layers-1b 16] [--batch-sizes 1,8,64] [--repeats 1] [--timing-models gpt2,llama] [--threads 2]
        [--skip-numbers] [--skip-timing]
    (docs/development/performance.md: --skip-timing, --items 0 --skip-timing; --skip-numbers with --layers-1b 16
    --timing-items 8 --timing-models llama, with --layers-1b 4 --timing-items 16, and with --timing-models gpt2
    --timing-items 16 --repeats 3)

1. Installs lm-eval (pinned, bench/lm_eval_crows_pairs.py's LM_EVAL) into bench/.venv-lm-eval, once.
2. Builds BBQ's gender-identity questions from the authors' templates (lmbias.parsers.bbq parse_bbq, seed 0: 5,672
   questions) and writes them as the released file's JSON lines (write_jsonl); runs lm-eval's own `bbq` task on them
   through a local task file (bench/lm_eval/bbq_local.yaml: lm-eval's bbq_multiple_choice.yaml included whole, so
   its prompt "{context}\\n\\nQ: {question}\\nA:", its twelve choices (the two people's answers, then HELM's ten
   "unknown" strings), target, process_docs, process_results and aggregations are lm-eval's own functions; only the
   data source is the local jsonl, no hub) in that venv (bench/lm_eval/bbq_driver.py, which times its phases).
3. Scores the same questions with lmbias: score_bbq with `scoring: {reading: lm_eval, batch_size: 64}` (the prompt
   read once per question for its twelve continuations, lmbias.engine.prefix_cache) and bbq_metric_rows with
   BBQOptions(bootstrap=0, no_biased_answers="zero", biased="lm_eval"): lm-eval's 0 where no answer is biased, and
   its biased answers (both people of a same-gender pair's non-negative question, lmbias.metrics.bbq).
4. Compares every choice's log-likelihood (|ours - lm-eval's| <= 1e-4, twelve per question) and the five metrics of
   lm-eval's task (acc, accuracy_amb, accuracy_disamb, amb_bias_score, disamb_bias_score: ours, in %, / 100 against
   lm-eval's fractions, 1e-9).

Numbers: tiny-gpt2 and tiny-llama (lmbias.engine.tiny, seed 0), lm-eval at batch size 64, on --items questions
evenly spaced over the file (question i * 5,672 // N for i < N). The default, 1,000, holds 250 of each of the four
variants (neg/nonneg x ambig/disambig) and 59 of the 60 templates, and takes about 2 minutes on a 2-core machine;
--items 0 checks all 5,672 (about 11 minutes: lm-eval's 68,064 requests are most of it).
Timing (unless --skip-timing; --timing-items questions evenly spaced over the file, each 12 loglikelihood requests;
both sides on the same ones, one after the other in this run): randomly initialised models (seed 0,
bench/lm_eval_crows_pairs.py build_models) of GPT-2's size (124M) and of Llama-3.2-1B's width (--layers-1b of its 16
layers), both with the tiny model's tokenizer; --timing-models picks which. lm-eval at each of --batch-sizes (its
best is the speed-up's reference), lmbias at batch 64. Reported per side: process start (interpreter + imports),
model load (every weight read once), scoring (lm-eval: its loglikelihood requests; lmbias: the score_bbq call; the
fastest of --repeats runs each), questions/s of the scoring, and what the model read in one scoring run (forward
passes and tokens through it, padding included; a forward pre-hook on each side). Cost on a 2-core CPU: lm-eval
reads each question's prompt once per continuation, about 9 s per question and batch size on the 16-layer model,
4 s on 4 layers, 1 s on GPT-2's size; the defaults (1,000 questions checked, 16 timed, one run) take about 20
minutes.

Exit status 1 when a choice's log-likelihood differs by more than 1e-4 (--tol) or a metric by more than 1e-9. The
check also prints the questions whose chosen answer differs and those where lm-eval's process_docs finds two biased
answers (8 of the 5,672, same-gender pairs: lmbias's target_loc is -1 there, and `metric.biased: lm_eval` counts
both, as lm-eval does) and the model named a person.
Real model folders (SmolLM2 behind its chat template or not, Gemma 3): bench/lm_eval_real_models.py, which reuses
these functions.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm_eval_crows_pairs import (  # noqa: E402
    LM_EVAL,
    ROOT,
    TASK_SRC,
    VENV,
    build_models,
    ensure_venv,
    local_entry,
    run_driver,
    seconds_since_process_start,
    touch_weights,
)

TOL = 1e-4
METRIC_TOL = 1e-9
METRICS = ("acc", "accuracy_amb", "accuracy_disamb", "amb_bias_score", "disamb_bias_score")
SCORING = {"reading": "lm_eval", "batch_size": 64}


def evenly_spaced(items, n: int):
    """n questions spread evenly over the file (every N/n-th, from the first); all of them when n is 0 or >= N."""
    if n <= 0 or n >= items.num_rows:
        return items
    return items.take([i * items.num_rows // n for i in range(n)])


def task_dir(items, where: Path) -> Path:
    """The questions as the released jsonl and bbq_local.yaml pointing at it and at lm-eval's own bbq task file."""
    from lmbias.parsers.bbq_jsonl import write_jsonl

    out = where / "task"
    out.mkdir(parents=True)
    jsonl = write_jsonl(items, where / "bbq_gender.jsonl")
    (lm_eval_yaml,) = glob.glob(str(VENV / "lib" / "python3*" / "site-packages" / "lm_eval" / "tasks" / "bbq"
                                    / "bbq_multiple_choice.yaml"))  # fmt: skip
    text = (TASK_SRC / "bbq_local.yaml").read_text(encoding="utf-8")
    text = text.replace("LM_EVAL_BBQ_YAML", lm_eval_yaml).replace("JSONL_PATH", str(jsonl))
    (out / "bbq_local.yaml").write_text(text, encoding="utf-8")
    return out


def run_theirs(
    python: Path, model: Path, tasks: Path, where: Path, batch_size: int, repeats: int = 1, chat: bool = False
) -> dict:
    """lm-eval's bbq task on the questions of `tasks`; `chat`: --apply_chat_template (the tokenizer's template)."""
    out = where / f"lm_eval-{model.name}-bs{batch_size}{'-chat' if chat else ''}.json"
    args = [model, tasks, out, batch_size, repeats, int(chat)]
    run_driver(python, "bbq_driver.py", args, where, model.name)
    result = json.loads(out.read_text())
    result["questions"] = {int(k): v for k, v in result["questions"].items()}
    return result


def run_ours(model_dir: Path, items, repeats: int = 1, entry: dict | None = None) -> dict:
    from lmbias.benchmarks.bbq import score_bbq
    from lmbias.engine.lm import LanguageModel
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model

    t0 = time.perf_counter()
    entry = entry or local_entry(model_dir)
    model, tok = load_model(model_spec(model_dir.name, entry))
    touch_weights(model)
    load_s = time.perf_counter() - t0
    read = {"passes": 0, "rows": 0, "tokens": 0}
    runs: list[float] = []

    def count_input(module, args, kwargs):
        ids = args[0] if args else kwargs["input_ids"]
        if not runs:  # the first run only
            read["passes"] += 1
            read["rows"] += ids.shape[0]
            read["tokens"] += ids.numel()

    hook = model.register_forward_pre_hook(count_input, with_kwargs=True)
    for _ in range(repeats):
        t0 = time.perf_counter()
        scores = score_bbq(
            items, LanguageModel(model, tok, "clm", model_entry=entry, model_name=model_dir.name), SCORING
        )
        runs.append(time.perf_counter() - t0)
    hook.remove()
    del model
    questions = {
        eid: {"ll": ll, "chosen": chosen, "person": predicted != unknown}
        for eid, ll, chosen, predicted, unknown in zip(
            *(scores.column(c).to_pylist() for c in ("example_id", "choice_scores", "chosen", "predicted")),
            scores.column("unknown_loc").to_pylist(),
        )
    }
    return {
        "model_load_s": load_s,
        "score_s": min(runs),
        "read": read,
        "metrics": metrics_of(scores),
        "questions": questions,
        "scores": scores,
    }


def metrics_of(scores) -> dict[str, float]:
    """The five metrics of lm-eval's task from lmbias's rows (subset all), as fractions."""
    from lmbias.metrics.bbq import BBQOptions, bbq_metric_rows

    rows = bbq_metric_rows(scores, BBQOptions(bootstrap=0, no_biased_answers="zero", biased="lm_eval"))
    return {r["metric"]: r["value"] / 100 for r in rows if r["subset"] == "all" and r["metric"] in METRICS}


def compare(ours: dict, theirs: dict, tol: float = TOL) -> dict:
    """Max |difference| over every choice's log-likelihood, each metric's |difference|, and the questions whose
    argmax differs (a near tie) or where lm-eval counts two biased answers and the model named a person."""
    if set(ours["questions"]) != set(theirs["questions"]):
        raise SystemExit(f"questions differ: lmbias {len(ours['questions'])}, lm-eval {len(theirs['questions'])}")
    worst, argmax_differs, two_biased_named = 0.0, 0, 0
    for eid, mine in ours["questions"].items():
        other = theirs["questions"][eid]
        worst = max(worst, max(abs(a - b) for a, b in zip(mine["ll"], other["ll"], strict=True)))
        argmax_differs += mine["chosen"] != max(range(12), key=lambda k: (other["ll"][k], -k))
        two_biased_named += len(other["biased"]) == 2 and mine["person"]
    diffs = {m: abs(ours["metrics"][m] - theirs["metrics"][m]) for m in METRICS}
    ok = worst <= tol and all(d <= METRIC_TOL for d in diffs.values())
    return {
        "worst": worst,
        "metric_diffs": diffs,
        "argmax_differs": argmax_differs,
        "two_biased_named": two_biased_named,
        "ok": ok,
    }


def numbers(items, models, python, where, args) -> bool:
    subset = evenly_spaced(items, args.items)
    tasks = task_dir(subset, where / "numbers")
    print(f"\n## Numbers ({subset.num_rows} questions, {12 * subset.num_rows} choices; lm-eval at batch size 64)\n")
    print("| model | max abs diff per choice | " + " | ".join(f"{m} lm-eval / lmbias" for m in METRICS) + " | |")
    print("|---|---|" + "---|" * len(METRICS) + "---|")
    ok = True
    for name in ("tiny-gpt2", "tiny-llama"):
        theirs = run_theirs(python, models[name], tasks, where, 64)
        ours = run_ours(models[name], subset)
        result = compare(ours, theirs, args.tol)
        ok &= result["ok"]
        cells = " | ".join(f"{theirs['metrics'][m]:.6f} / {ours['metrics'][m]:.6f}" for m in METRICS)
        print(f"| {name} | {result['worst']:.2e} | {cells} | {'equal' if result['ok'] else 'DIFFERENT'} |")
        if not result["ok"] or result["argmax_differs"] or result["two_biased_named"]:
            differs = {m: f"{d:.2e}" for m, d in result["metric_diffs"].items() if d > METRIC_TOL}
            print(
                f"  {name}: metrics that differ (|lm-eval - lmbias / 100|): {differs or 'none'}; questions whose "
                f"chosen answer differs: {result['argmax_differs']}; questions where lm-eval counts two biased "
                f"answers and the model named a person: {result['two_biased_named']}"
            )
    return ok


def timing(items, models, python, where, args, ours_start: float) -> bool:
    subset = evenly_spaced(items, args.timing_items)
    n = subset.num_rows
    tasks = task_dir(subset, where / "timing")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(
        f"\n## Speed ({n} questions evenly spaced over the file = {12 * n} loglikelihood requests; CPU, "
        f"{args.threads} threads; seconds; scoring: the fastest of {args.repeats} runs)\n"
    )
    print(
        "| model | side | process start | model load | scoring | questions/s | lmbias's speed-up | "
        "model read: passes / tokens | max abs diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    wanted = args.timing_models.split(",")
    for name in [m for m in models if not m.startswith("tiny-") and any(m.startswith(w) for w in wanted)]:
        ours = run_ours(models[name], subset, args.repeats)
        ours_rate = n / ours["score_s"]
        read = f"{ours['read']['passes']} / {ours['read']['tokens']:,}"
        print(
            f"| {name} | lmbias (batch 64) | {ours_start:.1f} | {ours['model_load_s']:.1f} | {ours['score_s']:.1f} | "
            f"{ours_rate:.2f} | | {read} | |",
            flush=True,
        )
        rates = {}
        for bs in batch_sizes:
            theirs = run_theirs(python, models[name], tasks, where, bs, args.repeats)
            result = compare(ours, theirs, args.tol)
            ok &= result["ok"]
            rates[bs] = n / theirs["loglikelihood_s"]
            read = f"{theirs['read']['passes']} / {theirs['read']['tokens']:,}"
            print(
                f"| {name} | lm-eval (batch {bs}) | {theirs['process_start_s']:.1f} | {theirs['model_load_s']:.1f} | "
                f"{theirs['loglikelihood_s']:.1f} | {rates[bs]:.2f} | {ours_rate / rates[bs]:.2f}x | {read} | "
                f"{result['worst']:.1e} |",
                flush=True,
            )
        best = max(rates, key=rates.get)
        print(
            f"| {name} | **lmbias / lm-eval at its best batch size ({best})** | | | | | "
            f"**{ours_rate / rates[best]:.2f}x** | | |",
            flush=True,
        )
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "bbq"))
    ap.add_argument("--items", type=int, default=1000, help="questions of the numbers check, evenly spaced; 0: all")
    ap.add_argument("--timing-items", type=int, default=16, help="questions timed, evenly spaced over the file")
    ap.add_argument("--layers-1b", type=int, default=16, help="layers of the 1B-width model (Llama-3.2-1B: 16)")
    ap.add_argument("--batch-sizes", default="1,8,64", help="lm-eval's batch sizes timed (its best is reported)")
    ap.add_argument("--repeats", type=int, default=1, help="timed scoring runs per side (the fastest is reported)")
    ap.add_argument("--timing-models", default="gpt2,llama", help="models timed: gpt2 (124M), llama (1B width)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-numbers", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--tol", type=float, default=TOL, help="largest |difference| of a log-likelihood, nats")
    args = ap.parse_args(argv)
    import torch

    import lmbias.benchmarks.bbq  # noqa: F401  (what the scoring imports: part of our process start)
    import lmbias.engine.models  # noqa: F401
    from lmbias.parsers.bbq import FILES, parse_bbq

    ours_start = seconds_since_process_start()  # interpreter start + imports
    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the lm-eval process inherits it
    items = parse_bbq(*(Path(args.data_dir) / f for f in FILES), seed=0)
    python = ensure_venv()
    ok = True
    with tempfile.TemporaryDirectory(prefix="lmeval-bbq-") as tmp:
        where = Path(tmp)
        models = build_models(where, args.layers_1b, not args.skip_timing)
        print(
            f"lm-eval {LM_EVAL.split('==')[1]} `bbq` (multiple choice) vs lmbias `bbq` reading lm_eval, "
            f"{items.num_rows} gender-identity questions (parse_bbq seed 0, {args.data_dir}); "
            f"torch threads {args.threads}"
        )
        if not args.skip_numbers:
            ok &= numbers(items, models, python, where, args)
        if not args.skip_timing:
            ok &= timing(items, models, python, where, args, ours_start)
    print(
        "\nProcess start: interpreter start to the imports done (lmbias: torch + its scoring modules, from /proc; "
        "lm-eval: torch + lm_eval's evaluator, HFLM and tasks, from the launch). Scoring: lmbias's score_bbq call; "
        "lm-eval's loglikelihood requests (its whole evaluate call is in the driver's JSON). Speed-up: lmbias "
        "questions/s over lm-eval's."
    )
    print(
        "\n$ " + " ".join([".venv/bin/python", "bench/lm_eval_bbq.py", *(argv if argv is not None else sys.argv[1:])])
    )
    print("OK: equal" if ok else "FAILED: a log-likelihood or a metric differs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
