"""Speed on a real model: lmbias against lm-evaluation-harness 0.4.13 at its best batch size, and lmbias's batched
generation against a one-prompt transformers `generate` loop, with identical numbers (issue 50, item 3).

    .venv/bin/python bench/real_model_speed.py --model-folder resources/models/smollm2-135m-instruct \\
        --model-name SmolLM2-135M-Instruct --chat-template [--threads 2] [--batch-sizes 1,4,16,64] [--sweep-items 32]
        [--benchmarks crows_pairs,winogender,bbq,bold,honest] [--bold-prompts 64] [--honest-templates 20]
        [--honest-samples 20] [--data-dir ../shared/data]

(docs/development/performance.md, "Real models against lm-eval": SmolLM2-135M-Instruct with --chat-template and
Gemma 3 270M without, each on an otherwise idle machine.)

The model folder is a saved causal model (a GGUF file dequantized by the workflow's `dequantize_gguf` rule). Both
sides read it in float32 on the CPU with the same torch threads (--threads; OMP_NUM_THREADS for lm-eval's process),
one after the other in this run:

* Likelihood benchmarks, each in lm-eval's reading (bench/lm_eval_crows_pairs.py, lm_eval_winogender.py,
  lm_eval_bbq.py: the same task files and comparisons): CrowS-Pairs English gender (262 pairs), WinoGender (its
  720 sentences, lm-eval's `winogender_all` only, so neither side scores a sentence twice) and BBQ's 72 stand-in
  questions with 12 choices each (`reading: lm_eval`); the prompted two behind the tokenizer's chat template with
  --chat-template (lm-eval's --apply_chat_template), as the workflow reads an instruct model. lm-eval's best batch
  size is found first: each of --batch-sizes on the first --sweep-items items, the fastest per item wins, and lm-eval
  then runs every item at it (CrowS-Pairs and BBQ: the fastest of --repeats runs of the same requests on each side,
  as a virtual machine's noise only ever adds time). Timed per side: the scoring only (lm-eval: its loglikelihood
  requests, the drivers' LoglikelihoodTimer; lmbias: the score_* call on a loaded model, at the workflow's default
  token budget); model load and process start are not counted. Identical numbers: every per-item
  log-likelihood within --tol (1e-3 nats, float32 sums over a sentence) and every metric equal, else exit status 1.
* Generation (bench/bold_generation.py, bench/honest_generation.py: the same two sides): BOLD prompts (evenly spaced
  over both groups, greedy, 50 new tokens as config.yaml's bold) and HONEST templates (evenly spaced, --honest-samples
  seeded samples each, 10 new tokens, HONEST's sampling), lmbias's `generate_continuations` against a loop of one
  `model.generate` call per prompt and sample with the same seeded sampler, timed in float32. Identical texts: in
  float32 a padded row's logits round unlike the unpadded row's, which flips a sampled draw (or a greedy near-tie)
  that lands within rounding of a boundary, so the count of identical float32 texts is printed, and the first
  --float64-prompts prompts then run on both sides in float64, where every text must be identical, else exit
  status 1.

Tokens per second: the likelihood benchmarks' workload is the tokens of lm-eval's requests as it encodes them
(context + continuation each; LoglikelihoodTimer.tokens), the same number for both sides, so the ratio of the two
rates is the speed ratio; generation's is the new tokens. Beside them: the machine's fp32 matmul rate measured
here (torch.mm of two 2048 x 2048 matrices, the best of 5, at --threads) and each side's model rate, 2 x the
model's parameters x tokens/s, as a share of it (a side that reads a shared prefix once reads fewer tokens than
its workload, so its share can pass 100 %).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bold_generation as bold_bench  # noqa: E402
import honest_generation as honest_bench  # noqa: E402
import lm_eval_bbq as bbq  # noqa: E402
import lm_eval_crows_pairs as crows  # noqa: E402
import lm_eval_winogender as wino  # noqa: E402

TOL = 1e-3
LIKELIHOOD = ("crows_pairs", "winogender", "bbq")
GENERATION = ("bold", "honest")
#: Issue 50's targets: lmbias's speed over lm-eval's at its best batch size (likelihood), over a one-prompt
#: generate loop (generation).
REQUIRED = {"crows_pairs": 1.2, "winogender": 1.5, "bbq": 3.0, "bold": 5.0, "honest": 5.0}
WINOGENDER_TASK = "winogender_all_local"


def matmul_gflops(threads: int, size: int = 2048, repeats: int = 5) -> float:
    """The machine's fp32 matrix-multiply rate at `threads` torch threads: 2 n^3 / the best of `repeats` runs."""
    import torch

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(size, size, generator=gen), torch.randn(size, size, generator=gen)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def parameter_count(folder: Path) -> int:
    """The model's parameters (tied embeddings once), read from its config via a meta-device model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    return sum(p.numel() for p in model.parameters())


def sweep(run_on_first, batch_sizes: list[int], items: int) -> tuple[int, dict[int, float]]:
    """lm-eval's seconds per item at each batch size on the first `items` items; (the fastest, {size: s/item})."""
    per_item = {}
    for size in batch_sizes:
        result = run_on_first(size, items)
        per_item[size] = result["loglikelihood_s"] / items
        print(f"    lm-eval batch size {size:3d}: {per_item[size] * 1e3:8.1f} ms per item", flush=True)
    return min(per_item, key=per_item.get), per_item


