"""Raw data sources: verified downloads over a loopback HTTP server, local copies, source resolution,
and the per-dataset data rules (dry-run and rerun scope) on a temporary copy of the workflow."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from functools import partial
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from helpers.loopback_http import FileHandler, QuietLog, loopback_entry, serve_in_thread
from helpers.paths import REPO_ROOT
from lmbias.errors import ConfigError, DataError
from lmbias.io import file_sha256
from lmbias.parsers.sources import (
    copy_local,
    dataset_files,
    fetch_file,
    fetch_params,
    obtain,
    resolve_source,
)

REPO = REPO_ROOT
LOOPBACK_DATASETS = ["winobias", "seat", "cds", "bbq"]  # a sub-folder (conll_format/), "+" and spaces in names


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


class _TruncatingHandler(QuietLog, BaseHTTPRequestHandler):
    """Announces 1000 bytes, sends 100, closes the connection."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"x" * 100)
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture(scope="module")
def file_server(shared_data):
    server, thread = serve_in_thread(partial(FileHandler, directory=str(shared_data)))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture()
def truncating_server():
    server, thread = serve_in_thread(_TruncatingHandler)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


# -- downloads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dataset", LOOPBACK_DATASETS)
def test_fetch_every_file_over_loopback(dataset, config, shared_data, file_server, tmp_path):
    entry = loopback_entry(config["data"][dataset], f"{file_server}/{dataset}/")
    files = dataset_files(entry, dataset)
    assert set(files) == set(config["data"][dataset]["files"])
    for name, (url, sha256) in files.items():
        if sha256 == "unpinned":  # no copy of these in shared/data (WinoBias test split)
            continue
        dest = tmp_path / dataset / name
        assert fetch_file(url, dest, sha256) == dest
        assert dest.read_bytes() == (shared_data / dataset / name).read_bytes()
    assert not [p for p in _leftovers(tmp_path) if p.name.endswith(".part")]


def test_wrong_checksum_leaves_nothing(config, file_server, tmp_path):
    name = "male_occupations.txt"
    url = f"{file_server}/winobias/{name}"
    wrong = "0" * 64
    dest = tmp_path / "out" / name
    with pytest.raises(DataError) as err:
        fetch_file(url, dest, wrong)
    message = str(err.value)
    assert name in message and wrong in message
    assert config["data"]["winobias"]["files"][name]["sha256"] in message  # the actual hash
    assert not dest.exists()
    assert _leftovers(tmp_path) == []


def test_failed_fetch_removes_stale_destination(file_server, tmp_path):
    dest = tmp_path / "stale.txt"
    dest.write_text("old content")
    with pytest.raises(DataError):
        fetch_file(f"{file_server}/winobias/male_occupations.txt", dest, "f" * 64)
    assert not dest.exists()
    assert _leftovers(tmp_path) == []


def test_truncated_response(truncating_server, tmp_path):
    url = f"{truncating_server}/some/file.tsv"
    dest = tmp_path / "file.tsv"
    with pytest.raises(DataError) as err:
        fetch_file(url, dest, hashlib.sha256(b"x" * 1000).hexdigest())
    message = str(err.value)
    assert url in message
    assert "truncated" in message and "100 of 1000 bytes" in message
    assert not dest.exists()
    assert _leftovers(tmp_path) == []


def test_http_404_names_the_url(file_server, tmp_path):
    url = f"{file_server}/winobias/no-such-file.txt"
    with pytest.raises(DataError) as err:
        fetch_file(url, tmp_path / "x.txt", "0" * 64)
    assert url in str(err.value) and "404" in str(err.value)
    assert _leftovers(tmp_path) == []


def test_unreachable_host_is_a_data_error(tmp_path):
    server, thread = serve_in_thread(FileHandler)
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(5)
    url = f"http://127.0.0.1:{port}/x.txt"  # nothing listens there any more
    with pytest.raises(DataError) as err:
        fetch_file(url, tmp_path / "x.txt", "0" * 64, timeout=5)
    assert url in str(err.value)


def test_bad_sha256_in_config_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        fetch_file("http://127.0.0.1:9/x", tmp_path / "x", "not-a-hash")


# -- local copies ------------------------------------------------------------------------------


def test_copy_local_verifies_and_copies(config, shared_data, tmp_path):
    name = "cda_default_pairs.json"
    sha = config["data"]["cds"]["files"][name]["sha256"]
    dest = copy_local(shared_data / "cds" / name, tmp_path / "cds" / name, sha)
    assert dest.read_bytes() == (shared_data / "cds" / name).read_bytes()
    assert file_sha256(dest) == sha
    assert os.stat(dest).st_mode & 0o044  # readable by others: not mkstemp's 0600


