"""The fine-tuning job: model entry + corpus + settings -> an atomically written model folder.

out_dir holds model.safetensors, config.json, tokenizer files, train_log.parquet and training.json;
it is written to a temp folder beside it and renamed, so a failed job leaves nothing. Checkpoints go to
`checkpoint_dir` (default `<out_dir>.checkpoints`) and are removed after success. The main process holds
`<checkpoint_dir>/LOCK` for the whole job (lmbias.training.output_lock): a second job for the same output
stops at once instead of resuming from the first one's checkpoints.

Full fine-tuning loads the weights in float32 whatever the model entry's `dtype` (and whatever dtype the
checkpoint was saved in): the optimizer updates these master weights, and an update much smaller than a
weight vanishes when it is rounded to bfloat16's 8 mantissa bits. Mixed precision is the settings'
`precision` (autocast through Accelerate). Parameter-efficient training keeps a half-precision base frozen
and trains float32 adapters over it; that is where `dtype` applies.
"""

from __future__ import annotations

import contextlib
import json
import logging
import platform
import shutil
from pathlib import Path

import pyarrow as pa
import torch

from lmbias.errors import ConfigError
from lmbias.io import atomic_folder, write_table_atomic
from lmbias.training.output_lock import is_main_process, training_lock
from lmbias.training.settings import FAMILY_OBJECTIVE, TrainingSettings

log = logging.getLogger(__name__)

LOG_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("epoch", pa.int64()),
        ("loss", pa.float64()),
        ("learning_rate", pa.float64()),
        ("validation_metric", pa.float64()),
        ("tokens_per_second", pa.float64()),
        ("bias_metric", pa.float64()),
        ("er_loss", pa.float64()),
        ("tokens", pa.int64()),  # tokens: real (non-pad) tokens of the step, all processes
        ("trainable_parameters", pa.int64()),  # what the optimizer updates: every weight, or a LoRA adapter's
    ]
)


def check_objective(settings: TrainingSettings, family: str, model_name: str) -> None:
    if settings.objective == "gpr":
        if family != "mlm":
            raise ConfigError(
                f"models.{model_name}.family: gpr (pronoun prediction at a mask) needs an mlm model, not {family}"
            )
    elif FAMILY_OBJECTIVE[family] != settings.objective:
        raise ConfigError(
            f"settings.objective: {settings.objective!r} does not fit models.{model_name} (family "
            f"{family} trains with {FAMILY_OBJECTIVE[family]!r})"
        )


def _versions() -> dict:
    import accelerate
    import torch
    import transformers

    import lmbias

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
        "lmbias": lmbias.__version__,
    }


def weights_sha256(model) -> str:
    """sha256 over every parameter and buffer (name, bytes): equal on every rank of a data-parallel run."""
    return state_sha256(model.state_dict())


