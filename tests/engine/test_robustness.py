"""Issue 8, robustness: each test here failed before its fix (bad input meets a named error, not a
traceback or silence)."""

from __future__ import annotations

import os
import stat

import pyarrow as pa
import pytest

from lmbias.errors import ConfigError


@pytest.fixture
def umask_027():
    before = os.umask(0o027)
    yield
    os.umask(before)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_parquet_follows_the_umask(tmp_path, umask_027):
    from lmbias.io import write_table_atomic

    out = write_table_atomic(pa.table({"a": [1]}), tmp_path / "t.parquet")
    assert _mode(out) == 0o640  # 0666 & ~027; mkstemp alone gives 0600


def test_verified_copy_follows_the_umask(tmp_path, umask_027):
    from lmbias.io import file_sha256
    from lmbias.parsers.sources import copy_local

    src = tmp_path / "src.txt"
    src.write_text("x\n")
    out = copy_local(src, tmp_path / "out" / "dest.txt", file_sha256(src))
    assert _mode(out) == 0o640


def test_empty_targets_are_refused_by_the_schema(repo_root):
    import yaml

    from lmbias.config import config_errors

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    config["targets"]["models"] = []
    errors = config_errors(config, repo_root / "schemas/config.schema.yaml")
    assert any(e.startswith("targets.models:") and "non-empty" in e for e in errors), errors


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    from lmbias.engine.tiny import build_tiny_model

    return build_tiny_model("bert", tmp_path_factory.mktemp("models") / "tiny-bert", seed=0)


