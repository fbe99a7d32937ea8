"""Counterfactual prompt pairs: the pairs' generation through lmbias's batched engine (score_counterfactual, one
lm.generate call for every prompt and twin) against a loop that generates one prompt at a time, on a tiny
causal model.

    .venv/bin/python bench/counterfactual_generation.py [--per-group 256] [--max-new-tokens 32] [--threads 1]
                                                        [--architecture llama|gpt2] [--data-dir DIR]

Model: lmbias's tiny Llama (default: the stand-in for today's decoders, as bench/bold_generation.py) or tiny GPT-2
(lmbias.engine.tiny, seed 0; built into a temporary folder), CPU, float32. Workload:
the first --per-group BOLD gender prompts of each group, their twins built with the grammatical intervention
(lmbias.corpora.prompt_pairs; unpaired prompts left out), greedy decoding of --max-new-tokens tokens. Ours: the
whole scorer (pairs, then the prompts and twins batched by lmbias.engine.generation at --batch-size rows, 128, and
the engine's default token budget), and its generation step alone (the same texts and seed keys); the pair
building is timed on its own (all 3,204 prompts) and is also inside the scorer's time. Two baselines, each text
alone: the loop a user writes first, transformers' `generate` on each prompt and each twin (greedy, no padding,
EOS ending a text, as bench/honest_generation.py's loop), and generate_continuations on that one text (a batch of
one: lmbias's own decode loop, unbatched). All run once after a warm-up. Prints texts/s and the ratios; exit
status 1 when any text differs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

import pyarrow.compute as pc  # noqa: E402
import torch  # noqa: E402
from honest_generation import plain_loop  # noqa: E402

from lmbias.benchmarks.counterfactual import build_pairs, score_counterfactual  # noqa: E402
from lmbias.engine.generation import GenerationSettings, generate_continuations  # noqa: E402
from lmbias.engine.lm import LanguageModel  # noqa: E402
from lmbias.engine.model_spec import model_spec  # noqa: E402
from lmbias.engine.models import load_model  # noqa: E402
from lmbias.engine.tiny import build_tiny_model  # noqa: E402
from lmbias.parsers.bold import FILE, parse_bold  # noqa: E402


def one_at_a_time(model, tokenizer, texts: list[str], max_new_tokens: int) -> list[str]:
    settings = GenerationSettings(max_new_tokens=max_new_tokens, batch_size=1)
    return [generate_continuations(model, tokenizer, "clm", [t], settings)[0][0].text for t in texts]


def generate_loop(model, tokenizer, texts: list[str], max_new_tokens: int) -> list[str]:
    """transformers' `generate` on one text at a time, greedy, the text cut at the first EOS: the HONEST bench's
    loop (bench/honest_generation.plain_loop) with one greedy sample a text."""
    return plain_loop(model, tokenizer, texts, list(range(len(texts))), 1, max_new_tokens, greedy=True)


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-group", type=int, default=256)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--architecture", choices=("gpt2", "llama"), default="llama", help="the tiny causal model")
    parser.add_argument("--batch-size", type=int, default=128)
    default_data = Path(os.environ.get("LMBIAS_TEST_DATA", REPO.parent / "shared" / "data"))
    parser.add_argument("--data-dir", type=Path, default=default_data)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    items = parse_bold(args.data_dir / "bold" / FILE)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(args.architecture, Path(tmp) / args.architecture, seed=0)
        model, tokenizer = load_model(
            model_spec(f"tiny-{args.architecture}", {"path": str(path), "family": "clm", "revision": "local"})
        )
    lm = LanguageModel(model, tokenizer, "clm")
    scoring = {
        "prompts_per_group": args.per_group,
        "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size,
    }
    score_counterfactual(items, lm, {"prompts_per_group": 2, "max_new_tokens": 4})  # warm-up (spaCy loaded)
    one_at_a_time(model, tokenizer, ["He was "], 4)
    generate_loop(model, tokenizer, ["He was "], 4)

    _, pairs_s = timed(build_pairs, items, {"intervention": "grammatical", "spacy_model": "en_core_web_sm"})
    scores, ours_s = timed(score_counterfactual, items, lm, scoring)
    paired = scores.filter(pc.is_valid(scores.column("twin")))
    texts = paired.column("prompt").to_pylist() + paired.column("twin").to_pylist()
    ours = paired.column("continuation").to_pylist() + paired.column("twin_continuation").to_pylist()
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    keys = paired.column("prompt_id").to_pylist() * 2
    engine, engine_s = timed(generate_continuations, model, tokenizer, "clm", texts, settings, keys)
    theirs, theirs_s = timed(one_at_a_time, model, tokenizer, texts, args.max_new_tokens)
    loop, loop_s = timed(generate_loop, model, tokenizer, texts, args.max_new_tokens)
    differing = [i for i, (a, b, c, d) in enumerate(zip(ours, theirs, engine, loop)) if not a == b == c[0].text == d]
    print(
        f"tiny {args.architecture}, {2 * args.per_group} BOLD prompts -> {paired.num_rows} pairs ({len(texts)} texts), "
        f"greedy, {args.max_new_tokens} new tokens, {args.threads} threads"
    )
    print(f"  pair building alone (all 3,204 prompts, grammatical): {pairs_s:.2f} s")
    runs = (
        ("a generate loop", loop_s),
        ("one prompt at a time", theirs_s),
        ("lmbias scorer (batched)", ours_s),
        ("its generation alone", engine_s),
    )
    for name, seconds in runs:
        print(f"  {name:24s} {seconds:7.2f} s  {len(texts) / seconds:8.1f} texts/s")
    print(f"  throughput ratio, whole scorer (pairs + batched generation) / one at a time: {theirs_s / ours_s:.1f}x")
    print(f"  throughput ratio, batched generation / one at a time: {theirs_s / engine_s:.1f}x")
    print(f"  throughput ratio, whole scorer / a generate loop: {loop_s / ours_s:.1f}x")
    print(f"  throughput ratio, batched generation / a generate loop: {loop_s / engine_s:.1f}x")
    print(f"  identical texts: {len(texts) - len(differing)} of {len(texts)}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
