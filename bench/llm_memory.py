"""Memory and speed at a real decoder's shape (issue 22, section 5): full fp32 fine-tuning vs a LoRA adapter over
bfloat16 (and float32) base weights, with and without gradient checkpointing; scoring in fp32 vs bf16 weights.
Then the memory a 7B decoder needs for each step, scaled from these measurements.

    .venv/bin/python bench/llm_memory.py [--layers 4] [--vocab 32000] [--steps 4] [--batch-size 4]
        [--max-length 64] [--sentences 128] [--threads 2] [--only full-fp32,lora-bf16,...]

Model: a randomly initialised LlamaForCausalLM with Llama-3.2-1B's width (hidden 2048, intermediate 8192, 32
heads, 8 key/value heads, tied embeddings, rope theta 500,000), built locally (no hub) into a temporary folder
and saved in bfloat16 as the hub's checkpoint is, with the tiny Llama's tokenizer (lmbias.engine.tiny). Its 16
layers and 128,256-token vocabulary are cut (default 4 layers, 32,000 rows) so that the full fp32 AdamW
fine-tune stays under ~9 GiB of RSS on a shared 24 GiB machine; the shape used is printed.

Every configuration runs in its own subprocess, so its peak RSS (ru_maxrss) is its own:
- training goes through lmbias's own path (lmbias.training.jobs.train_job: model loading in the entry's
  dtype, the LoRA adapter of lmbias.training.adapters, the trainer, the output folder) on a generated corpus
  of random words of the tokenizer's word list (max_length tokens each, clm); tokens/s is the median of the
  trainer's per-step rate (train_log.parquet) over the steps after the first;
- scoring goes through lmbias.engine.models.load_model and lmbias.engine.scoring.sentence_logprobs on the
  first --sentences CrowS-Pairs gender sentences (both sides of each pair); items/s = sentences / seconds of
  the sentence_logprobs call.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

#: Llama-3.2-1B (meta-llama/Llama-3.2-1B config.json)
ONE_B = {
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "num_hidden_layers": 16,
    "tie_word_embeddings": True,
}
#: Llama-2-7B (meta-llama/Llama-2-7b-hf config.json): the 7B that docs/llms.md's table scales to
SEVEN_B = {
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "num_hidden_layers": 32,
    "tie_word_embeddings": False,
}
LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GIB = 2**30

CONFIGS = {
    # name: (kind, entry dtype, adapter, gradient checkpointing)
    "full-fp32": ("train", "fp32", False, False),
    "lora-bf16": ("train", "bf16", True, False),
    "lora-bf16-gc": ("train", "bf16", True, True),
    "lora-fp32": ("train", "fp32", True, False),
    "lora-fp32-gc": ("train", "fp32", True, True),
    "score-fp32": ("score", "fp32", False, False),
    "score-bf16": ("score", "bf16", False, False),
}


def vm_rss() -> int:
    """Current resident set size in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def llama_config(shape: dict, tokenizer):
    from transformers import LlamaConfig

    return LlamaConfig(
        **shape,
        max_position_embeddings=2048,
        rope_theta=500000.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=None,
    )


def build(folder: Path, layers: int, vocab: int) -> dict:
    import torch
    from transformers import LlamaForCausalLM

    from lmbias.engine.tiny import build_llama_tokenizer
    from lmbias.engine.tiny_vocab import load_word_list

    tokenizer = build_llama_tokenizer(load_word_list())
    shape = {**ONE_B, "num_hidden_layers": layers, "vocab_size": max(vocab, len(tokenizer))}
    torch.manual_seed(0)
    model = LlamaForCausalLM(llama_config(shape, tokenizer))
    model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return {"shape": shape, "parameters": sum(p.numel() for p in model.parameters()), "tokenizer": len(tokenizer)}


def corpus(path: Path, n: int, words_per_text: int, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lmbias.engine.tiny_vocab import load_word_list

    words = [w for w in load_word_list() if w.isalpha()]
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(words) for _ in range(words_per_text)) for _ in range(n)]
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in texts]), path)


