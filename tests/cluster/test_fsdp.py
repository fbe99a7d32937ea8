"""FSDP2 full fine-tuning (training.distributed: fsdp; lmbias.training.fsdp) on a tiny Llama: real 2-process
gloo launches on CPU through the code path GPUs run (torch's fully_shard on a device mesh)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from lmbias.engine.distributed import launch_command, launch_env, main_process_port
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.training import fsdp
from lmbias.training.jobs import train_job
from lmbias.training.settings import TrainingSettings
from lmbias.training.trainer import EXIT_ENV

#: 2 FSDP processes x batch 2 against 1 plain process x batch 4 (the same global batches, dropout off): the
#: same gradients summed in another order (reduce-scatter), so weights agree to float32 rounding amplified
#: by a few Adam steps (as the DDP test, tests/training/test_train.py)
FSDP_ATOL = 1e-5

SETTINGS = {
    "objective": "clm",
    "max_steps": 4,
    "epochs": 50,
    "learning_rate": 1e-3,
    "max_length": 32,
    "precision": "fp32",
    "dropout": 0.0,
}
#: two_fsdp's launch: 2 FSDP processes x batch 2 (the tests that compare with it train the same)
TWO_FSDP = dict(SETTINGS, batch_size=2, distributed="fsdp")


@pytest.fixture(scope="module")
def setup(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("fsdp")
    model = _stored_in_bf16(build_tiny_model("llama", root / "tiny-llama", seed=0))  # as hub checkpoints are
    texts = []
    with open(shared_data / "gap" / "gap-development.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            texts.append(line.split("\t")[1][:160])
            if len(texts) == 32:
                break
    rows = [
        {
            "doc_id": str(i),
            "sentence_id": 0,
            "split": "development",
            "text": t,
            "is_counterfactual": False,
            "changed": False,
        }
        for i, t in enumerate(texts)
    ]
    pq.write_table(pa.Table.from_pylist(rows), root / "corpus.parquet")
    return {"path": str(model), "family": "clm"}, root / "corpus.parquet"


def _stored_in_bf16(folder: Path) -> Path:
    """`folder`'s model.safetensors rewritten with its floating tensors in bfloat16 (FSDP rank 0 reads it so)."""
    from safetensors.torch import save_file

    path = Path(folder) / "model.safetensors"
    save_file(
        {k: v.bfloat16() if v.is_floating_point() else v for k, v in load_file(str(path)).items()},
        str(path),
        metadata={"format": "pt"},
    )
    return folder


def _launch(setup, out: Path, settings: dict, env_extra=None) -> subprocess.CompletedProcess:
    entry, corpus = setup
    args = [
        "--model-name",
        "tiny-llama",
        "--model-entry",
        json.dumps(entry),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--seed",
        "0",
        "--settings",
        json.dumps(settings),
    ]
    env = dict(launch_env(), **(env_extra or {}))
    cmd = launch_command(2, main_process_port(str(out)), args, cpu=True, subcommand="train")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


#: the log line of a process that builds the model on the meta device instead of reading its weights
META_LINE = "process {rank} of 2: tiny-llama built on the meta device, no weights read (FSDP init {mode})"


@pytest.fixture(scope="module")
def two_fsdp(setup, tmp_path_factory):
    """The default 2-process FSDP launch of SETTINGS (rank 0 loads, rank 1 builds on meta): (folder, process)."""
    two = tmp_path_factory.mktemp("fsdp-two") / "two"
    proc = _launch(setup, two, TWO_FSDP)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return two, proc


def test_two_fsdp_processes_match_one_plain_process(setup, two_fsdp, tmp_path):
    two, proc = two_fsdp
    info = json.loads((two / "training.json").read_text())
    assert (info["world_size"], info["distributed"]) == (2, "fsdp")
    one = tmp_path / "one"
    entry, corpus = setup
    train_job(entry, "tiny-llama", str(corpus), str(one), 0, dict(SETTINGS, batch_size=4))
    w1, w2 = _weights(one), _weights(two)
    assert w1.keys() == w2.keys()  # one ordinary safetensors model, gathered from the shards
    base = load_file(str(Path(entry["path"]) / "model.safetensors"))
    for k in w1:
        np.testing.assert_allclose(w2[k].numpy(), w1[k].numpy(), atol=FSDP_ATOL, rtol=0, err_msg=k)
    assert max(float((w1[k] - base[k]).abs().max()) for k in w1 if k in base) > 100 * FSDP_ATOL
    l1 = pq.read_table(one / "train_log.parquet").column("loss").to_pylist()
    l2 = pq.read_table(two / "train_log.parquet").column("loss").to_pylist()
    np.testing.assert_allclose(l2, l1, rtol=1e-4)


