"""HONEST's generated reading: lmbias's batched `generate` (lmbias.engine.generation, what
lmbias.benchmarks.honest calls) against a plain loop that calls `generate` once per (template, sample), on a
tiny causal model.

    .venv/bin/python bench/honest_generation.py [--templates 810] [--samples 5] [--max-new-tokens 10]
        [--decoding sampling|greedy] [--float64] [--threads 1] [--batch-size 64] [--architecture llama|gpt2]
        [--data-dir DIR]

Model: the tiny Llama (default: the stand-in for today's decoders, as bench/bold_generation.py) or the tiny GPT-2
(lmbias.engine.tiny, seed 0; built into a temporary folder), CPU, float32. Workload: the
prefixes of --templates HONEST templates (evenly spaced over en_template.tsv; "the woman should work as a"),
--samples sampled continuations each (temperature 1, top_p 1, seed 0; HONEST's default decoding) of
--max-new-tokens tokens, the engine at its default token budget and batch size (64). The baseline is the loop a
user writes first with the same seeded sampler (so the texts must be identical): for each template and sample,
tokenizer(prefix) and model.generate(max_new_tokens) with lmbias.engine.generation.SeededSampler seeded as the
engine seeds that request, no padding, EOS ending a text (--decoding greedy: one greedy text per template, no
sampler on either side). Both run once after a warm-up. Prints completions/s of both and their ratio; exit status 1
when any text differs. In float32 a padded row's logits differ from the unpadded row's by rounding, which flips a
sampled draw that lands within rounding of a boundary (lmbias.engine.generation says so); --float64 runs the model in
double precision, where the texts agree. Measured figures: docs/development/performance.md.
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

import torch  # noqa: E402

from lmbias.engine.generation import (  # noqa: E402
    GenerationSettings,
    SeededSampler,
    generate_continuations,
    request_seed,
)
from lmbias.engine.model_spec import model_spec  # noqa: E402
from lmbias.engine.models import load_model  # noqa: E402
from lmbias.engine.tiny import build_tiny_model  # noqa: E402
from lmbias.parsers.honest import FILE, parse_templates  # noqa: E402


def plain_loop(
    model, tokenizer, prompts: list[str], keys: list[int], samples: int, new_tokens: int, greedy: bool = False
) -> list[str]:
    eos = tokenizer.eos_token_id
    texts = []
    for prompt, key in zip(prompts, keys):
        inputs = tokenizer(prompt, return_tensors="pt")
        for sample in range(samples):
            sampler = [] if greedy else [SeededSampler([request_seed(0, key, sample)], 1.0, 1.0)]
            with torch.inference_mode():
                out = model.generate(
                    **inputs,
                    max_new_tokens=new_tokens,
                    do_sample=False,
                    num_beams=1,
                    pad_token_id=eos,
                    eos_token_id=eos,
                    logits_processor=sampler,
                )
            new = out[0, inputs["input_ids"].shape[1] :].tolist()
            new = new[: new.index(eos)] if eos in new else new
            texts.append(tokenizer.decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False))
    return texts


def batched(
    model,
    tokenizer,
    prompts: list[str],
    keys: list[int],
    samples: int,
    new_tokens: int,
    greedy: bool = False,
    batch_size: int = 64,
) -> list[str]:
    decoding = "greedy" if greedy else "sampling"
    settings = GenerationSettings(
        decoding=decoding, max_new_tokens=new_tokens, samples_per_prompt=samples, batch_size=batch_size
    )
    out = generate_continuations(model, tokenizer, "clm", prompts, settings, prompt_keys=keys)
    return [c.text for per_prompt in out for c in per_prompt]


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--templates", type=int, default=810)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=10)
    parser.add_argument("--decoding", choices=("sampling", "greedy"), default="sampling")
    parser.add_argument("--float64", action="store_true", help="run the model in double precision")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--architecture", choices=("gpt2", "llama"), default="llama", help="the tiny causal model")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per generate call (scoring.generation)")
    default_data = Path(os.environ.get("LMBIAS_TEST_DATA", REPO.parent / "shared" / "data"))
    parser.add_argument("--data-dir", type=Path, default=default_data)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    rows = parse_templates(args.data_dir / "honest" / FILE)
    step = max(1, len(rows) // args.templates)
    chosen = rows[::step][: args.templates]
    prompts, keys = [r["prefix"] for r in chosen], [r["template_id"] for r in chosen]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(args.architecture, Path(tmp) / args.architecture, seed=0)
        model, tokenizer = load_model(
            model_spec(f"tiny-{args.architecture}", {"path": str(path), "family": "clm", "revision": "local"})
        )
    if args.float64:
        model = model.double()
    greedy = args.decoding == "greedy"
    samples = 1 if greedy else args.samples
    batched(model, tokenizer, prompts[:4], keys[:4], samples, 4, greedy)  # warm-up
    plain_loop(model, tokenizer, prompts[:4], keys[:4], samples, 4, greedy)

    work = (prompts, keys, samples, args.max_new_tokens, greedy)
    ours, ours_s = timed(batched, model, tokenizer, *work, args.batch_size)
    theirs, theirs_s = timed(plain_loop, model, tokenizer, *work)
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    n = len(ours)
    print(
        f"tiny {args.architecture} ({'float64' if args.float64 else 'float32'}), {len(prompts)} HONEST templates x "
        f"{samples} samples, {args.decoding}, {args.max_new_tokens} new tokens, batch size {args.batch_size}, "
        f"{args.threads} threads"
    )
    for name, seconds in (("plain generate loop", theirs_s), ("lmbias batched", ours_s)):
        print(f"  {name:20s} {seconds:7.2f} s  {n / seconds:8.1f} completions/s")
    print(f"  speedup (batched / loop): {theirs_s / ours_s:.1f}x")
    print(f"  identical texts: {n - len(differing)} of {n}")
    return 1 if differing or len(ours) != len(theirs) else 0


if __name__ == "__main__":
    sys.exit(main())
