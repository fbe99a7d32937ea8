"""StereoSet causal scoring with and without shared prefixes read once (lmbias.engine.prefix_cache).

    .venv/bin/python bench/prefix_cache.py [--examples 120] [--llama-layers 16] [--threads 2] [--repeats 1]
        [--models gpt2,llama-1b] [--skip-head-variant] [--data-dir DIR]

Models, randomly initialised from their config (seed 0; random weights cost what trained ones do), CPU,
float32:
* gpt2: GPT-2 small's shape (GPT2Config defaults: 12 layers, 768 wide, 12 heads, vocabulary 50,257);
* llama-1b: Llama 3.2 1B's shape (16 layers, 2048 wide, 32 heads, 8 key-value heads, MLP 8192, vocabulary
  128,256, tied embeddings); --llama-layers keeps fewer layers to save time.
Tokenizers: the tiny models' (lmbias.engine.tiny, built from resources/vocab/tiny_words.txt: the benchmarks'
words are single tokens, as most are in GPT-2's and Llama's vocabularies), GPT-2's and Llama's conventions
(<|endoftext|> start token; BOS).

Workload: --examples real StereoSet dev intrasentence examples (evenly spaced over the dev set, three
candidates each), scored by lmbias.benchmarks.stereoset.score_stereoset, the same items, after a warm-up on a
few items, in three variants that take turns --repeats times (the fastest run of each counts):
* full: `scoring.shared_prefix` false, the default and the reference (lmbias.engine.scoring.sentence_logprobs:
  every sentence read in full, the LM head applied at every position, padding included);
* full, head at scored: `shared_prefix` true but every sentence its own example, so no prefix is shared: every
  sentence read in full by lmbias.engine.prefix_cache, the LM head only at the positions scored;
* shared prefix: `shared_prefix` true, each example's common token prefix read once.
Prints items/s (examples) and CPU seconds of each, the speed-ups over full, the share of tokens in shared
prefixes and each variant's max |difference| of the candidates' log-likelihoods from full. Exit status 1
when they differ by more than 1e-5. Under load (other jobs on the cores), --threads 1 and the CPU seconds
are the steadier measure: threads of one matrix product that wait for each other lose wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from lmbias.benchmarks.stereoset import score_stereoset  # noqa: E402
from lmbias.engine.lm import LanguageModel  # noqa: E402
from lmbias.engine.prefix_cache import MIN_PREFIX_TOKENS, common_prefix_length  # noqa: E402
from lmbias.engine.scoring import clm_inputs  # noqa: E402
from lmbias.engine.tiny import build_tokenizer  # noqa: E402
from lmbias.engine.tiny_vocab import DEFAULT_WORDS, load_word_list  # noqa: E402
from lmbias.parsers import parse_stereoset  # noqa: E402

TOLERANCE = 1e-5


def gpt2_small(tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id))


def llama_1b(tokenizer, layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def shared_token_share(items, tokenizer) -> float:
    """Share of the full path's input tokens that sit in a prefix read once."""
    total = saved = 0
    rows = items.to_pylist()
    by_example: dict[str, list[str]] = {}
    for r in rows:
        by_example.setdefault(r["example_id"], []).append(r["sentence"])
    for texts in by_example.values():
        seqs = clm_inputs(tokenizer, sorted(set(texts)), 10**9)
        total += sum(len(s) for s in seqs)
        length = common_prefix_length(seqs) if len(seqs) > 1 else 0
        if length >= MIN_PREFIX_TOKENS:
            saved += length * (len(seqs) - 1)
    return saved / total


def each_text_alone(items):
    """`items` with every sentence its own example: no group shares a prefix, so `shared_prefix: true` reads
    every input in full, with the LM head at the scored positions only (the no-sharing side of the new path)."""
    import pyarrow as pa

    alone = pa.array([f"{e}/{s}" for e, s in zip(items["example_id"].to_pylist(), items["sentence_id"].to_pylist())])
    return items.set_column(items.schema.get_field_index("example_id"), "example_id", alone)


