"""lmbias.workflow.validation.check_config: a bad config fails with a ConfigError naming the key."""

from __future__ import annotations

import pytest

from helpers.shipped_config import shipped_config
from lmbias.errors import ConfigError
from lmbias.workflow.validation import check_config


def test_the_shipped_config_passes():
    check_config(shipped_config())


def _edited(edit):
    config = shipped_config()
    edit(config)
    return config


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["models"].update(tables=c["models"]["tiny-bert"]), r"^models\.tables: this name is reserved"),
        (
            lambda c: c["models"]["tiny-bert"].update(path="elsewhere"),
            r"^models\.tiny-bert\.path: a tiny model is built into resources/models/tiny-bert",
        ),
        (
            lambda c: c["targets"]["models"].append("no-such-model"),
            r"^targets\.models\[1\]: unknown model 'no-such-model'",
        ),
        (
            lambda c: c["targets"].update(methods=["pretrained", "nope"]),
            r"^targets\.methods\[1\]: unknown method 'nope'",
        ),
        (
            lambda c: c["benchmarks"]["winobias"].update(dataset="nodata"),
            r"^benchmarks\.winobias\.dataset: 'nodata' is not a key of `data`",
        ),
        (lambda c: c.update(only_benchmarks=["winobias", "wino"]), r"^only_benchmarks\[1\]: unknown benchmark 'wino'"),
        (lambda c: c.update(optional_benchmarks=["nope"]), r"^optional_benchmarks\[0\]: unknown benchmark 'nope'"),
        (
            lambda c: c["methods"]["cds"].update(benchmarks=["winobias", "x"]),
            r"^methods\.cds\.benchmarks\[1\]: unknown benchmark 'x'",
        ),
        (lambda c: c["targets"].update(comparisons=["nope"]), r"^targets\.comparisons\[0\]: unknown comparison 'nope'"),
        (
            lambda c: c["models"]["tiny-gpt2"].update(stand_ins={"bbq": "bbq-small"}),
            r"^models\.tiny-gpt2\.stand_ins\.bbq: unknown benchmark 'bbq-small'",
        ),
        (
            lambda c: c["models"]["tiny-gpt2"].update(stand_ins={"bbq": "winogender"}),
            r"^models\.tiny-gpt2\.stand_ins\.bbq: 'winogender' reads another dataset \('winogender', not 'bbq'\)",
        ),
        (
            lambda c: c["models"]["tiny-gpt2"].update(stand_ins={"crows_pairs": "crows_pairs-biasbench"}),
            r"^models\.tiny-gpt2\.stand_ins\.crows_pairs: 'crows_pairs-biasbench' is a peer reading",
        ),
        (
            lambda c: c["models"]["tiny-gpt2"].update(stand_ins={"bbq": "bbq"}),
            r"^models\.tiny-gpt2\.stand_ins\.bbq: a benchmark cannot stand in for itself",
        ),
        (
            lambda c: c["models"]["tiny-gpt2"].update(stand_ins={"bbq-subset": "bbq"}),
            r"^models\.tiny-bert\.stand_ins\.bbq: 'bbq-subset' has a stand-in of its own",
        ),
        (
            lambda c: c["models"]["tiny-bert"].update(stand_ins={"bec_pro_en": "bec_pro_de"}),
            r"^comparisons\.tiny-bert-cds\.benchmark: 'tiny-bert' reads 'bec_pro_en' through its stand-in 'bec_pro_de'",
        ),
    ],
)
def test_a_bad_key_is_named(edit, message):
    with pytest.raises(ConfigError, match=message):
        check_config(_edited(edit))


def test_configured_names_are_listed():
    config = _edited(lambda c: c["targets"]["models"].append("x"))
    with pytest.raises(ConfigError) as error:
        check_config(config)
    assert ", ".join(sorted(config["models"])) in str(error.value)


def test_a_config_cut_down_to_a_few_benchmarks_keeps_its_tiny_models_stand_ins():
    """A stand-in pair neither of whose entries is configured is no stand-in (an overlay or a test that keeps a
    few benchmarks need not edit every tiny model); with one side left it is still checked."""
    config = shipped_config()
    config["benchmarks"] = {name: config["benchmarks"][name] for name in ("winobias", "bec_pro_en", "gap")}
    config["optional_benchmarks"] = []
    config["papers"] = {}
    check_config(config)
    config["benchmarks"]["bbq"] = shipped_config()["benchmarks"]["bbq"]
    with pytest.raises(ConfigError, match=r"^models\.tiny-bert\.stand_ins\.bbq: unknown benchmark 'bbq-subset'"):
        check_config(config)


def test_a_dataset_of_local_files_only_needs_no_base_url(repo_root):
    """A prompt file of your own (upstream: null) takes no base_url; a file to download still needs one."""
    import yaml

    from lmbias.config import validate_config

    schema = repo_root / "schemas" / "config.schema.yaml"
    config = yaml.safe_load((repo_root / "config.yaml").read_text())  # as written: sweeps not expanded
    config["data"]["prompts"] = {"path": "my_prompts", "files": {"prompts.txt": {"upstream": None, "sha256": "a" * 64}}}
    validate_config(config, schema)
    del config["data"]["gap"]["base_url"]
    with pytest.raises(ConfigError, match=r"data\.gap: 'base_url' is a required property"):
        validate_config(config, schema)
