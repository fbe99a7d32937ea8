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
"""

from __future__ import annotations

import torch

#: The transformer layer classes sharded one by one (each is one all-gather / reduce-scatter unit).
FSDP_LAYERS = frozenset({"LlamaDecoderLayer", "GPT2Block", "BertLayer", "RobertaLayer", "AlbertLayer",
                         "BartEncoderLayer", "BartDecoderLayer", "Qwen2DecoderLayer", "Olmo2DecoderLayer",
                         "GPTNeoXLayer", "MistralDecoderLayer", "GemmaDecoderLayer", "Gemma2DecoderLayer"})

#: the folder of a checkpoint that holds the sharded model and optimizer state
DCP_FOLDER = "dcp"


def layer_classes(model) -> set[str]:
    """Names of the classes sharded as units: FSDP_LAYERS present in `model`, else its `_no_split_modules`."""
    present = {type(m).__name__ for m in model.modules()}
    found = present & FSDP_LAYERS
    if not found:
        found = present & set(getattr(model, "_no_split_modules", None) or ())
    if not found:
        raise ValueError(f"training.distributed: fsdp: no transformer layer class known in {type(model).__name__} "
                         f"(known: {', '.join(sorted(FSDP_LAYERS))})")
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
        torch.distributed.init_process_group("gloo" if device.type == "cpu" else "nccl",
                                             store=torch.distributed.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh(device.type, (world,))
    policy = mixed_precision_policy(mode)
    # no module.to(device) first: each fully_shard call moves its own unit's weights to the mesh's device and
    # shards them, so a GPU holds one whole layer at a time, never the whole model
    names = layer_classes(module)
    for sub in list(module.modules()):
        if type(sub).__name__ in names:
            fully_shard(sub, mesh=mesh, mp_policy=policy)
    fully_shard(module, mesh=mesh, mp_policy=policy)
    return module


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
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state.items()}


def plain_model(model_class, config, state: dict[str, torch.Tensor]):
    """An ordinary (unsharded) float32 model of `model_class` holding `state`, to save_pretrained."""
    model = model_class(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or ())
    missing = [k for k in missing if k not in tied and not any(k.endswith(t) for t in tied)]
    if missing or unexpected:
        raise RuntimeError(f"gathered FSDP state does not fit {model_class.__name__}: missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]}")
    model.tie_weights()
    return model