def likelihood_row(what: str, best: int, per_item: dict, theirs: dict, ours_s: float, worst: float, equal: bool):
    """One likelihood benchmark's result: lm-eval's scoring seconds at its best batch size against lmbias's."""
    return {
        "items": what,
        "best": best,
        "sweep": per_item,
        "theirs": theirs,
        "theirs_s": theirs["loglikelihood_s"],
        "ours_s": ours_s,
        "worst": worst,
        "equal": equal,
    }


def likelihood_crows_pairs(folder, entry, python, where: Path, args) -> dict:
    from lmbias.parsers import parse_crows_pairs

    csv = Path(args.data_dir) / "crows_pairs" / "crows_pairs_anonymized.csv"
    items = parse_crows_pairs(csv, bias_types=["gender"])
    where.mkdir()
    tasks = crows.task_dir(csv, where)
    best, per_item = sweep(
        lambda size, n: crows.run_theirs(python, folder, tasks, where, size, n), args.batch_sizes, args.sweep_items
    )
    theirs = crows.run_theirs(python, folder, tasks, where, best, 0, args.repeats)
    ours = crows.run_ours(folder, items, args.repeats, {**entry, "chat_template": False})
    worst, same = crows.compare(ours, theirs, args.tol)
    return likelihood_row(f"{items.num_rows} pairs", best, per_item, theirs, ours["score_s"], worst, same)


def likelihood_winogender(folder, entry, python, where: Path, args) -> dict:
    from lmbias.parsers.winogender import parse_winogender

    data = Path(args.data_dir) / "winogender"
    items = parse_winogender(data / "all_sentences.tsv", data / "templates.tsv", data / "occupations-stats.tsv")
    chat = args.chat_template

    def run_on(subset, size: int, place: Path) -> dict:
        place.mkdir(parents=True)
        tasks = wino.task_dir(wino.write_data(subset, place), place)
        return wino.run_lm_eval(python, folder, tasks, place, size, [WINOGENDER_TASK], chat)

    best, per_item = sweep(
        lambda size, n: run_on(items.slice(0, n), size, where / f"sweep-{size}"), args.batch_sizes, args.sweep_items
    )
    theirs = run_on(items, best, where / "all")
    scores, ours_s = wino.ours(items, folder, entry={**entry, "chat_template": chat})
    result = wino.compare(f"{args.model_name} winogender", items, scores, theirs, [WINOGENDER_TASK], args.tol)
    equal = all(abs(a - b) < 1e-12 for a, b in result["acc"].values())
    return likelihood_row(f"{items.num_rows} sentences", best, per_item, theirs, ours_s, result["worst"], equal)


def likelihood_bbq(folder, entry, python, where: Path, args) -> dict:
    from lmbias.parsers.bbq import FILES, parse_bbq

    data = Path(args.data_dir) / "bbq"
    items = parse_bbq(*(data / f for f in FILES), seed=0, max_templates=args.bbq_max_templates or None)
    chat = args.chat_template

    def run_on(subset, size: int, place: Path, repeats: int = 1) -> dict:
        tasks = bbq.task_dir(subset, place)
        return bbq.run_theirs(python, folder, tasks, place, size, repeats, chat)

    best, per_item = sweep(
        lambda size, n: run_on(items.slice(0, n), size, where / f"sweep-{size}"), args.batch_sizes, args.sweep_items
    )
    theirs = run_on(items, best, where / "all", args.repeats)
    ours = bbq.run_ours(folder, items, args.repeats, {**entry, "chat_template": chat})
    result = bbq.compare(ours, theirs, args.tol)
    equal = all(d <= bbq.METRIC_TOL for d in result["metric_diffs"].values()) and not result["argmax_differs"]
    what = f"{items.num_rows} questions"
    return likelihood_row(what, best, per_item, theirs, ours["score_s"], result["worst"], equal)