def test_rank0_loading_trains_what_every_process_loading_trains(setup, two_fsdp, tmp_path):
    """Default (rank 0 reads the weights, rank 1 builds on meta and receives its shards by broadcast) against
    the path where every process loads the whole model: bit-identical weights and losses after 4 steps."""
    two, proc = two_fsdp
    assert META_LINE.format(rank=1, mode="rank0") in proc.stderr  # rank 1 never read the weights
    assert "process 0 of 2" not in proc.stderr
    every = tmp_path / "every"
    old = _launch(setup, every, TWO_FSDP, {fsdp.EVERY_PROCESS_ENV: "1"})
    assert old.returncode == 0, old.stderr[-4000:]
    assert "built on the meta device" not in old.stderr
    a, b = _weights(every), _weights(two)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k  # rank 0 read the bf16-stored checkpoint in bf16, upcast exactly
        assert a[k].dtype == torch.float32, k
    assert (every / "config.json").read_text() == (two / "config.json").read_text()
    losses = [pq.read_table(f / "train_log.parquet").column("loss").to_pylist() for f in (every, two)]
    assert losses[0] == losses[1]


def test_meta_processes_get_the_loaded_shards_buffers_ties_and_random_state(tmp_path):
    """Tiny GPT-2 (tied lm_head/wte) and tiny Llama (rotary inv_freq buffers), 2 gloo processes, the trainer's
    calls (set_dropout, TrainModule, shard, materialize): under rank0 init rank 1's model is on meta up to
    sharding, then its shards, buffers and CPU generator state equal those of every process loading; under
    checkpoint init (a resume: both on meta, no broadcast) the buffers it computes equal the loaded ones."""
    for name in MODELS:  # rank 0 reads a bf16-stored checkpoint in bf16, a float32-stored one in float32
        folder = build_tiny_model(name.split("-")[0], tmp_path / name, seed=0)
        if name.endswith("-bf16"):
            _stored_in_bf16(folder)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(main_process_port(str(tmp_path))),
        __file__,
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=dict(launch_env(), OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line[len(_ROW) :]) for line in proc.stdout.splitlines() if line.startswith(_ROW)]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    for r in rows:
        for name in MODELS:
            got, family = r[name], name.split("-")[0]
            assert got["empty_before_shard"] == {"every_process": False, "rank0": r["rank"] == 1, "checkpoint": True}
            assert got["weights_equal"] and got["rng_equal"], (r["rank"], name)
            assert got["dtypes_equal"], (r["rank"], name)  # float32 master shards whatever rank 0 read
            assert got["read_as"] == ("bfloat16" if name.endswith("-bf16") and r["rank"] == 0 else "float32")
            assert got["tied"] == {
                "every_process": family == "gpt2",
                "rank0": family == "gpt2",
                "checkpoint": family == "gpt2",
            }
            expected = (
                ["model.model.rotary_emb.inv_freq", "model.model.rotary_emb.original_inv_freq"]
                if family == "llama"
                else []
            )
            for mode in ("rank0", "checkpoint"):
                assert got["buffers_equal"][mode] == {k: True for k in expected}, (r["rank"], name, mode)


_ROW = "FSDP-INIT-ROW "

#: the tiny models of test_meta_processes_...: family, -bf16 = stored in bfloat16
MODELS = ("gpt2-bf16", "llama", "llama-bf16")


