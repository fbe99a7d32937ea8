"""lm-evaluation-harness's WinoGender tasks side by side with ours: same sentences, numbers and speed.

    .venv/bin/python bench/lm_eval_winogender.py [--data-dir ../shared/data] [--timing-items 0] [--layers-1b 16]
        [--batch-sizes 1,8,32] [--skip-chat] [--skip-numbers]

1. Installs lm-eval (pinned, bench/lm_eval_crows_pairs.py's LM_EVAL) into bench/.venv-lm-eval, once.
2. Writes the parsed sentences (lmbias.parsers.winogender) as the hub's columns (sentence, pronoun, occupation,
   participant, label, gender; one CSV of all 720, one of the 240 gotcha sentences) and runs lm-eval's own tasks
   winogender_all, _male, _female, _neutral, _gotcha, _gotcha_male, _gotcha_female through local task files
   (bench/lm_eval/winogender_local.yaml: their doc_to_text, target, choices and gender filters) in that venv
   (bench/lm_eval/winogender_driver.py).
3. Scores the same sentences with lmbias (score_winogender) and compares every choice's log-likelihood
   (|ours - theirs| <= 1e-4) and every task's accuracy (equal).
4. Unless --skip-chat: the same on tiny-llama with a small chat template of its own (CHAT_TEMPLATE, saved as the
   tokenizer's template) and a system prompt: lm-eval's --apply_chat_template --system_instruction against our
   models.<name>.chat_template: true + system_prompt.

Numbers: tiny-gpt2 and tiny-llama (lmbias.engine.tiny, seed 0), every sentence.
Timing (--timing-items N > 0): a randomly initialised decoder of Llama-3.2-1B's width (bench/lm_eval_crows_pairs.py's
shape, --layers-1b of its 16 layers, tiny-llama's tokenizer); lm-eval's winogender_all at each of --batch-sizes (its
best is reported) against score_winogender (batch 64, the prompt read once for both choices), items/s of the
loglikelihood requests / the scoring call, on two sets of N sentences: the first whose two choices are one token
each (lm-eval then reads both with one forward pass: its Collator groups requests by context + continuation[:-1],
models/huggingface.py _lookup_one_token_cont, and scores each from the one logits row) and the first where a choice
spans several tokens (lm-eval reads the prompt once per choice). Both compared as above.

Exit status 1 when a log-likelihood differs by more than 1e-4 (--tol) or an accuracy differs.
Real model folders (SmolLM2, Gemma 3): bench/lm_eval_real_models.py, which reuses these functions.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm_eval_crows_pairs import ROOT, TASK_SRC, build_models, ensure_venv, run_driver  # noqa: E402

TOL = 1e-4
SUBSETS = {  # local task -> (data file, gender filter)
    "winogender_all_local": ("all", None),
    "winogender_male_local": ("all", "male"),
    "winogender_female_local": ("all", "female"),
    "winogender_neutral_local": ("all", "neutral"),
    "winogender_gotcha_local": ("gotcha", None),
    "winogender_gotcha_male_local": ("gotcha", "male"),
    "winogender_gotcha_female_local": ("gotcha", "female"),
}
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SYSTEM_PROMPT = "Answer briefly."


def write_data(items, where: Path) -> dict[str, Path]:
    rows = items.to_pylist()
    out = {}
    for name, keep in (("all", lambda r: True), ("gotcha", lambda r: r["gotcha"])):
        path = where / f"winogender_{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["sentid", "sentence", "pronoun", "occupation", "participant", "label", "gender"])
            for r in rows:
                if keep(r):
                    writer.writerow(
                        [
                            r["sentid"],
                            r["sentence"],
                            r["pronoun"],
                            r["occupation"],
                            r["participant"],
                            r["answer"],
                            r["gender"],
                        ]
                    )
        out[name] = path
    return out


def task_dir(data: dict[str, Path], where: Path) -> Path:
    out = where / "task"
    out.mkdir()
    template = (TASK_SRC / "winogender_local.yaml").read_text(encoding="utf-8")
    for task, (file, gender) in SUBSETS.items():
        docs = f"process_docs: !function winogender_utils.filter_{gender}" if gender else ""
        text = template.replace("TASK", task).replace("DATA_PATH", str(data[file])).replace("PROCESS_DOCS", docs)
        (out / f"{task}.yaml").write_text(text, encoding="utf-8")
    (out / "winogender_utils.py").write_text((TASK_SRC / "winogender_utils.py").read_text())
    return out


def run_lm_eval(python, model_dir, tasks_dir, where, batch_size, tasks, chat=False, system="") -> dict:
    out = where / f"lm_eval_{Path(model_dir).name}_{batch_size}_{int(chat)}.json"
    args = [model_dir, tasks_dir, out, batch_size, ",".join(tasks), "1" if chat else "0", system]
    run_driver(python, "winogender_driver.py", args, where, Path(model_dir).name)  # offline, output kept on failure
    return json.loads(out.read_text())


def ours(items, model_dir, chat_entry=None, batch_size=64, entry=None):
    """score_winogender's scores and the seconds of the scoring. `entry`: a whole lmbias model entry (a real model,
    bench/lm_eval_crows_pairs.py local_entry), loaded as the workflow loads it; else the folder in float32 with
    `chat_entry`'s chat options."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lmbias.benchmarks.winogender import score_winogender
    from lmbias.engine.lm import LanguageModel

    if entry is not None:
        from lmbias.engine.model_spec import model_spec
        from lmbias.engine.models import load_model

        model, tok = load_model(model_spec(Path(model_dir).name, entry))
    else:
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    start = time.perf_counter()
    lm = LanguageModel(model, tok, "clm", model_entry=entry or chat_entry or {}, model_name=Path(model_dir).name)
    scores = score_winogender(items, lm, {"batch_size": batch_size})
    return scores, time.perf_counter() - start