def measure(name, model, tokenizer, items, n_examples, repeats, only) -> float:
    model.eval()
    score_stereoset(items.slice(0, 6), LanguageModel(model, tokenizer, "clm"), {"shared_prefix": True})  # warm-up
    score_stereoset(items.slice(0, 6), LanguageModel(model, tokenizer, "clm"), {"shared_prefix": False})
    variants = {  # name: (items, shared_prefix)
        "full": (items, False),
        "full, head at scored": (each_text_alone(items), True),
        "shared prefix": (items, True),
    }
    variants = {v: run for v, run in variants.items() if v == "full" or v in only}
    wall = {v: float("inf") for v in variants}
    cpu = dict(wall)
    scores = {}
    for _ in range(repeats):  # the variants take turns, so a burst of load on the machine hits all of them
        for variant, (table_in, shared) in variants.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            table = score_stereoset(table_in, LanguageModel(model, tokenizer, "clm"), {"shared_prefix": shared})
            wall[variant] = min(wall[variant], time.perf_counter() - started)
            cpu[variant] = min(cpu[variant], time.process_time() - cpu_started)
            scores[variant] = np.asarray(table.column("sum_logprob").to_pylist())
    diffs = {v: float(np.max(np.abs(scores[v] - scores["full"]))) for v in variants}
    print(f"{name}: shared tokens {shared_token_share(items, tokenizer):.0%}", flush=True)
    for variant in variants:
        print(
            f"  {variant:22s} {n_examples / wall[variant]:7.2f} items/s ({wall[variant]:6.1f} s, CPU "
            f"{cpu[variant]:6.1f} s)  speed-up over full {wall['full'] / wall[variant]:.2f}x "
            f"(CPU time {cpu['full'] / cpu[variant]:.2f}x)  max |diff| {diffs[variant]:.1e}",
            flush=True,
        )
    return max(diffs.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=120, help="StereoSet examples (3 sentences each)")
    parser.add_argument("--llama-layers", type=int, default=16, help="layers of the 1B Llama shape (16: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each variant; the fastest counts")
    parser.add_argument("--skip-head-variant", action="store_true", help="measure full and shared prefix only")
    parser.add_argument("--models", default="gpt2,llama-1b")
    parser.add_argument("--data-dir", default=os.environ.get("LMBIAS_TEST_DATA", str(REPO.parent / "shared" / "data")))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = parse_stereoset(Path(args.data_dir) / "stereoset" / "stereoset_dev_flat.jsonl")
    examples = sorted(set(dev.column("example_id").to_pylist()), key=dev.column("example_id").to_pylist().index)
    step = max(1, len(examples) // args.examples)
    chosen = set(examples[::step][: args.examples])
    mask = [e in chosen for e in dev.column("example_id").to_pylist()]
    items = dev.filter(mask)
    n_examples = len(chosen)
    print(
        f"{n_examples} StereoSet dev examples ({items.num_rows} sentences), {args.threads} threads, float32, CPU, "
        f"fastest of {args.repeats}, load average {os.getloadavg()[0]:.1f}"
    )
    words = load_word_list(DEFAULT_WORDS)
    only = {"shared prefix"} | (set() if args.skip_head_variant else {"full, head at scored"})
    worst = 0.0
    for name in args.models.split(","):
        if name == "gpt2":
            tokenizer = build_tokenizer("gpt2", words)
            model = gpt2_small(tokenizer)
        elif name == "llama-1b":
            tokenizer = build_tokenizer("llama", words)
            model = llama_1b(tokenizer, args.llama_layers)
            name = f"llama-1b{'' if args.llama_layers == 16 else f'/{args.llama_layers}L'}"
        else:
            parser.error(f"unknown model {name!r} (gpt2, llama-1b)")
        worst = max(worst, measure(name, model, tokenizer, items, n_examples, args.repeats, only))
        del model
    return 1 if worst > TOLERANCE else 0


if __name__ == "__main__":
    sys.exit(main())
