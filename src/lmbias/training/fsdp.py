"""FSDP2 full fine-tuning (training.distributed: fsdp): parameters, gradients and optimizer state sharded over
the processes of the job with torch's `fully_shard`.

The same calls run on CPU (gloo, the tests) and on GPUs (NCCL): a 1-D device mesh of the job's processes
on the accelerator's device type, each transformer layer sharded as one unit (FSDP_LAYERS, else the
model's `_no_split_modules`), then the root (embeddings, final norm, heads: tied weights stay in one
unit). Mixed precision: a policy that gathers parameters in bfloat16 and reduces gradients in float32
when the settings' precision is bf16; float32 otherwise. Accelerate still starts the process group and
provides autocast and reductions; it does not wrap the model (its FSDP plugin runs as plain DDP on CPU).

Checkpoints (sharded, for resume): torch.distributed.checkpoint of the model's and optimizer's sharded
state dicts, every process writing its own shard into the checkpoint folder's `dcp/`. The final model:
the full state dict gathered to rank 0 and saved as one ordinary safetensors model, so scoring is
unchanged.

Loading (init_mode): no process but the main one reads the weights. The main process reads the checkpoint
in its stored dtype (engine.models.lossless_dtype: bfloat16 for a hub checkpoint; float32 stays float32),
which transformers keeps memory-mapped, and `shard` upcasts it to the float32 master weights one unit at a
time right before sharding it (exact), so the main process holds its shard plus one float32 unit in flight
(and the mapped checkpoint pages), never the float32 model; every other process builds it with its parameters on
the meta device (engine.models.empty_from_config: no memory; buffers such as rotary inv_freq or position
ids computed as __init__ computes them, tied weights tied); every process applies the same fully_shard
units; then the meta processes allocate their empty shards and the main process's full state dict is
broadcast into every shard (set_model_state_dict, broadcast_from_rank0), the buffers and the CPU random
generator's state with it (building on meta draws no random numbers, the main process's set_dropout
rebuild does, in the stored dtype: it draws the random numbers a float32 rebuild draws, tested). So no
process of a 70B job holds its 280 GB of float32, and the weights, buffers and training steps are those of
every process loading in float32 (tested bit-identical, a bfloat16-stored checkpoint included). A resumed
job reads no model weights at all: every process builds on meta and takes its shards from the checkpoint.
"""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger(__name__)

#: The transformer layer classes sharded one by one (each is one all-gather / reduce-scatter unit).
FSDP_LAYERS = frozenset(
    {
        "LlamaDecoderLayer",
        "GPT2Block",
        "BertLayer",
        "RobertaLayer",
        "AlbertLayer",
        "BartEncoderLayer",
        "BartDecoderLayer",
        "Qwen2DecoderLayer",
        "Olmo2DecoderLayer",
        "GPTNeoXLayer",
        "MistralDecoderLayer",
        "GemmaDecoderLayer",
        "Gemma2DecoderLayer",
    }
)

#: the folder of a checkpoint that holds the sharded model and optimizer state
DCP_FOLDER = "dcp"


#: 1: every process loads the whole model before sharding (the path before rank-0 loading; the same weights):
#: a switch for the tests that compare both, and for a model that cannot be built on the meta device
EVERY_PROCESS_ENV = "LMBIAS_FSDP_EVERY_PROCESS_LOADS"

#: where each process's weights come from (init_mode): every_process = each loads the checkpoint (one
#: process, or EVERY_PROCESS_ENV); rank0 = the main process loads it, the others build on meta and receive
#: their shards by broadcast; checkpoint = a resumed job: every process builds on meta, its shards come
#: from the sharded training checkpoint
INIT_MODES = ("every_process", "rank0", "checkpoint")


def init_mode(world: int, resuming: bool) -> str:
    """How the processes of an FSDP job of `world` processes get their weights (INIT_MODES)."""
    if os.environ.get(EVERY_PROCESS_ENV, "") not in ("", "0"):
        return "every_process"
    if resuming:
        return "checkpoint"
    return "rank0" if world > 1 else "every_process"


def loads_weights(mode: str, rank: int) -> bool:
    """Whether process `rank` reads the model's weights under `mode` (else it builds it on meta)."""
    if mode not in INIT_MODES:
        raise ValueError(f"FSDP init mode {mode!r} is not one of {', '.join(INIT_MODES)}")
    return mode == "every_process" or (mode == "rank0" and rank == 0)


def is_empty(module: torch.nn.Module) -> bool:
    """True when `module`'s parameters are on the meta device (built without weights)."""
    return any(p.is_meta for p in module.parameters())


def materialize(module: torch.nn.Module, device: torch.device, mode: str, full_state: dict | None = None) -> None:
    """After `shard`: a meta process allocates its (empty) shards on `device`, keeping the buffers it
    computed; under mode rank0 (collective) rank 0's `full_state` (its state dict taken before sharding;
    None elsewhere) is broadcast into every process's shards, then rank 0's buffers and CPU random
    generator state. A buffer that a meta process computed differently from rank 0's loaded model is
    logged (a resume, which has no rank 0 model, would use the computed one)."""
    if is_empty(module):
        buffers = {name: b for name, b in module.named_buffers()}
        module.to_empty(device=device)  # FSDP2 re-points its sharded parameters at the new storage
        for name, value in buffers.items():
            owner, _, leaf = name.rpartition(".")
            module.get_submodule(owner)._buffers[leaf] = value.to(device)
        if is_empty(module):
            raise RuntimeError("FSDP: parameters left on the meta device after to_empty")
    if mode != "rank0":
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    rank = torch.distributed.get_rank()
    if (rank == 0) != (full_state is not None):
        raise RuntimeError(
            f"FSDP rank0 init: process {rank} {'has' if full_state is not None else 'lacks'} "
            "a full state dict (only rank 0 holds one)"
        )
    set_model_state_dict(
        module,
        full_state if rank == 0 else {},
        options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True),
    )
    for name, b in module.named_buffers():  # non-persistent buffers are in no state dict
        computed = b.detach().clone()
        torch.distributed.broadcast(b.data, src=0)
        if rank and not torch.equal(computed, b):
            log.warning(
                "FSDP: buffer %s as process %d computed it differs from the loaded model's (rank 0's "
                "taken; a resumed job would keep the computed one)",
                name,
                rank,
            )
    state = [torch.get_rng_state()]
    torch.distributed.broadcast_object_list(state, src=0)
    torch.set_rng_state(state[0])


