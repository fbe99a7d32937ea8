"""Parameter and optimizer-state bytes each process holds under FSDP (training.distributed: fsdp) vs DDP, and
each process's peak CPU memory while the model loads, with and without rank-0 loading.

    PYTHONPATH=src python bench/fsdp_memory.py [--processes 2] [--hidden 512 --layers 4]
                                               [--load-hidden 1024 --load-layers 6]

Table 1: N CPU processes (gloo, torch.distributed.run); each builds the same randomly initialised
Llama-shaped model, shards it with lmbias.training.fsdp.shard (the trainer's call) and takes one AdamW step.
DDP keeps a full replica per process: its bytes per process are the model's.

Table 2: a randomly initialised Llama-shaped model saved as a safetensors folder in bfloat16 (as large
checkpoints are published; the job loads float32 master weights from it), loaded for FSDP by N processes
through the job's calls (engine.models.load_model / load_empty_model, TrainModule, fsdp.shard,
fsdp.materialize), once with every process loading it (LMBIAS_FSDP_EVERY_PROCESS_LOADS=1, the path before
rank-0 loading), once with rank 0 loading it in float32 (as e13c5af did) and once with rank 0 reading it in
its stored bfloat16, upcast unit by unit as it is sharded (the default); each process's peak resident memory
(ru_maxrss: anonymous memory and the checkpoint's mapped pages) after its imports and after loading and
sharding, and the peak of its anonymous memory alone above the imports (RssAnon sampled every millisecond:
the tensors; a checkpoint read in its stored dtype stays memory-mapped, pages the kernel can drop and read
again). Training state (gradients, AdamW) is left out: on GPUs it is in device memory.
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
    from transformers import LlamaForCausalLM

    from lmbias.training import fsdp

    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    torch.manual_seed(0)
    model = LlamaForCausalLM(_config(hidden, layers))
    full = sum(_tensor_bytes(p) for p in model.parameters())
    fsdp.shard(model, torch.device("cpu"), world, "no")
    local = fsdp.local_parameter_bytes(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 32000, (2, 32))
    model(input_ids=ids, labels=ids).loss.backward()
    grads = sum(_tensor_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    optimizer.step()
    state = sum(
        _tensor_bytes(v) for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0
    )
    rows = [None] * world
    torch.distributed.all_gather_object(rows, (rank, full, local, grads, state))
    if rank == 0:
        mib = 2**20
        print(
            f"Llama-shaped model, hidden {hidden}, {layers} layers, vocab 32,000: {full / mib:,.1f} MiB of "
            f"float32 parameters; {world} processes"
        )
        print(
            f"{'rank':>4} | {'DDP params MiB':>14} | {'FSDP params MiB':>15} | {'FSDP/DDP':>8} | "
            f"{'FSDP grads MiB':>14} | {'FSDP AdamW state MiB':>20}"
        )
        for r, f, lo, g, st in sorted(rows):
            print(
                f"{r:>4} | {f / mib:>14,.1f} | {lo / mib:>15,.1f} | {lo / f:>8.3f} | {g / mib:>14,.1f} | "
                f"{st / mib:>20,.1f}"
            )
        print(f"sum of FSDP shards = {sum(r[2] for r in rows) / full:.3f} x the model")
    torch.distributed.destroy_process_group()


def _peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


class _AnonPeak:
    """The peak of this process's anonymous resident memory (RssAnon: tensors, not the checkpoint's mapped
    file pages, which the kernel may drop and read again), sampled every millisecond by a thread."""

    def __init__(self):
        import threading

        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))  # KiB

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, self.now())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now()) / 1024


def _config(hidden: int, layers: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=32000,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=8,
        tie_word_embeddings=False,
    )


def load_worker(folder: str, read: str) -> None:
    """One process of table 2: the FSDP job's loading calls on the saved model, peak RSS after each phase.
    `read`: stored = a loading process reads the checkpoint in its stored dtype where jobs._train does (rank 0
    of a rank0 init: lossless_dtype); float32 = in float32 (as before, e13c5af)."""
    import importlib

    from transformers.utils import logging as hf_logging

    importlib.import_module("transformers.models.llama.modeling_llama")  # before the baseline is read

    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_empty_model, load_model, lossless_dtype
    from lmbias.training import fsdp
    from lmbias.training.trainer import TrainModule

    hf_logging.disable_progress_bar()
    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    imports = _peak_mib()
    anon_imports, anon = _AnonPeak.now() / 1024, _AnonPeak()
    mode = fsdp.init_mode(world, resuming=False)
    spec = model_spec("bench-llama", {"path": folder, "family": "clm"})
    load = load_model if fsdp.loads_weights(mode, rank) else load_empty_model
    dtype = lossless_dtype(spec) if read == "stored" and mode == "rank0" and rank == 0 else torch.float32
    model = load(spec, torch_dtype=dtype)[0]
    read_as = "meta" if fsdp.is_empty(model) else str(next(model.parameters()).dtype).removeprefix("torch.")
    module = TrainModule(model, "clm")
    del model
    full = module.state_dict() if mode == "rank0" and rank == 0 else None
    fsdp.shard(module, torch.device("cpu"), world, "no")
    fsdp.materialize(module, torch.device("cpu"), mode, full)
    del full
    loaded = _peak_mib()
    anon_cost = anon.stop() - anon_imports
    shard = fsdp.local_parameter_bytes(module) / 2**20
    rows = [None] * world
    torch.distributed.all_gather_object(rows, (rank, mode, read_as, imports, loaded, anon_cost, shard))
    if rank == 0:
        for r, m, how, i, lo, an, sh in sorted(rows):
            print(
                f"{m:>13} | {r:>4} | {how:>8} | {i:>13,.0f} | {lo:>16,.0f} | {lo - i:>9,.0f} | {an:>9,.0f} | "
                f"{sh:>9,.1f}",
                flush=True,
            )
    torch.distributed.destroy_process_group()


def load_table(processes: int, hidden: int, layers: int, run) -> None:
    import tempfile

    from transformers import LlamaForCausalLM

    with tempfile.TemporaryDirectory(prefix="fsdp-load-") as tmp:
        torch.manual_seed(0)
        model = LlamaForCausalLM(_config(hidden, layers))
        mib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        largest = max(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        model.to(torch.bfloat16).save_pretrained(tmp, safe_serialization=True)
        del model
        from lmbias.engine.tiny import build_tiny_model

        tok = Path(tmp) / "tok"  # the job loads a tokenizer with the weights: the tiny Llama's
        build_tiny_model("llama", tok, seed=0)
        for name in os.listdir(tok):
            if name.startswith(("tokenizer", "special_tokens")):
                os.replace(tok / name, Path(tmp) / name)
        print(
            f"\nPeak CPU memory (ru_maxrss, MiB) of each of {processes} processes loading a Llama-shaped model "
            f"for FSDP: hidden {hidden}, {layers} layers, vocab 32,000: {mib:,.1f} MiB of float32 parameters "
            f"(largest tensor {largest:,.1f} MiB), stored in bfloat16 ({mib / 2:,.1f} MiB)"
        )
        print(
            f"{'init':>13} | {'rank':>4} | {'read as':>8} | {'after imports':>13} | {'after load+shard':>16} | "
            f"{'load cost':>9} | {'anon cost':>9} | {'shard MiB':>9}"
        )
        for every, read in (("1", "float32"), ("0", "float32"), ("0", "stored")):
            run(["--load-worker", tmp, "--read", read], {"LMBIAS_FSDP_EVERY_PROCESS_LOADS": every})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--load-hidden", type=int, default=1024, help="table 2's model width")
    ap.add_argument("--load-layers", type=int, default=6, help="table 2's model depth")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--load-worker", metavar="FOLDER", help=argparse.SUPPRESS)
    ap.add_argument("--read", default="stored", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.hidden, a.layers)
        return
    if a.load_worker:
        load_worker(a.load_worker, a.read)
        return
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(
        os.environ,
        PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""),
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
    )
    from lmbias.engine.distributed import main_process_port

    def run(args: list[str], extra_env: dict | None = None) -> None:
        port = main_process_port(str(Path(__file__).resolve()) + " ".join(args))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nproc_per_node",
                str(a.processes),
                "--master_port",
                str(port),
                __file__,
                *args,
            ],
            env=dict(env, **(extra_env or {})),
            check=True,
        )

    run(["--worker", "--hidden", str(a.hidden), "--layers", str(a.layers)])
    load_table(a.processes, a.load_hidden, a.load_layers, run)


if __name__ == "__main__":
    main()