def test_truncated_safetensors_names_the_model_key_and_file(tiny_bert_dir, tmp_path):
    import shutil

    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model

    broken = tmp_path / "broken-bert"
    shutil.copytree(tiny_bert_dir, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    spec = model_spec("broken-bert", {"path": str(broken), "family": "mlm", "revision": "local"})
    with pytest.raises(ConfigError) as err:
        load_model(spec)
    message = str(err.value)
    assert "models.broken-bert" in message and str(weights) in message and "truncated or corrupt" in message


_HUB_PROBE = r"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model, resolved_commit
from lmbias.errors import ConfigError
for i, entry in enumerate(json.loads(sys.argv[1])):
    print(f"=== {i}", file=sys.stderr, flush=True)
    try:
        model, _ = load_model(model_spec("hub-bert", entry))
        print("COMMIT", resolved_commit(model), file=sys.stderr, flush=True)
    except ConfigError as exc:
        print("CONFIGERROR", exc, file=sys.stderr, flush=True)
"""


def _hub_cache(root, repo_id, commit, folder, pickled=False):
    """A Hugging Face cache holding `folder` as `repo_id` at `commit`, with refs/main pointing to it."""
    import shutil

    import torch
    from safetensors.torch import load_file

    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    shutil.copytree(folder, snapshot)
    if pickled:  # only pytorch_model.bin, as old hub repos ship
        torch.save(load_file(snapshot / "model.safetensors"), snapshot / "pytorch_model.bin")
        (snapshot / "model.safetensors").unlink()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_hub_weights_safetensors_only_and_moving_revisions_warn_with_their_commit(tiny_bert_dir, tmp_path, repo_root):
    """A local HF cache layout stands in for the hub (offline): refs/main -> a snapshot folder."""
    import json
    import subprocess
    import sys

    new, old = "0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"
    cache = tmp_path / "hub"
    _hub_cache(cache, "someone/tiny-bert", new, tiny_bert_dir)
    _hub_cache(cache, "someone/old-bert", old, tiny_bert_dir, pickled=True)
    entries = [
        {"hub_id": "someone/tiny-bert", "family": "mlm", "revision": "main"},
        {"hub_id": "someone/tiny-bert", "family": "mlm", "revision": new},
        {"hub_id": "someone/old-bert", "family": "mlm", "revision": old},
        {"hub_id": "someone/old-bert", "family": "mlm", "revision": old, "allow_pickle": True},
    ]
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(repo_root / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", _HUB_PROBE, json.dumps(entries)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = dict(part.split("\n", 1) for part in proc.stderr.split("=== ")[1:])
    assert f"COMMIT {new}" in out["0"]  # main resolved through refs/main
    assert "cannot be reproduced exactly" in out["0"] and f"revision: {new}" in out["0"]
    assert f"COMMIT {new}" in out["1"] and "cannot be reproduced" not in out["1"]  # pinned: no warning
    assert "CONFIGERROR models.hub-bert" in out["2"] and "allow_pickle: true" in out["2"]  # .bin only: refused
    assert f"COMMIT {old}" in out["3"]  # ... unless the entry allows pickles


def test_counterfactual_cli_processes_a_line_over_spacys_max_length():
    """A 1.1M-character line used to crash with spaCy's E088 and write nothing; now it is swapped in
    pieces (split at sentence ends) and the lines around it come out as usual."""
    import subprocess
    import sys

    unit = "He gave her his book. "
    long_line = unit * 50_000  # 1.1 million characters
    stdin = f"I saw her.\n{long_line}\nHe is here.\n".encode()
    proc = subprocess.run(
        [sys.executable, "-m", "lmbias.cli", "counterfactual", "--intervention", "naive"],
        input=stdin,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out = proc.stdout.decode().split("\n")
    assert out[0] == "I saw his." and out[2] == "She is here." and out[3] == "" and len(out) == 4
    assert out[1] == "She gave his her book. " * 50_000  # naive: her -> his always (the baseline's known error)


@pytest.mark.parametrize("intervention", ["naive", "grammatical"])
def test_long_texts_in_pieces_swap_like_whole_texts(intervention):
    from lmbias.corpora.counterfactual import Swapper, split_long_text, swap_lines
    from lmbias.corpora.swap_lexicon import load_lexicon

    text = "The king said he would see her. Mary met his son at noon; she thanked him. " * 20
    pieces = split_long_text(text, 200)
    assert "".join(pieces) == text and all(len(p) <= 200 for p in pieces) and len(pieces) > 5
    assert all(p.endswith(". ") or p.endswith("; ") for p in pieces[:-1])  # cut after sentence ends
    swapper = Swapper(load_lexicon(), intervention=intervention)
    whole = swapper.swap_texts([text, "He is here."])
    assert swap_lines(swapper, [text, "He is here."], max_chars=200) == whole


def test_config_errors_name_the_file_that_set_the_key(repo_root, tmp_path):
    import yaml

    from lmbias.config import config_errors, config_sources, name_source

    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("models:\n  tiny-bert: {famly: mlm}\nseeds: []\n")
    sources = config_sources(str(repo_root / "config.yaml"), [overlay], {"data_dir": 3})
    merged = yaml.safe_load((repo_root / "config.yaml").read_text())
    merged["models"]["tiny-bert"]["famly"] = "mlm"
    merged.update(seeds=[], data_dir=3)
    errors = config_errors(merged, repo_root / "schemas/config.schema.yaml", sources)
    assert f"models.tiny-bert.famly: unknown key (in {overlay})" in errors
    assert any(e.startswith("seeds:") and e.endswith(f"(in {overlay})") for e in errors), errors
    assert any(e.startswith("data_dir:") and e.endswith("(in --config)") for e in errors), errors
    named = name_source(ConfigError("models.tiny-bert.famly: bad"), sources)
    assert str(named) == f"models.tiny-bert.famly: bad (in {overlay})"


def test_summary_records_the_hub_commit_and_what_it_left_out(tmp_path):
    """The commit a scoring job's weights resolved to travels scores -> metrics -> summary provenance."""
    import pandas as pd

    from lmbias.io import write_table_atomic
    from lmbias.jobs.metrics import summarise_job
    from lmbias.metrics.summary import COMMIT_KEY, METRIC_SCHEMA, left_out, with_context

    commit = "0123456789abcdef0123456789abcdef01234567"
    rows = with_context(
        [
            {
                "benchmark": "seat",
                "metric": "effect_size",
                "variant": "",
                "subset": "all",
                "value": 0.5,
                "ci_low": None,
                "ci_high": None,
                "p_value": 0.1,
                "n": 8,
            }
        ],
        "bert-base",
        "pretrained",
        0,
    )
    metric = write_table_atomic(
        pa.Table.from_pylist(rows, schema=METRIC_SCHEMA),
        tmp_path / "m.parquet",
        METRIC_SCHEMA,
        metadata={COMMIT_KEY: commit},
    )
    slices = {
        "model": {"hub_id": "bert-base-uncased", "revision": "main"},
        "method": {"kind": "pretrained"},
        "benchmarks": {"seat": {"dataset": "seat"}},
        "data": {},
        "seeds": [0],
    }
    gone = [{"benchmark": "stereoset", "reason": "data missing", "config_key": "optional_benchmarks"}]
    summarise_job([metric], tmp_path / "summary.parquet", slices, left_out=gone)
    frame = pd.read_parquet(tmp_path / "summary.parquet")
    assert set(frame["model_commit"]) == {commit} and set(frame["model_revision"]) == {"main"}
    assert frame.attrs["left_out"] == gone == left_out(tmp_path / "summary.parquet")