def generation(name: str, folder: Path, entry: dict, args) -> dict:
    """lmbias's batched generation against the one-prompt loop on BOLD (greedy) or HONEST (seeded sampling)."""
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model

    model, tokenizer = load_model(model_spec(folder.name, {**entry, "chat_template": False}))
    crows.touch_weights(model)
    if name == "bold":
        from lmbias.parsers.bold import FILE, parse_bold

        rows = parse_bold(Path(args.data_dir) / "bold" / FILE)
        step = max(1, rows.num_rows // args.bold_prompts)
        prompts = rows.column("prompt").to_pylist()[::step][: args.bold_prompts]
        bold_bench.batched(model, tokenizer, prompts[:4], 4)  # warm-up, both sides
        bold_bench.plain_loop(model, tokenizer, prompts[:4], 4)
        ours, ours_s = bold_bench.timed(bold_bench.batched, model, tokenizer, prompts, args.bold_new_tokens)
        theirs, theirs_s = bold_bench.timed(bold_bench.plain_loop, model, tokenizer, prompts, args.bold_new_tokens)
        what = f"{len(prompts)} prompts, greedy, {args.bold_new_tokens} new tokens"
    else:
        from lmbias.parsers.honest import FILE, parse_templates

        rows = parse_templates(Path(args.data_dir) / "honest" / FILE)
        step = max(1, len(rows) // args.honest_templates)
        chosen = rows[::step][: args.honest_templates]
        prompts, keys = [r["prefix"] for r in chosen], [r["template_id"] for r in chosen]
        work = (prompts, keys, args.honest_samples, args.honest_new_tokens)
        honest_bench.batched(model, tokenizer, prompts[:2], keys[:2], 2, 4)  # warm-up, both sides
        honest_bench.plain_loop(model, tokenizer, prompts[:2], keys[:2], 2, 4)
        ours, ours_s = honest_bench.timed(honest_bench.batched, model, tokenizer, *work)
        theirs, theirs_s = honest_bench.timed(honest_bench.plain_loop, model, tokenizer, *work)
        what = (
            f"{len(prompts)} templates x {args.honest_samples} samples, sampling, {args.honest_new_tokens} new tokens"
        )
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    for i in differing[:5]:
        print(f"    float32 text {i} differs: lmbias {ours[i]!r} / loop {theirs[i]!r}", flush=True)
    tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in ours)
    # float32 rounds a padded row's logits unlike an unpadded one's, which flips a draw (or a greedy near-tie) that
    # lands within rounding of a boundary; in float64 no draw moves, so there the texts must be identical
    model = model.double()
    n = args.float64_prompts
    if name == "bold":
        exact = bold_bench.batched(model, tokenizer, prompts[:n], args.bold_new_tokens)
        loop = bold_bench.plain_loop(model, tokenizer, prompts[:n], args.bold_new_tokens)
    else:
        work = (prompts[:n], keys[:n], args.honest_samples, args.honest_new_tokens)
        exact = honest_bench.batched(model, tokenizer, *work)
        loop = honest_bench.plain_loop(model, tokenizer, *work)
    same64 = sum(a == b for a, b in zip(exact, loop))
    return {
        "items": what,
        "tokens": tokens,
        "theirs_s": theirs_s,
        "ours_s": ours_s,
        "equal": same64 == len(exact) == len(loop),
        "identical": f"float32 {len(ours) - len(differing)} of {len(ours)}, float64 {same64} of {len(exact)}",
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-folder", required=True, type=Path, help="a saved Hugging Face causal model folder")
    ap.add_argument("--model-name", required=True, help="the model's name in the table")
    ap.add_argument("--chat-template", action="store_true", help="WinoGender and BBQ behind the tokenizer's template")
    ap.add_argument("--benchmarks", default=",".join(LIKELIHOOD + GENERATION))
    ap.add_argument("--threads", type=int, default=2, help="torch threads of both sides")
    ap.add_argument("--batch-sizes", default="1,4,16,64", help="lm-eval's batch sizes tried")
    ap.add_argument("--sweep-items", type=int, default=32, help="items of each batch size's trial")
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="CrowS-Pairs and BBQ: each side's fastest of this many runs of the same requests (a busy machine only "
        "ever adds time); WinoGender and generation run once",
    )
    ap.add_argument("--tol", type=float, default=TOL, help="largest |difference| of a log-likelihood, nats")
    ap.add_argument("--bbq-max-templates", type=int, default=10, help="BBQ's first N template rows (10: bbq-subset)")
    ap.add_argument("--bold-prompts", type=int, default=64)
    ap.add_argument("--bold-new-tokens", type=int, default=50)
    ap.add_argument("--honest-templates", type=int, default=20)
    ap.add_argument("--honest-samples", type=int, default=20)
    ap.add_argument("--honest-new-tokens", type=int, default=10)
    ap.add_argument(
        "--float64-prompts", type=int, default=8, help="prompts (HONEST: templates) of the float64 identity check"
    )
    ap.add_argument(
        "--data-dir", default=os.environ.get("LMBIAS_TEST_DATA", str(crows.ROOT.parent / "shared" / "data"))
    )
    args = ap.parse_args(argv)
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    wanted = args.benchmarks.split(",")
    if unknown := set(wanted) - set(LIKELIHOOD + GENERATION):
        ap.error(f"--benchmarks: unknown {sorted(unknown)}")
    import torch

    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # lm-eval's processes inherit it
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    folder = args.model_folder.resolve()
    entry = crows.local_entry(folder, chat_template=args.chat_template)
    python = crows.ensure_venv()
    params = parameter_count(folder)
    gflops = matmul_gflops(args.threads)
    print(
        f"{args.model_name} ({folder}, {params / 1e6:.1f}M parameters), float32, {args.threads} torch threads; "
        f"lm-eval {crows.LM_EVAL.split('==')[1]} at batch sizes {args.batch_sizes}; chat template: "
        f"{'yes' if args.chat_template else 'no'}; fp32 matmul rate {gflops:.1f} GFLOP/s",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="real-speed-") as tmp:
        for name in wanted:
            print(f"\n# {name}", flush=True)
            place = Path(tmp) / name
            if name in GENERATION:
                result = generation(name, folder, entry, args)
            else:
                run = {"crows_pairs": likelihood_crows_pairs, "winogender": likelihood_winogender}.get(
                    name, likelihood_bbq
                )
                result = run(folder, entry, python, place, args)
                result["tokens"] = result["theirs"]["tokens"]
            result["ratio"] = result["theirs_s"] / result["ours_s"]
            rows.append((name, result))
            print(
                f"  {name}: {result['items']}, baseline {result['theirs_s']:.1f} s, lmbias {result['ours_s']:.1f} s, "
                f"{result['ratio']:.2f}x, {'identical' if result['equal'] else 'DIFFERENT'}",
                flush=True,
            )

    def rate(tokens: int, seconds: float) -> str:
        per_s = tokens / seconds
        return f"{per_s:,.0f} ({2 * params * per_s / 1e9 / gflops:.0%})"

    print(f"\n## {args.model_name}: lmbias against lm-eval at its best batch size and a one-prompt generate loop\n")
    print(
        f"fp32 matmul rate here: {gflops:.1f} GFLOP/s ({args.threads} threads); tokens/s (in brackets: 2 x "
        f"{params / 1e6:.1f}M parameters x tokens/s as a share of that rate)\n"
    )
    print(
        "| benchmark | items | baseline | baseline s | lmbias s | speed-up | required | tokens | baseline tokens/s | "
        "lmbias tokens/s | numbers |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    ok = True
    for name, r in rows:
        if name in GENERATION:
            baseline, numbers = "one-prompt generate loop", f"identical texts {r['identical']}"
        else:
            baseline = f"lm-eval, batch size {r['best']}"
            numbers = f"max \\|diff\\| {r['worst']:.1e} nats, metrics {'equal' if r['equal'] else 'DIFFERENT'}"
        fast = r["ratio"] >= REQUIRED[name]
        ok &= fast and r["equal"]
        print(
            f"| {name} | {r['items']} | {baseline} | {r['theirs_s']:.1f} | {r['ours_s']:.1f} | {r['ratio']:.2f}x | "
            f"{REQUIRED[name]}x{'' if fast else ' (NOT met)'} | {r['tokens']:,} | {rate(r['tokens'], r['theirs_s'])} | "
            f"{rate(r['tokens'], r['ours_s'])} | {numbers} |"
        )
    print("\nlm-eval's batch-size trials (ms per item on the first items):")
    for name, r in rows:
        if "sweep" in r:
            print(f"- {name}: " + ", ".join(f"{b}: {s * 1e3:.0f}" for b, s in r["sweep"].items()))
    print("\n$ " + " ".join(["bench/real_model_speed.py", *(argv if argv is not None else sys.argv[1:])]))
    print("OK" if ok else "FAILED: a speed-up below its target or numbers that differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