def test_rank0_reads_the_checkpoint_in_its_stored_dtype_only_when_exact(tmp_path):
    """lossless_dtype: one stored floating dtype that float32 holds exactly -> that dtype (integer tensors
    aside); mixed dtypes (a bf16 cast would round the float32 ones), float64 or no safetensors -> float32."""
    from safetensors.torch import save_file

    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import lossless_dtype, stored_dtypes

    def spec(name: str, *files: dict):
        folder = tmp_path / name
        folder.mkdir()
        for i, tensors in enumerate(files):
            save_file(tensors, str(folder / f"model-{i:05d}.safetensors"))
        return model_spec(name, {"path": str(folder), "family": "clm"})

    ids = torch.arange(4)
    bf16 = spec(
        "bf16", {"a": torch.ones(2, dtype=torch.bfloat16), "ids": ids}, {"b": torch.ones(3, dtype=torch.bfloat16)}
    )
    assert stored_dtypes(bf16) == {"BF16"} and lossless_dtype(bf16) == torch.bfloat16
    assert lossless_dtype(spec("f16", {"a": torch.ones(2, dtype=torch.float16)})) == torch.float16
    assert lossless_dtype(spec("f32", {"a": torch.ones(2)})) == torch.float32
    mixed = spec("mixed", {"a": torch.ones(2, dtype=torch.bfloat16)}, {"norm": torch.ones(2)})
    assert stored_dtypes(mixed) == {"BF16", "F32"} and lossless_dtype(mixed) == torch.float32
    assert lossless_dtype(spec("f64", {"a": torch.ones(2, dtype=torch.float64)})) == torch.float32
    assert lossless_dtype(bf16, torch.bfloat16) == torch.bfloat16  # only a float32 master reads narrower
    assert stored_dtypes(spec("empty")) is None and lossless_dtype(spec("none")) == torch.float32


def _init_worker(folder: str) -> None:
    """One process of test_meta_processes_...: every init mode on each tiny model, compared to every_process."""
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_empty_model, load_model, lossless_dtype
    from lmbias.training.dropout import set_dropout
    from lmbias.training.trainer import TrainModule

    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    row = {"rank": rank}
    for family in MODELS:
        spec = model_spec(family, {"path": f"{folder}/{family}", "family": "clm"})
        got = {}
        for mode in fsdp.INIT_MODES:
            torch.manual_seed(0)  # as the Trainer, then its set_dropout rebuild (random init on a real model)
            load = load_model if fsdp.loads_weights(mode, rank) else load_empty_model
            dtype = lossless_dtype(spec) if mode == "rank0" and rank == 0 else torch.float32  # as jobs._train
            module = TrainModule(set_dropout(load(spec, torch_dtype=dtype)[0], 0.1), "clm")
            if mode == "rank0":
                row.setdefault(family, {})["read_as"] = str(next(module.parameters()).dtype).removeprefix("torch.")
            empty = fsdp.is_empty(module)
            full = module.state_dict() if mode == "rank0" and rank == 0 else None
            fsdp.shard(module, torch.device("cpu"), world, "no")
            fsdp.materialize(module, torch.device("cpu"), mode, full)
            got[mode] = (
                {k: v.to_local().clone() for k, v in module.state_dict().items()},
                {k: b.clone() for k, b in module.named_buffers()},
                torch.get_rng_state(),
                empty,
                module.model.get_output_embeddings().weight is module.model.get_input_embeddings().weight,
            )
        ref = got["every_process"]
        row[family] = dict(
            row.get(family, {}),
            **{
                "empty_before_shard": {m: g[3] for m, g in got.items()},
                "tied": {m: g[4] for m, g in got.items()},
                "weights_equal": ref[0].keys() == got["rank0"][0].keys()
                and all(torch.equal(v, got["rank0"][0][k]) for k, v in ref[0].items()),
                "rng_equal": torch.equal(ref[2], got["rank0"][2]),
                "buffers_equal": {
                    m: {k: torch.equal(v, got[m][1][k]) for k, v in ref[1].items()} for m in ("rank0", "checkpoint")
                },
                "dtypes_equal": all(
                    v.dtype == got["rank0"][0][k].dtype == torch.float32
                    for k, v in ref[0].items()
                    if v.is_floating_point()
                ),
            },
        )
    print(_ROW + json.dumps(row), flush=True)
    torch.distributed.destroy_process_group()