def state_sha256(state: dict) -> str:
    """sha256 over a state dict's tensors (name, bytes)."""
    import hashlib

    h = hashlib.sha256()
    for name, t in sorted(state.items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def train_job(
    model_entry: dict,
    model_name: str,
    corpus: str,
    out_dir: str,
    seed: int,
    settings: dict,
    checkpoint_dir: str | None = None,
    log=None,
) -> None:
    from lmbias.engine.model_spec import check_trainable, model_spec

    logger = log or logging.getLogger(__name__)
    s = TrainingSettings.from_dict(settings, "settings")
    check_trainable(model_name, model_entry)  # device_map: scoring only; FSDP shards a model too large for one GPU
    spec = model_spec(model_name, model_entry)
    check_objective(s, spec.family, model_name)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed: {seed!r} is not an integer")
    out = Path(out_dir)
    ckpt = Path(checkpoint_dir) if checkpoint_dir else out.with_name(out.name + ".checkpoints")
    from lmbias.engine.distributed import apply_slurm_rendezvous

    apply_slurm_rendezvous()  # a task started by srun: its rank (which process locks) from Slurm's variables
    # One process per output: a duplicate job (an orphan of a lost session still running) stops here.
    with training_lock(ckpt) if is_main_process() else contextlib.nullcontext():
        _train(model_name, corpus, out, seed, s, spec, ckpt, logger)


#: model/merged/: base + adapter merged into one plain model folder (adapter option merge: true)
MERGED_FOLDER = "merged"


def _save_adapter(adapter, folder: Path, spec, base_commit: str) -> None:
    """The adapter in peft's format (adapter_config.json naming the base's hub id or folder and, for a hub
    model, its commit; adapter_model.safetensors: the adapter's weights only); peft's empty model-card
    template is left out."""
    from lmbias.training.adapters import set_base_record

    set_base_record(adapter, spec.source, base_commit or (None if spec.is_local else spec.revision))
    # save_embedding_layers False: peft would otherwise copy a whole (frozen, unchanged) input or output
    # embedding matrix into the adapter file when one is a target (lm_head), i.e. part of the base
    adapter.peft_model.save_pretrained(folder, safe_serialization=True, save_embedding_layers=False)
    (folder / "README.md").unlink(missing_ok=True)


def _resume_point(ckpt: Path, fingerprint: str, accelerator):
    """The checkpoint every process of the job resumes from (None: a fresh start): the main process looks
    (checksums read once, not once per process), the others take its answer, so all load alike."""
    from lmbias.training.checkpoints import latest_good

    found = [str(latest_good(ckpt, fingerprint) or "") if accelerator.is_main_process else None]
    if accelerator.num_processes > 1:
        torch.distributed.broadcast_object_list(found, src=0)
    return Path(found[0]) if found[0] else None


def _train(model_name, corpus, out: Path, seed: int, s: TrainingSettings, spec, ckpt: Path, logger) -> None:
    from lmbias.engine.models import (
        dtype_name,
        load_empty_model,
        load_model,
        lossless_dtype,
        resolved_commit,
        weights_dtype,
    )
    from lmbias.training.bias_probe import make_probe
    from lmbias.training.data import load_corpus
    from lmbias.training.trainer import SEARCH, Trainer, make_accelerator

    data = load_corpus(corpus, s)
    extra = {}
    if s.block_augmentation is not None:  # a checkpoint trained with another word list is not resumed
        from lmbias.io import file_sha256
        from lmbias.training.packing import load_bias_bench_pairs

        load_bias_bench_pairs(s.block_augmentation_words)  # a missing or bad file fails before the model loads
        extra["block_augmentation_words_sha256"] = file_sha256(s.block_augmentation_words)
    probe = make_probe(s.eval_bias_metric, spec.family) if s.eval_bias_every_steps else None
    accelerator = make_accelerator(s.precision)
    # full fine-tuning: float32 master weights; LoRA: the frozen base in the entry's dtype (module docstring)
    base_dtype = torch.float32 if s.adapter is None else weights_dtype(spec.dtype, accelerator.device)
    identity = dict(
        seed=seed, world=accelerator.num_processes, corpus=data.sha256, model=spec.source, revision=spec.revision
    )
    fsdp_init, resume_from = "every_process", SEARCH
    if s.distributed == "fsdp":  # no adapter: the fingerprint is known before the model loads
        from lmbias.training import fsdp

        resume_from = _resume_point(ckpt, s.fingerprint(**identity, **extra), accelerator)
        fsdp_init = fsdp.init_mode(accelerator.num_processes, resume_from is not None)
    if fsdp_init == "every_process" or fsdp.loads_weights(fsdp_init, accelerator.process_index):
        # FSDP rank 0 reads the checkpoint in its stored dtype (exact), upcast unit by unit as fsdp.shard shards it
        dtype = lossless_dtype(spec, base_dtype) if fsdp_init == "rank0" else base_dtype
        model, tokenizer = load_model(spec, torch_dtype=dtype)
    else:  # FSDP: the weights come from rank 0 or from the checkpoint's shards, after sharding
        model, tokenizer = load_empty_model(spec, torch_dtype=base_dtype)
        logger.info(
            "process %d of %d: %s built on the meta device, no weights read (FSDP init %s)",
            accelerator.process_index,
            accelerator.num_processes,
            model_name,
            fsdp_init,
        )
    base_commit = resolved_commit(model)  # a hub base's commit ("" for a local folder)
    if s.objective in ("mlm", "infilling", "gpr") and tokenizer.mask_token_id is None:
        raise ConfigError(f"models.{model_name}: the tokenizer has no mask token ({s.objective} needs one)")
    model.train()
    if s.adapter is not None:  # a checkpoint's adapter trained over another dtype of the base is not resumed
        extra["base_dtype"] = dtype_name(model)
    fingerprint = s.fingerprint(**identity, **extra)
    trainer = Trainer(
        model,
        tokenizer,
        spec.family,
        data,
        s,
        seed,
        ckpt,
        fingerprint,
        accelerator,
        probe,
        model_name=model_name,
        fsdp_init=fsdp_init,
        resume_from=resume_from,
    )
    result = trainer.run()
    from accelerate.utils import gather_object

    adapter = trainer.adapter
    if trainer.fsdp:  # no process holds the whole model: gathered on the main process (collective)
        final = trainer.final_model()
        rank_sums = [weights_sha256(final)] if accelerator.is_main_process else []
    elif adapter is None:
        rank_sums = gather_object([weights_sha256(trainer.hf_model)])
    else:  # the adapter's weights: the base is frozen
        from lmbias.training.checkpoints import trainable_state

        rank_sums = gather_object([state_sha256(trainable_state(trainer.hf_model))])
    if accelerator.is_main_process:
        final = trainer.final_model() if not trainer.fsdp else final
        with atomic_folder(out) as tmp:
            if adapter is None:
                final.save_pretrained(tmp, safe_serialization=True)
            else:
                _save_adapter(adapter, tmp, spec, base_commit)
            tokenizer.save_pretrained(tmp)
            rows = [{k: r.get(k) for k in LOG_SCHEMA.names} for r in result.log_rows]
            write_table_atomic(pa.Table.from_pylist(rows, schema=LOG_SCHEMA), tmp / "train_log.parquet")
            info = {
                "model_name": model_name,
                "base_model": spec.source,
                "revision": spec.revision,
                "family": spec.family,
                "corpus": str(corpus),
                "corpus_sha256": data.sha256,
                "seed": seed,
                "world_size": accelerator.num_processes,
                "distributed": s.distributed,
                "settings": s.to_dict(),
                "steps": result.steps,
                "selected_epoch": result.selected_epoch,
                "resumed_from_step": result.resumed_from,
                "examples": len(data.texts),
                "versions": _versions(),
                "weights_dtype": dtype_name(final),
                "rank_weights_sha256": rank_sums,
                "base_model_commit": base_commit,
                "trainable_parameters": trainer.trainable_parameters,
                "adapter": adapter.record(s.adapter) if adapter is not None else None,
                **extra,
            }
            if s.pack_texts:
                info["training_examples"] = len(trainer.examples)  # blocks (augmented: both versions)
            (tmp / "training.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
            if adapter is not None and s.adapter["merge"]:  # last: merging folds the adapter into the base
                merged = adapter.peft_model.merge_and_unload()
                merged.save_pretrained(tmp / MERGED_FOLDER, safe_serialization=True)
                tokenizer.save_pretrained(tmp / MERGED_FOLDER)
        shutil.rmtree(ckpt, ignore_errors=True)
        logger.info(
            "trained %s (%s, seed %d) for %d steps on %d processes -> %s",
            model_name,
            s.objective,
            seed,
            result.steps,
            accelerator.num_processes,
            out,
        )
    accelerator.wait_for_everyone()