def test_copy_local_checksum_mismatch(shared_data, tmp_path):
    src = shared_data / "cds" / "cda_default_pairs.json"
    with pytest.raises(DataError) as err:
        copy_local(src, tmp_path / "out.json", "1" * 64)
    assert "1" * 64 in str(err.value) and file_sha256(src) in str(err.value)
    assert _leftovers(tmp_path) == []


def test_copy_local_missing_names_path_and_key(tmp_path):
    missing = tmp_path / "nowhere" / "gap-test.tsv"
    with pytest.raises(DataError) as err:
        copy_local(missing, tmp_path / "out.tsv", "0" * 64, config_key="data.gap.path")
    assert str(missing) in str(err.value) and "data.gap.path" in str(err.value)
    assert not (tmp_path / "out.tsv").exists()


def test_config_checksums_match_shared_data(config, shared_data):
    """Every configured file present in the shared folder has the configured sha256."""
    checked = 0
    for dataset, entry in config["data"].items():
        for name, spec in entry["files"].items():
            path = shared_data / dataset / name
            if path.exists():
                assert file_sha256(path) == spec["sha256"], f"data.{dataset}.files.{name}"
                checked += 1
    assert checked >= 50  # 56 configured today, all in the shared folder


def test_file_sha256(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"lmbias" * 50000)
    assert file_sha256(path) == hashlib.sha256(b"lmbias" * 50000).hexdigest()


# -- resolving sources ---------------------------------------------------------------------------


def test_dataset_files_builds_pinned_urls(config):
    files = dataset_files(config["data"]["bec_pro"], "bec_pro")
    url, sha = files["professions_US_DE.tsv"]
    assert url == config["data"]["bec_pro"]["base_url"] + "BEC-Pro/Professions%20US%2BDE.tsv"
    assert sha == config["data"]["bec_pro"]["files"]["professions_US_DE.tsv"]["sha256"]
    assert (
        dataset_files({"base_url": "http://h/a", "files": {"x": {"upstream": "/b/x", "sha256": "a" * 64}}})["x"][0]
        == "http://h/a/b/x"
    )


def test_resolve_source_precedence(config):
    data = {k: dict(v) for k, v in config["data"].items()}
    kind, url = resolve_source("gap", "gap-test.tsv", data, None)
    assert kind == "url" and url.startswith("https://") and url.endswith("/gap-test.tsv")
    assert resolve_source("gap", "gap-test.tsv", data, "../shared/data") == ("local", "../shared/data/gap/gap-test.tsv")
    data["gap"]["path"] = "/mirror/gap"
    assert resolve_source("gap", "gap-test.tsv", data, "../shared/data") == ("local", "/mirror/gap/gap-test.tsv")
    params = fetch_params("gap", "gap-test.tsv", data, "../shared/data")
    assert params["config_key"] == "data.gap.path" and params["local_folder"] == "/mirror/gap"
    assert fetch_params("cds", "cda_default_pairs.json", data, None)["local_folder"] is None


def test_local_only_file_is_copied_never_downloaded(config, shared_data, tmp_path):
    """StereoSet's flat copy (`upstream: null`): no URL, a config error naming the key without a local folder,
    its pinned checksum verified when copied; a local-only file must be pinned (schema)."""
    from lmbias.config import validate_config

    data = config["data"]
    flat = "stereoset_dev_flat.jsonl"
    assert data["stereoset"]["files"][flat]["upstream"] is None
    assert set(dataset_files(data["stereoset"], "stereoset")) == {"dev.json"}
    with pytest.raises(ConfigError, match=rf"data\.stereoset\.files\.{re.escape(flat)} is local-only"):
        resolve_source("stereoset", flat, data, None)
    params = fetch_params("stereoset", flat, data, str(shared_data))
    assert params["source"] == "local" and params["sha256"] == file_sha256(shared_data / "stereoset" / flat)
    assert obtain(params, tmp_path / flat).read_bytes() == (shared_data / "stereoset" / flat).read_bytes()
    bad = yaml.safe_load((REPO / "config.yaml").read_text())
    bad["data"]["stereoset"]["files"][flat]["sha256"] = "unpinned"
    with pytest.raises(ConfigError, match=rf"data\.stereoset\.files\.{re.escape(flat)}\.sha256"):
        validate_config(bad, REPO / "schemas" / "config.schema.yaml")