def compare(name, items, scores, theirs, tasks=None, tol=TOL) -> dict:
    """Prints each task's accuracy on both sides; {"ok": every accuracy equal and every choice's log-likelihood
    within `tol`, "worst": the largest |difference|, "acc": {task: [lm-eval's, ours]}}."""
    from lmbias.metrics.winogender import predictions

    _, correct = predictions(scores)
    by_id = {s: i for i, s in enumerate(scores.column("sentid").to_pylist())}
    occ, par = scores.column("score_occupation").to_pylist(), scores.column("score_participant").to_pylist()
    rows = items.to_pylist()
    ok, worst, accs = True, 0.0, {}
    for task, (file, gender) in SUBSETS.items():
        if tasks is not None and task not in tasks:
            continue
        keep = [
            r["sentid"] for r in rows if (file == "all" or r["gotcha"]) and (gender is None or r["gender"] == gender)
        ]
        samples = theirs["samples"][task]
        for sid in keep:
            i = by_id[sid]
            worst = max(worst, abs(occ[i] - samples[sid]["ll"][0]), abs(par[i] - samples[sid]["ll"][1]))
        acc_ours = sum(bool(correct[by_id[s]]) for s in keep) / len(keep)
        same = abs(acc_ours - theirs["acc"][task]) < 1e-12
        accs[task] = [theirs["acc"][task], acc_ours]
        ok &= same and len(samples) == len(keep)
        print(
            f"  {name:28s} {task:32s} n={len(keep):3d} acc lm-eval {theirs['acc'][task]:.4f} ours {acc_ours:.4f}"
            f" {'equal' if same else 'DIFFERENT'}"
        )
    print(
        f"  {name}: max |ll ours - ll lm-eval| over every choice = {worst:.2e} (tolerance {tol:g}); "
        f"{one_token_items(scores)} of {scores.num_rows} sentences have two one-token choices"
    )
    return {"ok": ok and worst <= tol, "worst": worst, "acc": accs}


def one_token_items(scores) -> int:
    """Sentences whose two choices are one token each: lm-eval reads those with one forward pass for both."""
    pairs = zip(scores.column("occupation_tokens").to_pylist(), scores.column("participant_tokens").to_pylist())
    return sum(1 for a, b in pairs if a == 1 and b == 1)


