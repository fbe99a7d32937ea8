"""HolisticBias perplexities: the batched engine (lmbias.benchmarks.holistic_bias) against a plain one-input loop.

    .venv/bin/python bench/holistic_bias_perplexity.py [--sentences 2000] [--threads 1] [--models gpt2,bert]
        [--data-dir ../shared/data]

Models: the tiny GPT-2 and tiny BERT of lmbias.engine.tiny (seed 0, built into a temporary folder), CPU, float32.
Sentences: --sentences of the gender_and_sex axis' 51,057 (lmbias.parsers.holistic_bias, default options), evenly
spaced over it (every k-th row: all templates, descriptors and nouns come up); 0: all of them.

* engine: the benchmark's scorer, `score_holistic_bias(items, lm, {})` (batch 64): a causal model's sentences in
  length-sorted batches (LanguageModel.sentence_logprobs), a masked model's one masked input per token of every
  sentence, all in one batched call (LanguageModel.pseudo_logprobs: deduplicated, length-sorted, the LM head only
  at the masked position);
* loop: plain transformers, batch of one, the LM head over every position, float64 log-softmax: GPT-2 one forward
  pass per sentence (BOS + the sentence's tokens, every token after the BOS summed), BERT one forward pass per
  token of each sentence (that token masked: a pseudo-log-likelihood needs one input per token).

Prints per model the sentences, the forward passes of the loop, both wall times (the best of --repeats), the
speed-up and the max |difference| of the per-sentence log-likelihood sums. Exit status 1 when they differ by more
than 1e-5.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from lmbias.benchmarks.holistic_bias import score_holistic_bias  # noqa: E402
from lmbias.engine.lm import LanguageModel  # noqa: E402
from lmbias.engine.model_spec import model_spec  # noqa: E402
from lmbias.engine.models import load_model  # noqa: E402
from lmbias.engine.tiny import build_tiny_model  # noqa: E402
from lmbias.parsers.holistic_bias import FILES, parse_holistic_bias  # noqa: E402

TOLERANCE = 1e-5
FAMILIES = {"gpt2": "clm", "bert": "mlm"}


def loop_causal(model, tokenizer, texts) -> tuple[np.ndarray, int]:
    """log p(sentence | BOS), one sentence per forward pass; (sums, passes)."""
    out = []
    with torch.inference_mode():
        for text in texts:
            ids = [tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False)["input_ids"]
            logits = model(input_ids=torch.tensor([ids])).logits[0].double()
            logprobs = torch.log_softmax(logits[:-1], dim=-1)
            out.append(float(logprobs.gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).sum()))
    return np.array(out), len(texts)


def loop_pseudo(model, tokenizer, texts) -> tuple[np.ndarray, int]:
    """Pseudo-log-likelihood, one masked token per forward pass; (sums, passes)."""
    out, passes = [], 0
    with torch.inference_mode():
        for text in texts:
            ids = tokenizer(text)["input_ids"]
            special = tokenizer.get_special_tokens_mask(ids, already_has_special_tokens=True)
            total = 0.0
            for i, is_special in enumerate(special):
                if is_special:
                    continue
                masked = list(ids)
                masked[i] = tokenizer.mask_token_id
                logits = model(input_ids=torch.tensor([masked])).logits[0, i].double()
                total += float(torch.log_softmax(logits, dim=-1)[ids[i]])
                passes += 1
            out.append(total)
    return np.array(out), passes


def best_of(repeats: int, run):
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000, help="evenly spaced sentences of the axis (0: all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--models", default="gpt2,bert")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = Path(args.data_dir) / "holistic_bias"
    table = parse_holistic_bias(*(folder / f for f in FILES))
    if args.sentences and args.sentences < table.num_rows:
        step = table.num_rows / args.sentences
        table = table.take([int(k * step) for k in range(args.sentences)])
    texts = [str(t) for t in table.column("sentence").to_pylist()]
    print(f"{len(texts)} sentences of the gender_and_sex axis; torch threads {args.threads}", flush=True)
    rows, worst = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.models.split(","):
            family = FAMILIES[arch]
            path = build_tiny_model(arch, Path(tmp) / arch, seed=0)
            model, tokenizer = load_model(
                model_spec("tiny", {"path": str(path), "family": family, "revision": "local"})
            )
            model.eval()
            lm = LanguageModel(model, tokenizer, family)
            score_holistic_bias(table.slice(0, 8), lm, {})  # warm-up
            engine_s, scores = best_of(args.repeats, lambda: score_holistic_bias(table, lm, {}))
            loop = loop_causal if family == "clm" else loop_pseudo
            loop_s, (direct, passes) = best_of(args.repeats, lambda: loop(model, tokenizer, texts))
            diff = float(np.max(np.abs(np.asarray(scores.column("loglik").to_pylist()) - direct)))
            worst = max(worst, diff)
            rows.append((arch, len(texts), passes, loop_s, engine_s, diff))
            print(f"  {arch}: loop {loop_s:.1f} s, engine {engine_s:.1f} s, max |diff| {diff:.1e}", flush=True)
    print()
    print("| model | sentences | loop forward passes | one-input loop | lmbias batched | speed-up | max abs diff |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arch, n, passes, loop_s, engine_s, diff in rows:
        print(
            f"| tiny {arch} | {n:,} | {passes:,} | {loop_s:.1f} s ({n / loop_s:.0f} sent/s) | {engine_s:.1f} s "
            f"({n / engine_s:.0f} sent/s) | {loop_s / engine_s:.1f}x | {diff:.1e} |"
        )
    if worst > TOLERANCE:
        print(f"FAIL: the engine and the loop differ by {worst:.1e} > {TOLERANCE}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