def crows_gender(n: int) -> list[str]:
    import csv

    data = Path(os.environ.get("LMBIAS_TEST_DATA", REPO.parent / "shared" / "data"))
    out = []
    with open(data / "crows_pairs" / "crows_pairs_anonymized.csv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["bias_type"] == "gender":
                out += [row["sent_more"], row["sent_less"]]
            if len(out) >= n:
                break
    return out[:n]


def child(args) -> dict:
    """One configuration, measured in this process."""
    import torch

    torch.set_num_threads(args.threads)
    kind, dtype, adapter, gc = CONFIGS[args.child]
    import accelerate  # noqa: F401  (B, the process before the model, holds every library the step imports)
    import peft  # noqa: F401
    import transformers  # noqa: F401

    import lmbias.engine.scoring  # noqa: F401
    import lmbias.training.jobs  # noqa: F401
    import lmbias.training.trainer  # noqa: F401

    before = vm_rss()
    folder = Path(args.folder)
    entry = {"path": str(folder), "family": "clm", "dtype": dtype}
    if kind == "score":
        from lmbias.engine.model_spec import model_spec
        from lmbias.engine.models import load_model
        from lmbias.engine.scoring import sentence_logprobs

        texts = crows_gender(args.sentences)
        model, tokenizer = load_model(model_spec("bench-1b", entry))
        loaded = vm_rss()
        sentence_logprobs(model, tokenizer, texts[:2])  # warm-up
        started = time.perf_counter()
        with torch.inference_mode():
            sentence_logprobs(model, tokenizer, texts)
        seconds = time.perf_counter() - started
        return {
            "rate": len(texts) / seconds,
            "unit": "items/s",
            "seconds": seconds,
            "before": before,
            "loaded": loaded,
            "peak": peak_rss(),
            "parameters": sum(p.numel() for p in model.parameters()),
            "trainable": 0,
        }
    import pyarrow.parquet as pq

    from lmbias.training.jobs import train_job

    settings = {
        "objective": "clm",
        "batch_size": args.batch_size,
        "max_steps": args.steps,
        "epochs": 1,
        "learning_rate": 1e-4,
        "max_length": args.max_length,
        "precision": "auto",
        "gradient_checkpointing": gc,
    }
    if adapter:
        settings["adapter"] = {"kind": "lora", "r": 8, "alpha": 16, "dropout": 0.05}
    out = Path(args.work) / args.child
    started = time.perf_counter()
    train_job(entry, "bench-1b", str(Path(args.work) / "corpus.parquet"), str(out), 0, settings)
    seconds = time.perf_counter() - started
    rows = pq.read_table(out / "train_log.parquet").to_pylist()
    rates = [r["tokens_per_second"] for r in rows[1:]] or [rows[0]["tokens_per_second"]]
    info = json.loads((out / "training.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    total = llama_params({k: config[k] for k in ONE_B})
    return {
        "rate": statistics.median(rates),
        "unit": "tokens/s",
        "seconds": seconds,
        "before": before,
        "loaded": None,
        "peak": peak_rss(),
        "parameters": total,
        "trainable": info["trainable_parameters"],
        "tokens_per_step": statistics.median(r["tokens"] for r in rows),
    }


def lora_params(shape: dict, r: int = 8) -> int:
    """Trainable parameters of a rank-r LoRA on Llama's default targets: r * (in + out) per projection."""
    h, i = shape["hidden_size"], shape["intermediate_size"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    per_layer = r * ((h + h) * 2 + (h + kv) * 2 + (h + i) * 3)
    return per_layer * shape["num_hidden_layers"]


def llama_params(shape: dict) -> int:
    h, i, v = shape["hidden_size"], shape["intermediate_size"], shape["vocab_size"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    layer = h * h * 2 + h * kv * 2 + 3 * h * i + 2 * h
    return layer * shape["num_hidden_layers"] + v * h * (1 if shape["tie_word_embeddings"] else 2) + h


def seven_b(results: dict, shape: dict, measured_params: int) -> list[tuple[str, str, float, str]]:
    """The memory a 7B model needs per step: M = B + w * P7 + s * T7 + A * (d7 * L7) / (d * L).
    B = the process before the model (measured), w = bytes per weight (4 fp32, 2 bf16), s = optimizer state and
    gradient bytes per trainable parameter (AdamW, float32: 4 grad + 8 moments = 12; 0 for scoring), A = the
    rest of the measured peak (activations, logits, allocator slack: peak - B - w * P - s * T), scaled by
    width x depth at the same tokens per batch."""
    p7 = llama_params(SEVEN_B)
    scale = (SEVEN_B["hidden_size"] * SEVEN_B["num_hidden_layers"]) / (
        shape["hidden_size"] * shape["num_hidden_layers"]
    )
    rows = []
    steps = [
        ("scoring, bf16 weights", "score-bf16", 2, 0, 0),
        ("fitting SentenceDebias / INLP (a forward pass, bf16)", "score-bf16", 2, 0, 0),
        ("LoRA training, bf16 base + gradient checkpointing", "lora-bf16-gc", 2, 12, lora_params(SEVEN_B)),
        ("LoRA training, bf16 base", "lora-bf16", 2, 12, lora_params(SEVEN_B)),
        ("full fine-tune, fp32 AdamW", "full-fp32", 4, 12, p7),
        ("scoring, fp32 weights", "score-fp32", 4, 0, 0),
    ]
    for label, name, w, s, t7 in steps:
        r = results.get(name)
        if r is None:
            continue
        trainable = r["trainable"] if s else 0
        rest = max(r["peak"] - r["before"] - w * measured_params - s * trainable, 0)
        need = r["before"] + w * p7 + s * t7 + rest * scale
        rows.append(
            (
                label,
                name,
                need / 1e9,
                f"{r['before'] / GIB:.2f} GiB + {w} B x {p7 / 1e9:.2f} B"
                + (f" + {s} B x {t7 / 1e6:,.0f} M" if s else "")
                + f" + {rest / GIB:.2f} GiB x {scale:.0f}",
            )
        )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--sentences", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=",".join(CONFIGS))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child == "build":
        print(json.dumps(build(Path(args.folder), args.layers, args.vocab)))
        return 0
    if args.child:
        print("RESULT " + json.dumps(child(args)))
        return 0
    with tempfile.TemporaryDirectory(prefix="lmbias-llm-memory-") as tmp:
        work, folder = Path(tmp), Path(tmp) / "model"
        common = [
            "--layers",
            str(args.layers),
            "--vocab",
            str(args.vocab),
            "--steps",
            str(args.steps),
            "--batch-size",
            str(args.batch_size),
            "--max-length",
            str(args.max_length),
            "--sentences",
            str(args.sentences),
            "--threads",
            str(args.threads),
            "--folder",
            str(folder),
            "--work",
            str(work),
        ]
        built = json.loads(
            subprocess.run(
                [sys.executable, __file__, "--child", "build", *common], check=True, capture_output=True, text=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        shape, params = built["shape"], built["parameters"]
        print(
            f"model: LlamaForCausalLM, Llama-3.2-1B width, {params / 1e6:,.0f} M parameters: "
            + ", ".join(f"{k} {v}" for k, v in shape.items())
            + f" (1B: {ONE_B['num_hidden_layers']} layers, vocab "
            f"{ONE_B['vocab_size']:,}); tokenizer {built['tokenizer']:,} tokens; batch {args.batch_size} x "
            f"{args.max_length} tokens, {args.steps} steps; {args.sentences} CrowS-Pairs gender sentences; "
            f"{args.threads} threads",
            flush=True,
        )
        corpus(work / "corpus.parquet", args.batch_size * (args.steps + 1), args.max_length)
        results = {}
        for name in args.only.split(","):
            proc = subprocess.run([sys.executable, __file__, "--child", name, *common], capture_output=True, text=True)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if proc.returncode or line is None:
                print(f"{name}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}", flush=True)
                continue
            results[name] = json.loads(line[len("RESULT ") :])
            r = results[name]
            print(
                f"  {name}: peak {r['peak'] / GIB:.2f} GiB, {r['rate']:,.1f} {r['unit']} ({r['seconds']:.0f} s)",
                flush=True,
            )
    print()
    print("| configuration | parameters (trainable) | peak RSS GiB | rate | memory vs full fp32 | rate vs full fp32 |")
    print("|---|---|---:|---:|---:|---:|")
    ref = results.get("full-fp32")
    sref = results.get("score-fp32")
    for name, r in results.items():
        base = ref if CONFIGS[name][0] == "train" else sref
        mem = f"{r['peak'] / base['peak']:.0%}" if base else "-"
        rate = f"{r['rate'] / base['rate']:.2f}x" if base else "-"
        trainable = f" ({r['trainable'] / 1e6:,.2f} M)" if r["trainable"] else ""
        print(
            f"| {name} | {r['parameters'] / 1e6:,.0f} M{trainable} | {r['peak'] / GIB:.2f} | "
            f"{r['rate']:,.1f} {r['unit']} | {mem} | {rate} |"
        )
    print("(scoring rows are compared with score-fp32)")
    print()
    print(
        f"7B (Llama-2-7B shape, {llama_params(SEVEN_B) / 1e9:.2f} B parameters; LoRA r 8 on the default targets: "
        f"{lora_params(SEVEN_B) / 1e6:,.1f} M trainable):"
    )
    print("| step | measured from | memory GB | B + w x P + s x T + A x (d x L scale) |")
    print("|---|---|---:|---|")
    for label, name, gb, formula in seven_b(results, shape, params):
        print(f"| {label} | {name} | {gb:.1f} | {formula} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"shape": shape, "parameters": params, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