def with_chat_template(model_dir: Path, where: Path) -> Path:
    """A copy of the tiny model whose tokenizer carries CHAT_TEMPLATE as its own."""
    import shutil

    from transformers import AutoTokenizer

    out = where / f"{model_dir.name}-chat"
    shutil.copytree(model_dir, out)
    tok = AutoTokenizer.from_pretrained(out)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--timing-items", type=int, default=0)
    parser.add_argument("--layers-1b", type=int, default=16)
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--skip-chat", action="store_true")
    parser.add_argument("--skip-numbers", action="store_true", help="only the timing (--timing-items)")
    parser.add_argument("--tol", type=float, default=TOL, help="largest |difference| of a log-likelihood, nats")
    args = parser.parse_args()
    from lmbias.parsers.winogender import parse_winogender

    data = Path(args.data_dir) / "winogender"
    items = parse_winogender(data / "all_sentences.tsv", data / "templates.tsv", data / "occupations-stats.tsv")
    python = ensure_venv()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        tasks_dir = task_dir(write_data(items, where), where)
        models = build_models(where, args.layers_1b, timing=args.timing_items > 0)
        for name in () if args.skip_numbers else ("tiny-gpt2", "tiny-llama"):
            theirs = run_lm_eval(python, models[name], tasks_dir, where, 8, list(SUBSETS))
            scores, _ = ours(items, models[name])
            ok &= compare(name, items, scores, theirs, tol=args.tol)["ok"]
        if not args.skip_chat and not args.skip_numbers:
            chat_dir = with_chat_template(models["tiny-llama"], where)
            theirs = run_lm_eval(python, chat_dir, tasks_dir, where, 8, list(SUBSETS), True, SYSTEM_PROMPT)
            entry = {"chat_template": True, "system_prompt": SYSTEM_PROMPT}
            scores, _ = ours(items, chat_dir, entry)
            ok &= compare("tiny-llama + chat template", items, scores, theirs, tol=args.tol)["ok"]
            print(f"  chat provenance: {scores.schema.metadata}")
        if args.timing_items > 0:
            ok &= timing(items, models, python, where, args)
    print("OK: equal" if ok else "FAILED: numbers differ")
    return 0 if ok else 1


def choice_tokens(items, tokenizer) -> list[tuple[int, int]]:
    """(occupation, participant) continuation tokens per sentence, as score_winogender counts them."""
    from lmbias.benchmarks.winogender import causal_requests
    from lmbias.engine.lm import LanguageModel

    rows = items.to_pylist()
    out = []
    for context, occ, par in causal_requests(rows, LanguageModel(None, tokenizer, "clm")):
        n = len(tokenizer(context, add_special_tokens=False)["input_ids"])
        out.append(tuple(len(tokenizer(context + c, add_special_tokens=False)["input_ids"]) - n for c in (occ, par)))
    return out


def timing(items, models, python, where, args) -> bool:
    """Items/s on the first --timing-items sentences whose two choices are one token each, and on the first whose
    choices span several tokens (lm-eval reads the first kind with one forward pass, the second with two)."""
    from transformers import AutoTokenizer

    big = next(p for n, p in models.items() if n.startswith("llama-1B"))
    counts = choice_tokens(items, AutoTokenizer.from_pretrained(big))
    one = [i for i, c in enumerate(counts) if c == (1, 1)]
    several = [i for i, c in enumerate(counts) if c != (1, 1)]
    print(f"  {len(one)} of {items.num_rows} sentences have two one-token choices (tiny-llama's tokenizer)")
    ok = True
    for label, rows in (("one-token choices", one), ("a choice of several tokens", several)):
        subset = items.take(rows[: args.timing_items])
        folder = where / f"timing-{len(rows)}"
        folder.mkdir()
        tasks_dir = task_dir(write_data(subset, folder), folder)
        best = None
        for bs in [int(b) for b in args.batch_sizes.split(",")]:
            theirs = run_lm_eval(python, big, tasks_dir, folder, bs, ["winogender_all_local"])
            rate = subset.num_rows / theirs["loglikelihood_s"]
            print(f"  {label}: lm-eval batch {bs:3d}: {theirs['loglikelihood_s']:.2f} s, {rate:.2f} items/s")
            if best is None or rate > best[0]:
                best = (rate, bs, theirs)
        scores, seconds = ours(subset, big)
        rate = subset.num_rows / seconds
        print(
            f"  {label}: lmbias (prompt read once, batch 64): {seconds:.2f} s, {rate:.2f} items/s; lm-eval's best "
            f"(batch {best[1]}): {best[0]:.2f} items/s; lmbias / lm-eval {rate / best[0]:.2f}x"
        )
        ok &= compare(f"{big.name} ({label})", subset, scores, best[2], ["winogender_all_local"], args.tol)["ok"]
    return ok


if __name__ == "__main__":
    sys.exit(main())
