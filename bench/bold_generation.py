"""BOLD generation: lmbias's batched `generate` (lmbias.engine.generation) against a plain loop that calls
`generate` once per prompt, on the tiny Llama.

    .venv/bin/python bench/bold_generation.py [--prompts 128] [--max-new-tokens 32] [--threads 1] [--data-dir DIR]

Model: the tiny Llama (lmbias.engine.tiny, seed 0; built into a temporary folder), CPU, float32. Workload:
--prompts real BOLD gender prompts (evenly spaced over gender_prompt.json, so both groups and every prompt
length come in), greedy decoding of --max-new-tokens tokens, the engine at its default token budget (8,192
padded tokens per pass) and batch size (64). The baseline is what a user writes first: for each prompt,
tokenizer(prompt) and model.generate(max_new_tokens, greedy), no padding, EOS ending a text. Both run once
after a warm-up on a few prompts. Prints prompts/s and new tokens/s of both and their ratio; exit status 1
when any text differs.
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

from lmbias.engine.generation import GenerationSettings, generate_continuations  # noqa: E402
from lmbias.engine.model_spec import model_spec  # noqa: E402
from lmbias.engine.models import load_model  # noqa: E402
from lmbias.engine.tiny import build_tiny_model  # noqa: E402
from lmbias.parsers.bold import FILE, parse_bold  # noqa: E402


def plain_loop(model, tokenizer, prompts: list[str], max_new_tokens: int) -> list[str]:
    eos = tokenizer.eos_token_id
    texts = []
    for prompt in prompts:
        inputs = tokenizer(prompt, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=eos)
        new = out[0, inputs["input_ids"].shape[1] :].tolist()
        texts.append(tokenizer.decode(new[: new.index(eos)] if eos in new else new, skip_special_tokens=True))
    return texts


def batched(model, tokenizer, prompts: list[str], max_new_tokens: int) -> list[str]:
    settings = GenerationSettings(max_new_tokens=max_new_tokens)
    return [c[0].text for c in generate_continuations(model, tokenizer, "clm", prompts, settings)]


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    default_data = Path(os.environ.get("LMBIAS_TEST_DATA", REPO.parent / "shared" / "data"))
    parser.add_argument("--data-dir", type=Path, default=default_data)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    items = parse_bold(args.data_dir / "bold" / FILE)
    step = max(1, items.num_rows // args.prompts)
    prompts = items.column("prompt").to_pylist()[::step][: args.prompts]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model("llama", Path(tmp) / "llama", seed=0)
        model, tokenizer = load_model(
            model_spec("tiny-llama", {"path": str(path), "family": "clm", "revision": "local"})
        )
    batched(model, tokenizer, prompts[:4], 4)  # warm-up
    plain_loop(model, tokenizer, prompts[:4], 4)

    ours, ours_s = timed(batched, model, tokenizer, prompts, args.max_new_tokens)
    theirs, theirs_s = timed(plain_loop, model, tokenizer, prompts, args.max_new_tokens)
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    new_tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in ours)
    print(f"tiny Llama, {len(prompts)} BOLD prompts, greedy, {args.max_new_tokens} new tokens, {args.threads} threads")
    for name, seconds in (("plain generate loop", theirs_s), ("lmbias batched", ours_s)):
        rates = f"{len(prompts) / seconds:8.1f} prompts/s  {new_tokens / seconds:8.0f} tokens/s"
        print(f"  {name:20s} {seconds:7.2f} s  {rates}")
    print(f"  throughput ratio (batched / loop): {theirs_s / ours_s:.1f}x")
    print(f"  identical texts: {len(prompts) - len(differing)} of {len(prompts)}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
