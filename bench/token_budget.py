"""Scoring by token budget: the memory of the largest forward pass, row-count batches vs a token budget.

    .venv/bin/python bench/token_budget.py [--short 256] [--long 64] [--long-length 256] [--vocab 32000]
        [--budgets 8192 2048] [--threads 2]

A long-tailed scoring job: `--short` 16-token windows (sentence benchmarks) and `--long` windows of
`--long-length` tokens (perplexity windows, long StereoSet/CrowS-Pairs items), scored by the engine's causal
path (lmbias.engine.rolling.causal_nll) with a randomly initialised GPT-2-architecture model of 2
layers, width 256 and a Llama-sized vocabulary (`--vocab`): a causal LM's logits (rows x tokens x vocab
floats) are what a batch of long items blows up. Each setting runs in its own subprocess (peak RSS is its
own): `rows` = the former row-count batching (batch_size 64, no budget), then batch_size 64 within each
`--budgets` value. Printed: forward passes, the largest pass's padded tokens, peak RSS above the process's
RSS before scoring, tokens/s, and the largest NLL difference from `rows` (the numbers do not depend on the
budget). On a GPU the same budget bounds CUDA memory; the scoring jobs record both in their timing files.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _windows(args):
    import numpy as np

    rng = np.random.default_rng(0)
    lengths = [16] * args.short + [args.long_length] * args.long
    return [(rng.integers(10, args.vocab, size=n).tolist(), 1) for n in lengths]


def _one(args) -> dict:
    """Score the windows with one setting in this process; a JSON line for the parent."""
    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmbias.engine.batching import EngineStats, run_batches
    from lmbias.engine.rolling import causal_nll

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=args.vocab, n_positions=1024, n_embd=256, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(config).eval()

    class Tok:
        pad_token_id = 0

    windows = _windows(args)
    widest = [0]
    import lmbias.benchmarks.perplexity as perplexity

    def watched(order, lengths, batch_size, run, *rest, **kw):  # record the largest pass's padded tokens
        def counted(batch):
            widest[0] = max(widest[0], len(batch) * max(lengths[i] for i in batch))
            return run(batch)

        return run_batches(order, lengths, batch_size, counted, *rest, **kw)

    perplexity.run_batches = watched
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    stats = EngineStats()
    start = time.perf_counter()
    nll = causal_nll(model, Tok(), windows, batch_size=64, max_tokens=args.max_tokens, stats=stats)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tokens = sum(len(ids) for ids, _ in windows)
    return {
        "passes": stats.forward_passes,
        "widest": widest[0],
        "peak_mib": (peak - before) / 1024,
        "tokens_per_s": tokens / seconds,
        "nll": np.asarray(nll).tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", type=int, default=256)
    parser.add_argument("--long", type=int, default=64)
    parser.add_argument("--long-length", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--budgets", type=int, nargs="+", default=[8192, 2048])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, help=argparse.SUPPRESS)  # a child's setting
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_one(args)))
        return
    base = [
        sys.executable,
        __file__,
        "--child",
        "--short",
        str(args.short),
        "--long",
        str(args.long),
        "--long-length",
        str(args.long_length),
        "--vocab",
        str(args.vocab),
        "--threads",
        str(args.threads),
    ]
    settings = [("rows (batch_size 64)", 10**9)] + [(f"max_tokens {b}", b) for b in args.budgets]
    print(
        f"{args.short} windows of 16 tokens + {args.long} of {args.long_length}; GPT-2 architecture, 2 layers, "
        f"width 256, vocabulary {args.vocab:,}; CPU, {args.threads} threads, float32"
    )
    print(
        f"{'setting':<22} {'passes':>6} {'largest pass':>13} {'peak RSS +MiB':>14} {'tokens/s':>9} {'max |dNLL|':>11}"
    )
    reference = None
    for name, budget in settings:
        out = subprocess.run(
            base + ["--max-tokens", str(budget)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        reference = reference or r["nll"]
        diff = max(abs(a - b) for a, b in zip(r["nll"], reference))
        print(
            f"{name:<22} {r['passes']:>6} {r['widest']:>7,} tokens {r['peak_mib']:>14,.0f} "
            f"{r['tokens_per_s']:>9,.0f} {diff:>11.1e}"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (other processes share the CPUs: timings are noisy)")


if __name__ == "__main__":
    main()