@pytest.mark.parametrize(
    "dataset, file, key",
    [("gap", "gap-train.tsv", "data.gap.files.gap-train.tsv"), ("nope", "x.tsv", "data.nope.files.x.tsv")],
)
def test_resolve_source_unknown(config, dataset, file, key):
    with pytest.raises(ConfigError) as err:
        resolve_source(dataset, file, config["data"], None)
    assert key in str(err.value)


def test_obtain_local_and_url(config, shared_data, file_server, tmp_path):
    data = {k: dict(v) for k, v in config["data"].items()}
    local = fetch_params("cds", "names_pairs_1000_scaled.json", data, str(shared_data))
    obtain(local, tmp_path / "a.json")
    data["cds"] = loopback_entry(data["cds"], f"{file_server}/cds")
    remote = fetch_params("cds", "names_pairs_1000_scaled.json", data, None)
    assert remote["source"] == "url"
    obtain(remote, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


# -- the data rules (Snakemake) ------------------------------------------------------------------


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("snakemake")
    return subprocess.run([str(exe), "--cores", "1", *args], cwd=workdir, capture_output=True, text=True, timeout=120)


@pytest.fixture()
def data_workflow(tmp_path, shared_data) -> Path:
    """A minimal workflow around rules/data.smk (the real Snakefile also pulls in later stages)."""
    work = tmp_path / "wf"
    (work / "rules").mkdir(parents=True)
    for name in ("data.smk", "data_helpers.smk"):  # data.smk includes its helpers itself
        shutil.copy(REPO / "rules" / name, work / "rules")
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["data_dir"] = str(shared_data)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (work / "Snakefile").write_text('configfile: "config.yaml"\ninclude: "rules/data.smk"\n')
    return work


@pytest.mark.workflow
def test_data_rules_dry_run(data_workflow):
    result = _snakemake(data_workflow, "-n", "results/data/winobias.parquet", "results/data/seat.parquet")
    assert result.returncode == 0, result.stderr + result.stdout
    out = result.stdout + result.stderr
    for rule in ("data_winobias", "data_seat", "parse_benchmark"):
        assert rule in out
    assert "data_gap" not in out
    unknown = _snakemake(data_workflow, "-n", "results/data/not_a_benchmark.parquet")
    assert unknown.returncode != 0


@pytest.mark.workflow
def test_data_rule_reruns_only_for_its_own_slice(data_workflow, shared_data):
    targets = ["resources/data/cds/cda_default_pairs.json", "resources/data/cds/names_pairs_1000_scaled.json"]
    first = _snakemake(data_workflow, *targets)
    assert first.returncode == 0, first.stderr
    for target in targets:
        assert (data_workflow / target).read_bytes() == (shared_data / "cds" / Path(target).name).read_bytes()

    config_path = data_workflow / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["data"]["gap"]["path"] = str(shared_data / "gap")  # another dataset's slice
    config["data"]["cds"]["license"] = "edited"  # not read by the rule
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    quiet = _snakemake(data_workflow, "-n", *targets)
    assert quiet.returncode == 0 and "Nothing to be done" in quiet.stdout + quiet.stderr

    config["data"]["cds"]["path"] = str(shared_data / "cds")  # this dataset's source: same bytes, no rerun
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    moved = _snakemake(data_workflow, "-n", *targets)
    assert moved.returncode == 0 and "Nothing to be done" in moved.stdout + moved.stderr

    config["data"]["cds"]["files"]["cda_default_pairs.json"]["sha256"] = "0" * 64  # its pinned content
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    again = _snakemake(data_workflow, "-n", *targets)
    assert again.returncode == 0
    assert "data_cds" in again.stdout and "Params have changed" in again.stdout + again.stderr


def test_unpinned_file_is_accepted_with_a_warning_that_prints_its_hash(config, file_server, tmp_path, caplog):
    import logging

    from lmbias.parsers.sources import UNPINNED

    url = f"{file_server}/winobias/male_occupations.txt"
    dest = tmp_path / "male_occupations.txt"
    with caplog.at_level(logging.WARNING):
        fetch_file(url, dest, UNPINNED)
    assert "UNVERIFIED" in caplog.text and file_sha256(dest) in caplog.text
    # only files we had no copy of are unpinned (StereoSet dev, WikiText-2 test, WinoBias test split)
    unpinned = [(d, f) for d, e in config["data"].items() for f, s in e["files"].items() if s["sha256"] == UNPINNED]
    assert sorted(unpinned) == [("stereoset", "dev.json"), ("wikitext2", "wikitext-2-raw-v1-test.parquet")] + [
        ("winobias", f"{s}_stereotyped_type{t}.txt.test") for s in ("anti", "pro") for t in (1, 2)
    ]