def test_killed_fsdp_job_resumes_from_its_sharded_checkpoint_to_the_same_weights(setup, two_fsdp, tmp_path):
    """two_fsdp's job, checkpointing every step, killed after step 3 and resumed: two_fsdp's weights bit for bit
    (so checkpointing changes nothing either)."""
    settings = dict(TWO_FSDP, checkpoint_every_steps=1)
    whole, _ = two_fsdp
    out = tmp_path / "killed"
    proc = _launch(setup, out, settings, {EXIT_ENV: "3"})
    assert proc.returncode != 0 and not out.exists()
    ckpt = Path(str(out) + ".checkpoints") / "step-00000003"
    marker = json.loads((ckpt / "COMPLETE.json").read_text())
    assert any(name.startswith("dcp/") for name in marker["files"])  # every process's shards, checksummed
    assert not (ckpt / "model.pt").exists()
    proc = _launch(setup, out, settings)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((out / "training.json").read_text())["resumed_from_step"] == 3
    for rank in (0, 1):  # a resume reads no model weights: every process's shards come from the checkpoint
        assert META_LINE.format(rank=rank, mode="checkpoint") in proc.stderr
    a, b = _weights(whole), _weights(out)
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize(
    "extra,key",
    [
        ({"adapter": {"kind": "lora"}}, "distributed"),
        ({"precision": "fp16"}, "precision"),
        ({"eval_bias_every_steps": 2}, "eval_bias_every_steps"),
    ],
)
def test_fsdp_refuses_what_it_cannot_shard(extra, key):
    with pytest.raises(ConfigError, match=rf"settings\.{key}"):
        TrainingSettings.from_dict(dict(SETTINGS, distributed="fsdp", **extra))
    with pytest.raises(ConfigError, match="settings.distributed"):
        TrainingSettings.from_dict(dict(SETTINGS, distributed="zero3"))


# ------------------------------------------------------------------------- Slurm: one process per task


def test_slurm_rendezvous_from_the_task_environment():
    from lmbias.engine.distributed import slurm_launch_command, slurm_rendezvous

    env = {
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "8",
        "SLURM_LOCALID": "1",
        "SLURM_JOB_ID": "123456",
        "SLURM_STEP_NODELIST": "gpu[07-08]",
        "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
        "SLURM_JOB_NODELIST": "other",
    }
    hosts = []
    got = slurm_rendezvous(env, first_host=lambda nodes: hosts.append(nodes) or "gpu07")
    assert got == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": str(20000 + 123456 % 20000),
    }
    assert hosts == ["gpu[07-08]"]
    assert slurm_rendezvous(env, first_host=lambda _: "gpu07", visible_gpus=1)["LOCAL_RANK"] == "0"  # bound GPU
    with pytest.raises(RuntimeError, match="SLURM_PROCID"):
        slurm_rendezvous({k: v for k, v in env.items() if k != "SLURM_PROCID"}, first_host=lambda _: "x")
    cmd = slurm_launch_command(8, ["--out", "o"], launcher="srun --mpi=none")
    assert cmd[:4] == ["srun", "--mpi=none", "--ntasks=8", "--kill-on-bad-exit=1"]
    assert cmd[-5:] == ["lmbias.cli", "-v", "train", "--out", "o"]


def test_tasks_started_like_srun_train_as_the_two_process_launch(setup, two_fsdp, tmp_path):
    """Two plain processes with the variables srun gives its tasks (no torchrun, no accelerate launch) train
    the same weights as the 2-process accelerate launch of the first test's settings (two_fsdp)."""
    from lmbias.engine.distributed import slurm_launch_env

    entry, corpus = setup
    settings = TWO_FSDP
    ref, _ = two_fsdp
    out = tmp_path / "tasks"
    port = main_process_port(str(out))
    base = dict(
        slurm_launch_env(),
        SLURM_NTASKS="2",
        SLURM_JOB_ID=str(port - 20000),
        SLURM_STEP_NODELIST="localhost",
        SLURM_STEP_TASKS_PER_NODE="2",
        MASTER_ADDR="127.0.0.1",
        OMP_NUM_THREADS="1",
    )
    args = [
        "--model-name",
        "tiny-llama",
        "--model-entry",
        json.dumps(entry),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--seed",
        "0",
        "--settings",
        json.dumps(settings),
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lmbias.cli", "train", *args],
            env=dict(base, SLURM_PROCID=str(r), SLURM_LOCALID=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    try:
        logs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert json.loads((out / "training.json").read_text())["world_size"] == 2
    a, b = _weights(ref), _weights(out)
    for k in a:
        np.testing.assert_allclose(b[k].numpy(), a[k].numpy(), atol=FSDP_ATOL, rtol=0, err_msg=k)


if __name__ == "__main__":  # the processes test_meta_processes_... starts through torch.distributed.run
    _init_worker(sys.argv[1])
