"""Parameter and optimizer-state bytes each process holds under FSDP (training.distributed: fsdp) vs DDP.

    PYTHONPATH=src python bench/fsdp_memory.py [--processes 2] [--hidden 512 --layers 4]

Starts N CPU processes (gloo, torch.distributed.run); each builds the same randomly initialised Llama-shaped
model, shards it with lmbias.training.fsdp.shard (the trainer's call) and takes one AdamW step. DDP keeps a
full replica per process: its bytes per process are the model's. Prints one table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import torch


def _tensor_bytes(t) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def worker(hidden: int, layers: int) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from lmbias.training import fsdp

    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                         num_attention_heads=8, num_key_value_heads=8, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    full = sum(_tensor_bytes(p) for p in model.parameters())
    fsdp.shard(model, torch.device("cpu"), world, "no")
    local = fsdp.local_parameter_bytes(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 32000, (2, 32))
    model(input_ids=ids, labels=ids).loss.backward()
    grads = sum(_tensor_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    optimizer.step()
    state = sum(_tensor_bytes(v) for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)
                and v.dim() > 0)
    rows = [None] * world
    torch.distributed.all_gather_object(rows, (rank, full, local, grads, state))
    if rank == 0:
        mib = 2 ** 20
        print(f"Llama-shaped model, hidden {hidden}, {layers} layers, vocab 32,000: {full / mib:,.1f} MiB of "
              f"float32 parameters; {world} processes")
        print(f"{'rank':>4} | {'DDP params MiB':>14} | {'FSDP params MiB':>15} | {'FSDP/DDP':>8} | "
              f"{'FSDP grads MiB':>14} | {'FSDP AdamW state MiB':>20}")
        for r, f, lo, g, st in sorted(rows):
            print(f"{r:>4} | {f / mib:>14,.1f} | {lo / mib:>15,.1f} | {lo / f:>8.3f} | {g / mib:>14,.1f} | "
                  f"{st / mib:>20,.1f}")
        print(f"sum of FSDP shards = {sum(r[2] for r in rows) / full:.3f} x the model")
    torch.distributed.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.hidden, a.layers)
        return
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    from lmbias.engine.distributed import main_process_port

    port = main_process_port(str(Path(__file__).resolve()))
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(a.processes),
                    "--master_port", str(port), __file__, "--worker", "--hidden", str(a.hidden),
                    "--layers", str(a.layers)], env=env, check=True)


if __name__ == "__main__":
    main()