def layer_classes(model) -> set[str]:
    """Names of the classes sharded as units: FSDP_LAYERS present in `model`, else its `_no_split_modules`."""
    present = {type(m).__name__ for m in model.modules()}
    found = present & FSDP_LAYERS
    if not found:
        found = present & set(getattr(model, "_no_split_modules", None) or ())
    if not found:
        raise ValueError(
            f"training.distributed: fsdp: no transformer layer class known in {type(model).__name__} "
            f"(known: {', '.join(sorted(FSDP_LAYERS))})"
        )
    return found


def mixed_precision_policy(mode: str):
    """`mode` as trainer.mixed_precision resolves it: bf16 -> bfloat16 parameters, float32 gradient
    reduction; no -> float32 throughout."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if mode == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if mode == "no":
        return MixedPrecisionPolicy()
    raise ValueError(f"training.precision: {mode} is not available with distributed: fsdp (use bf16 or fp32)")


def shard(module: torch.nn.Module, device: torch.device, world: int, mode: str) -> torch.nn.Module:
    """`module` sharded in place over a mesh of `world` processes of `device`'s type (needs the process group
    started, or world 1): each layer, then the root."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if not torch.distributed.is_initialized():  # one process (no launcher): a group of one, same code path
        if world != 1:
            raise RuntimeError("training.distributed: fsdp needs a process group (launch through accelerate/srun)")
        torch.distributed.init_process_group(
            "gloo" if device.type == "cpu" else "nccl", store=torch.distributed.HashStore(), rank=0, world_size=1
        )
    mesh = init_device_mesh(device.type, (world,))
    policy = mixed_precision_policy(mode)
    # no module.to(device) first: each fully_shard call moves its own unit's weights to the mesh's device and
    # shards them, so a GPU holds one whole layer at a time, never the whole model
    names = layer_classes(module)
    narrow = _narrow_buffers_to_master(module)
    for sub in list(module.modules()):
        if type(sub).__name__ in names:
            if narrow:
                _to_master(sub)
            fully_shard(sub, mesh=mesh, mp_policy=policy)
    if narrow:
        _to_master(module)
        for sub in module.modules():  # the config records the master dtype, as it does on every other process
            if getattr(getattr(sub, "config", None), "dtype", None) in NARROW:
                sub.config.dtype = torch.float32
    fully_shard(module, mesh=mesh, mp_policy=policy)
    return module


#: dtypes a checkpoint may be read in (engine.models.lossless_dtype) that the float32 master weights hold exactly
NARROW = (torch.bfloat16, torch.float16)


def _narrow_buffers_to_master(module: torch.nn.Module) -> bool:
    """True when `module`'s weights were read in a narrower stored dtype (rank 0 of a rank0 init); its
    floating buffers of that dtype are then cast to float32 as every other process holds them."""
    if not any(p.dtype in NARROW for p in module.parameters()):
        return False
    for sub in module.modules():
        for leaf, b in list(sub._buffers.items()):
            if b is not None and b.dtype in NARROW:
                sub._buffers[leaf] = b.float()
    return True


def _to_master(unit: torch.nn.Module) -> None:
    """Upcast `unit`'s not yet sharded parameters read in a narrower dtype to float32 master weights (exact),
    right before fully_shard keeps this process's shard of them: the process so holds its stored-dtype model
    (referenced by its full state dict for materialize) plus one float32 unit in flight, never the float32
    model. Ties hold: `.data` changes in place on the one Parameter object."""
    for p in unit.parameters():
        if p.dtype in NARROW and not hasattr(p, "device_mesh"):  # a DTensor is already a sharded float32 unit
            p.data = p.data.float()


def local_parameter_bytes(module: torch.nn.Module) -> int:
    """Bytes of the parameters this process holds (its shards of sharded parameters)."""
    total = 0
    for p in module.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel() * local.element_size()
    return total


def save_sharded(folder, model, optimizer) -> None:
    """Every process writes its shards of the model and optimizer state into `folder`/dcp (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(folder))


def load_sharded(folder, model, optimizer) -> None:
    """Load the shards `save_sharded` wrote into `model` and `optimizer` (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optim_state}
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def full_state_dict(module: torch.nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """The unsharded state dict on rank 0 (CPU tensors; empty elsewhere), keys without `prefix` (collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in state.items()}


def plain_model(model_class, config, state: dict[str, torch.Tensor]):
    """An ordinary (unsharded) float32 model of `model_class` holding `state`, to save_pretrained."""
    model = model_class(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or ())
    missing = [k for k in missing if k not in tied and not any(k.endswith(t) for t in tied)]
    if missing or unexpected:
        raise RuntimeError(
            f"gathered FSDP state does not fit {model_class.__name__}: missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}"
        )
    model.tie_weights()
    return model
