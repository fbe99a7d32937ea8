"""Training checkpoints: complete only when their marker is written, refused when they belong to another
configuration or fail their checksums.

Layout: <checkpoint_dir>/step-<global step>/ with model.pt (the parameters that train: every weight of a full
fine-tune, the adapter of a LoRA one; `trainable_state`), optimizer.pt, scheduler.pt, trainer.json
(counters, log rows, best-epoch bookkeeping), rng-<rank>.pt per process, optional best.pt, and last
COMPLETE.json: the run's fingerprint and the sha256 of every other file. An FSDP run (training.distributed:
fsdp) keeps model and optimizer as torch.distributed.checkpoint shards in dcp/ instead (every process
writes its own; lmbias.training.fsdp), checksummed like the rest. A new checkpoint is written
into a temp folder, renamed, then marked; older checkpoints are deleted only after that.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch

from lmbias.errors import DataError
from lmbias.io import file_sha256

log = logging.getLogger(__name__)

MARKER = "COMPLETE.json"
PREFIX = "step-"


def _step_of(path: Path) -> int:
    try:
        return int(path.name[len(PREFIX) :])
    except ValueError:
        return -1


def candidates(checkpoint_dir) -> list[Path]:
    """Checkpoint folders, newest first (marked or not)."""
    root = Path(checkpoint_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and _step_of(p) >= 0]
    return sorted(found, key=_step_of, reverse=True)


def verify(path: Path, fingerprint: str) -> None:
    """DataError naming the folder when the checkpoint is incomplete, of another run, or corrupt."""
    marker = path / MARKER
    if not marker.is_file():
        raise DataError("checkpoint is incomplete (no marker file; the job was stopped while writing it)", path)
    try:
        info = json.loads(marker.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"checkpoint marker is unreadable ({exc})", marker) from None
    if info.get("fingerprint") != fingerprint:
        raise DataError(
            "checkpoint belongs to another configuration (settings, seed, world size, corpus or model differ)", path
        )
    for name, digest in info.get("files", {}).items():
        f = path / name
        if not f.is_file() or file_sha256(f) != digest:
            raise DataError(f"checkpoint file {name} is missing or corrupt (checksum mismatch)", path)


def latest_good(checkpoint_dir, fingerprint: str) -> Path | None:
    """The newest checkpoint that passes `verify`; each refused one is logged with its reason."""
    for path in candidates(checkpoint_dir):
        try:
            verify(path, fingerprint)
            return path
        except DataError as exc:
            log.warning("refusing checkpoint: %s", exc)
    return None


def trainable_state(module) -> dict:
    """The state a checkpoint (and GPR's best epoch) keeps of `module`: its whole state dict when every
    parameter trains (full fine-tuning), else only the parameters that train (a LoRA adapter over a frozen
    base, which a resumed job reloads from the model folder: the fingerprint names model and revision)."""
    state = module.state_dict()
    params = dict(module.named_parameters())
    if all(p.requires_grad for p in params.values()):
        return {k: v.detach().cpu().clone() for k, v in state.items()}
    return {k: v.detach().cpu().clone() for k, v in state.items() if k in params and params[k].requires_grad}


def restore_state(module, state: dict, path=None) -> None:
    """Load a `trainable_state` back; a state of other parameters (another adapter) is a DataError."""
    params = dict(module.named_parameters())
    if all(p.requires_grad for p in params.values()):
        module.load_state_dict(state)
        return
    wanted = {k for k, p in params.items() if p.requires_grad}
    if set(state) != wanted:
        odd = sorted(set(state) ^ wanted)
        raise DataError(f"checkpoint holds other trainable parameters than this model's adapter (e.g. {odd[0]})", path)
    module.load_state_dict(state, strict=False)


def save(
    checkpoint_dir,
    step: int,
    fingerprint: str,
    accelerator,
    model,
    optimizer,
    scheduler,
    trainer_state: dict,
    best_state: dict | None = None,
) -> Path:
    """Write the checkpoint of `step` from every process (RNG per rank; the rest on the main process)."""
    root = Path(checkpoint_dir)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".{final.name}.tmp"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    accelerator.wait_for_everyone()
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state()
    torch.save(rng, tmp / f"rng-{accelerator.process_index}.pt")
    sharded = _is_sharded(model)
    if sharded:
        from lmbias.training.fsdp import DCP_FOLDER, save_sharded

        save_sharded(tmp / DCP_FOLDER, model, optimizer)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if not sharded:
            torch.save(trainable_state(accelerator.unwrap_model(model)), tmp / "model.pt")
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        if best_state is not None:
            torch.save(best_state, tmp / "best.pt")
        (tmp / "trainer.json").write_text(json.dumps(trainer_state, sort_keys=True))
        files = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        marker_tmp = final / f".{MARKER}.tmp"
        marker_tmp.write_text(json.dumps({"fingerprint": fingerprint, "step": step, "files": files}, indent=1))
        os.replace(marker_tmp, final / MARKER)
        for old in candidates(root):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint %s written", final)
    accelerator.wait_for_everyone()
    return final


def load(path: Path, accelerator, model, optimizer, scheduler) -> tuple[dict, dict | None]:
    """Restore model, optimizer, scheduler and this process's RNG; (trainer state, best state or None)."""
    if _is_sharded(model):
        from lmbias.training.fsdp import DCP_FOLDER, load_sharded

        if not (path / DCP_FOLDER).is_dir():
            raise DataError(f"checkpoint holds no sharded state ({DCP_FOLDER}/) for an FSDP run", path)
        load_sharded(path / DCP_FOLDER, model, optimizer)
    else:
        restore_state(accelerator.unwrap_model(model), torch.load(path / "model.pt", map_location="cpu"), path)
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu"))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt"))
    rng_file = path / f"rng-{accelerator.process_index}.pt"
    rng = torch.load(rng_file)
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])
    best = torch.load(path / "best.pt", map_location="cpu") if (path / "best.pt").is_file() else None
    return json.loads((path / "trainer.json").read_text()), best


def _is_sharded(model) -> bool:
    """True for a model sharded by FSDP2's fully_shard (training.distributed: fsdp)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)
