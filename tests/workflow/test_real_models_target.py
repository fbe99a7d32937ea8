"""The real-model target (resources/configs/real-models.yaml over config.yaml; docs/real-models.md): what its one
command builds, checked without running it (the run itself is the real-model command's, tens of minutes on 2
cores): the default target's summaries, per model (targets.methods_of), the stand-ins and the GGUF rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers.shipped_config import shipped_config
from lmbias.errors import ConfigError
from lmbias.workflow import targets, validation

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "resources" / "configs" / "real-models.yaml"


def _merged(base: dict, overlay: dict) -> dict:
    """Snakemake's own --configfile merge (mappings merged key by key, everything else replaced)."""
    from snakemake.utils import update_config

    update_config(base, overlay)
    return base


@pytest.fixture()
def real_config() -> dict:
    return _merged(shipped_config(), yaml.safe_load(OVERLAY.read_text()))


def test_the_target_is_smollm2_before_and_after_and_gemma_as_released(real_config):
    validation.check_config(real_config)
    assert targets.default_target_summaries(real_config) == [
        "results/smollm2-135m-instruct/pretrained/summary.parquet",
        "results/smollm2-135m-instruct/cds-lora-cpu/summary.parquet",
        "results/gemma-3-270m/pretrained/summary.parquet",
    ]
    assert targets.all_targets(real_config)[-1] == "results/summary.md"
    lora = real_config["methods"]["cds-lora-cpu"]
    assert lora["kind"] == "cds" and lora["training"]["adapter"]["kind"] == "lora"


def test_methods_of_names_a_target_model_and_configured_methods(real_config):
    real_config["targets"]["methods_of"] = {"tiny-bert": ["pretrained"]}
    with pytest.raises(ConfigError, match=r"^targets\.methods_of\.tiny-bert: not one of targets\.models"):
        validation.check_config(real_config)
    real_config["targets"]["methods_of"] = {"gemma-3-270m": ["pretrained", "nope"]}
    with pytest.raises(ConfigError, match=r"^targets\.methods_of\.gemma-3-270m\[1\]: unknown method 'nope'"):
        validation.check_config(real_config)


def test_both_real_models_are_gguf_entries_read_through_their_stand_ins(real_config):
    from lmbias.engine.gguf import gguf_source

    for name in ("smollm2-135m-instruct", "gemma-3-270m"):
        entry = real_config["models"][name]
        source = gguf_source(name, entry)
        assert entry["path"] == f"resources/models/{name}" and entry["family"] == "clm"
        assert len(source.sha256) == 64 and source.parts
        for benchmark, stand_in in entry["stand_ins"].items():
            assert real_config["benchmarks"][stand_in]["dataset"] == real_config["benchmarks"][benchmark]["dataset"]
    assert real_config["models"]["smollm2-135m-instruct"]["chat_template"] is True
    assert "chat_template" not in real_config["models"]["gemma-3-270m"]
    for name in real_config["only_benchmarks"]:
        assert name in real_config["benchmarks"], name
