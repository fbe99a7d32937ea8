"""Hub models over loopback: a fake Hub that speaks the parts of the Hub's HTTP interface huggingface_hub's
snapshot_download uses at a pinned commit, serving a tiny model built here; rule fetch_hub_model fetches it
once (a localrule), and every job reads the folder offline.

The fake Hub answers (as huggingface.co does):
  GET  /api/models/{repo}/revision/{rev}      {"id", "sha", "siblings": [{"rfilename"}]}; 404 with
                                              X-Error-Code RepoNotFound / RevisionNotFound
  GET  /api/models/{repo}/tree/{commit}       [{"type": "file", "path", "size", "oid"}] (one page)
  HEAD /{repo}/resolve/{commit}/{file}        X-Repo-Commit, ETag, Content-Length
  GET  /{repo}/resolve/{commit}/{file}        the bytes
A gated repo (Llama, Gemma) shows its metadata to anyone but serves its files only with the right token:
401 without an Authorization header, 403 with a token that has no access (X-Error-Code GatedRepo).
It serves on 127.0.0.1 only and stops itself after a bounded time.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import threading
import time
import types
import urllib.parse
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.loopback_http import FileHandler, loopback_entry, serve_in_thread
from helpers.workflow_runs import copy_workflow, scheduled_outputs, snakemake_command
from lmbias.engine.hub import (
    SOURCE_FILE,
    HubAccessError,
    HubDownloadError,
    fetch_hub_model,
    recorded_commit,
    wanted_files,
)
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model, resolved_commit
from lmbias.errors import ConfigError

REPO_ID = "lmbias-test/tiny-bert"
BIN_ONLY_REPO = "lmbias-test/bin-only"
GATED_REPO = "lmbias-test/gated-llama"
GATED_TOKEN = "hf_lmbiasTestTokenGrantedAccess"
COMMIT = hashlib.sha1(b"lmbias tiny-bert v1").hexdigest()
OTHER_COMMIT = hashlib.sha1(b"lmbias bin-only v1").hexdigest()
SERVER_LIFETIME_S = 300  # the fake Hub shuts itself down after this, whatever the test does


class FakeHub:
    """Repos {repo: (refs {name: commit}, {commit: {file: bytes}})} over loopback. `mode` breaks weight
    downloads: "truncate" announces the full Content-Length and sends half, then closes; "vanish" sends half
    and shuts the server down. `requests` logs (method, path) of every request."""

    def __init__(self, repos: dict, mode: str | None = None, gated: dict | None = None):
        self.repos, self.mode, self.requests = repos, mode, []
        self.gated = dict(gated or {})  # {repo: the token that has access}
        self.authorization: list[str | None] = []  # the Authorization header of every request
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._answer(self, body=False)

            def do_GET(self):
                hub._answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._watchdog = threading.Timer(SERVER_LIFETIME_S, self.stop)
        self._watchdog.daemon = True
        self._watchdog.start()
        self._stopped = threading.Event()

    def stop(self):
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._watchdog.cancel()
        self.server.shutdown()
        self.server.server_close()

    def downloads(self) -> list[str]:
        return [path for method, path in self.requests if method == "GET" and "/resolve/" in path]

    # -- the Hub's answers

    def _json(self, handler, payload, status=200, error_code=None):
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        if error_code:
            handler.send_header("X-Error-Code", error_code)
            handler.send_header("X-Error-Message", payload.get("error", ""))
        handler.end_headers()
        handler.wfile.write(data)

    def _answer(self, handler, body: bool):
        path = urllib.parse.unquote(urllib.parse.urlsplit(handler.path).path)
        self.requests.append((handler.command, path))
        self.authorization.append(handler.headers.get("Authorization"))
        api = re.fullmatch(r"/api/models/(.+?)/(revision|tree)/([^/]+)", path)
        resolve = re.fullmatch(r"/(.+?)/resolve/([0-9a-f]{40})/(.+)", path)
        repo = (api or resolve).group(1) if (api or resolve) else None
        if repo not in self.repos:
            return self._json(handler, {"error": "Repository not found"}, 404, "RepoNotFound")
        refs, commits = self.repos[repo]
        rev = api.group(3) if api else resolve.group(2)
        commit = rev if rev in commits else refs.get(rev)
        if commit is None:
            return self._json(handler, {"error": f"Invalid rev id: {rev}"}, 404, "RevisionNotFound")
        files = commits[commit]
        if api and api.group(2) == "revision":
            return self._json(
                handler,
                {
                    "id": repo,
                    "modelId": repo,
                    "sha": commit,
                    "private": False,
                    "siblings": [{"rfilename": f} for f in sorted(files)],
                },
            )
        if api:
            return self._json(
                handler,
                [
                    {"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for f, b in sorted(files.items())
                ],
            )
        name = resolve.group(3)
        if repo in self.gated:
            sent = handler.headers.get("Authorization")
            if sent is None:
                return self._json(
                    handler,
                    {
                        "error": f"Access to model {repo} is restricted. You must have access "
                        "to it and be authenticated to access it. Please log in."
                    },
                    401,
                    "GatedRepo",
                )
            if sent != f"Bearer {self.gated[repo]}":
                return self._json(
                    handler,
                    {"error": f"Access to model {repo} is restricted and you are not in the authorized list."},
                    403,
                    "GatedRepo",
                )
        if name not in files:
            return self._json(handler, {"error": "Entry not found"}, 404, "EntryNotFound")
        data = files[name]
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-Repo-Commit", commit)
        handler.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        handler.end_headers()
        if not body:
            return
        if self.mode and name.endswith(".safetensors"):
            handler.wfile.write(data[: len(data) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            if self.mode == "vanish":
                threading.Thread(target=self.stop, daemon=True).start()
            return
        handler.wfile.write(data)


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory) -> dict[str, bytes]:
    """The files of a tiny BERT (safetensors, config, tokenizer) as a hub repo would hold them."""
    from lmbias.engine.tiny import build_tiny_model

    folder = build_tiny_model("bert", tmp_path_factory.mktemp("tiny") / "tiny-bert", seed=0)
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    files["README.md"] = b"# tiny\n"  # not fetched: only config, tokenizer and weight files are
    return files


def _repos(tiny_files) -> dict:
    bin_only = {k: v for k, v in tiny_files.items() if not k.endswith(".safetensors")}
    bin_only["pytorch_model.bin"] = b"not really a pickle"
    return {
        REPO_ID: ({"main": COMMIT, "v1": COMMIT}, {COMMIT: tiny_files}),
        BIN_ONLY_REPO: ({"main": OTHER_COMMIT}, {OTHER_COMMIT: bin_only}),
        GATED_REPO: ({"main": COMMIT}, {COMMIT: tiny_files}),
    }


@pytest.fixture()
def hub(tiny_files, monkeypatch, tmp_path):
    """A fake Hub this process's huggingface_hub talks to (online, an empty HF cache, no token: neither HF_TOKEN
    nor a stored login)."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-stored-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))
    server = FakeHub(_repos(tiny_files), gated={GATED_REPO: GATED_TOKEN})
    monkeypatch.setattr(constants, "ENDPOINT", server.url)  # what HF_ENDPOINT sets when huggingface_hub is imported
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    yield server
    server.stop()


@pytest.fixture()
def no_retry_pause(monkeypatch):
    """huggingface_hub pauses before each retry (1 s per resumed download, up to 8 s per metadata request);
    the tests need not wait."""
    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    fast = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    fast.sleep = lambda seconds: None
    monkeypatch.setattr(file_download, "time", fast)
    monkeypatch.setattr(_http, "time", fast)


def _entry(**extra) -> dict:
    return {"hub_id": REPO_ID, "family": "mlm", "revision": "main", **extra}


# -- fetching, in this process ----------------------------------------------------------------------------


def test_fetch_records_commit_and_loads_offline(hub, tiny_files, tmp_path, monkeypatch):
    dest = tmp_path / "resources/models/hub-bert"
    fetch_hub_model("hub-bert", _entry(revision="v1"), dest)
    assert sorted(p.name for p in dest.iterdir()) == sorted([SOURCE_FILE] + [f for f in tiny_files if f != "README.md"])
    record = json.loads((dest / SOURCE_FILE).read_text())
    assert record["commit"] == COMMIT and record["hub_id"] == REPO_ID and record["revision"] == "v1"
    assert record["files"]["model.safetensors"]["sha256"] == hashlib.sha256(tiny_files["model.safetensors"]).hexdigest()
    assert recorded_commit(dest) == COMMIT
    assert not list(tmp_path.glob("resources/models/.*"))  # no temporary folder left beside it
    downloads = len(hub.downloads())
    assert downloads == len(record["files"])

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    spec = model_spec("hub-bert", _entry(revision="v1", snapshot=str(dest)))
    model, tokenizer = load_model(spec)
    assert resolved_commit(model) == COMMIT  # the summary's model_commit, as for a hub load
    assert tokenizer.mask_token == "[MASK]"
    assert len(hub.downloads()) == downloads  # loading read the folder, not the hub


def test_a_gguf_entrys_hub_file_is_fetched_alone_with_its_sha256_checked(hub, tiny_files, tmp_path):
    """fetch_gguf_file's download (lmbias.engine.hub.fetch_hub_file): the one file, its sha256 checked before the
    folder is kept; a wrong pin or a file the repository lacks is refused naming the key, keeping nothing."""
    from lmbias.engine.hub import HubDownloadError, fetch_hub_file

    name, data = "model.safetensors", tiny_files["model.safetensors"]
    dest = tmp_path / "resources/gguf/m"
    fetch_hub_file("models.m.gguf", REPO_ID, "v1", name, hashlib.sha256(data).hexdigest(), dest)
    assert sorted(p.name for p in dest.iterdir()) == sorted([name, SOURCE_FILE]) and (dest / name).read_bytes() == data
    assert json.loads((dest / SOURCE_FILE).read_text())["commit"] == COMMIT and len(hub.downloads()) == 1
    other = tmp_path / "resources/gguf/n"
    with pytest.raises(HubDownloadError, match=rf"models\.n\.gguf\.sha256: {REPO_ID}@{COMMIT}'s {name} has sha256"):
        fetch_hub_file("models.n.gguf", REPO_ID, "main", name, "0" * 64, other)
    with pytest.raises(ConfigError, match=rf"models\.n\.gguf\.file: x\.gguf is not a file of {REPO_ID}@{COMMIT}"):
        fetch_hub_file("models.n.gguf", REPO_ID, "main", "x.gguf", "0" * 64, other)
    assert not other.exists() and not list(tmp_path.glob("resources/gguf/.*"))


def test_unfetched_snapshot_is_named(tmp_path):
    spec = model_spec("hub-bert", _entry(snapshot=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match=r"models\.hub-bert: .*has not been fetched.*fetch_hub_model"):
        load_model(spec)


def test_wrong_revision_names_the_key(hub, tmp_path):
    dest = tmp_path / "resources/models/hub-bert"
    with pytest.raises(ConfigError, match=r"models\.hub-bert\.revision: 'no-such-branch' is not a revision"):
        fetch_hub_model("hub-bert", _entry(revision="no-such-branch"), dest)
    assert not dest.parent.exists() or not list(dest.parent.iterdir())


def test_a_scorers_fetch_names_its_own_key(hub, tmp_path):
    """rule fetch_hub_scorer: the same download, its errors naming scorers.<name>."""
    with pytest.raises(ConfigError, match=r"^scorers\.tox\.revision: 'no-such-branch' is not a revision"):
        fetch_hub_model("scorers/tox", _entry(revision="no-such-branch"), tmp_path / "tox", key="scorers.tox")


def test_unknown_repo_names_hub_id(hub, tmp_path):
    with pytest.raises(ConfigError, match=r"models\.hub-bert\.hub_id: lmbias-test/nope is not a model"):
        fetch_hub_model("hub-bert", _entry(hub_id="lmbias-test/nope"), tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_pickle_only_repo_names_allow_pickle(hub, tmp_path):
    dest = tmp_path / "resources/models/bin"
    with pytest.raises(ConfigError, match=r"models\.bin\.allow_pickle: .*only pickled ones \(pytorch_model\.bin\)"):
        fetch_hub_model("bin", _entry(hub_id=BIN_ONLY_REPO), dest)
    assert not dest.exists() and not hub.downloads()
    fetch_hub_model("bin", _entry(hub_id=BIN_ONLY_REPO, allow_pickle=True), dest)  # the user's explicit choice
    assert (dest / "pytorch_model.bin").is_file() and recorded_commit(dest) == OTHER_COMMIT


@pytest.mark.parametrize("mode", ["truncate", "vanish"])
def test_broken_download_names_the_model_and_keeps_nothing(mode, hub, no_retry_pause, tmp_path):
    hub.mode = mode
    dest = tmp_path / "resources/models/hub-bert"
    with pytest.raises(HubDownloadError, match=r"models\.hub-bert: downloading lmbias-test/tiny-bert@[0-9a-f]{40}"):
        fetch_hub_model("hub-bert", _entry(), dest)
    assert not dest.exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # no partial file, no temporary folder
    assert any(p.endswith("model.safetensors") for p in hub.downloads())


def test_unreachable_hub_is_named(hub, no_retry_pause, tmp_path):
    hub.stop()
    with pytest.raises(HubDownloadError, match=r"models\.hub-bert: cannot reach http://127\.0\.0\.1"):
        fetch_hub_model("hub-bert", _entry(), tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_offline_mode_is_named(hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubDownloadError, match=r"models\.hub-bert: HF_HUB_OFFLINE is set"):
        fetch_hub_model("hub-bert", _entry(), tmp_path / "m")
    assert not (tmp_path / "m").exists() and not hub.requests


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("hf_someoneElsesTokenWithoutAccess", 403)])
def test_gated_repo_without_access_is_named_and_keeps_nothing(
    token, status, hub, no_retry_pause, tmp_path, monkeypatch
):
    """A gated model (its metadata public, its files not): no token -> 401, a token without access -> 403. Either
    is a HubAccessError that says to accept the licence and set HF_TOKEN; no file and no temporary folder stay."""
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    dest = tmp_path / "resources/models/llama"
    with pytest.raises(HubAccessError) as info:
        fetch_hub_model("llama", _entry(hub_id=GATED_REPO), dest)
    message = str(info.value)
    assert message.startswith(f"models.llama: {hub.url}/{GATED_REPO} refused access (HTTP {status})"), message
    assert "accept its licence" in message and "HF_TOKEN=<token>" in message
    assert ("HF_TOKEN is not set" if token is None else "the token in HF_TOKEN was refused") in message
    assert token is None or token not in message  # the token is never printed
    assert not dest.exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing half-written
    assert any(p.startswith(f"/{GATED_REPO}/resolve/") for p in hub.downloads()) or any(
        m == "HEAD" and f"/{GATED_REPO}/resolve/" in p for m, p in hub.requests
    )
    sent = {a for (m, p), a in zip(hub.requests, hub.authorization) if "/resolve/" in p}
    assert sent == ({None} if token is None else {f"Bearer {token}"})


def test_gated_repo_fetches_with_hf_token(hub, tmp_path, monkeypatch):
    """HF_TOKEN from the environment reaches the hub as `Authorization: Bearer <token>` on every request; the
    fetched folder loads offline, and the token is written nowhere."""
    monkeypatch.setenv("HF_TOKEN", GATED_TOKEN)
    dest = tmp_path / "resources/models/llama"
    fetch_hub_model("llama", _entry(hub_id=GATED_REPO), dest)
    assert recorded_commit(dest) == COMMIT
    assert set(hub.authorization) == {f"Bearer {GATED_TOKEN}"} and hub.downloads()
    assert not [p for p in dest.rglob("*") if p.is_file() and GATED_TOKEN.encode() in p.read_bytes()]
    model, _ = load_model(model_spec("llama", _entry(hub_id=GATED_REPO, snapshot=str(dest))))
    assert resolved_commit(model) == COMMIT


def test_hub_refusing_the_metadata_is_named(hub, tmp_path, monkeypatch):
    """A private or gated repo whose metadata the hub refuses too (401 on the API call): the same named error."""
    from lmbias.engine import hub as hub_module

    def refuse(*args, **kwargs):
        from huggingface_hub.errors import RepositoryNotFoundError

        response = types.SimpleNamespace(
            status_code=401, headers={}, url=f"{hub.url}/api/models/{GATED_REPO}", request=None
        )
        raise RepositoryNotFoundError("401 Client Error. Repository Not Found", response=response)

    monkeypatch.setattr("huggingface_hub.HfApi.model_info", refuse)
    with pytest.raises(HubAccessError, match=r"models\.llama: .* refused access \(HTTP 401\).*HF_TOKEN is not set"):
        hub_module.fetch_hub_model("llama", _entry(hub_id=GATED_REPO), tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_wanted_files_take_pickles_only_when_allowed():
    repo = ["config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt", "onnx/model.onnx", "README.md"]
    assert wanted_files(repo, False) == (["config.json", "model.safetensors", "vocab.txt"], ["model.safetensors"])
    assert wanted_files(repo, True)[1] == ["model.safetensors"]  # safetensors preferred even when allowed
    assert wanted_files(["config.json", "pytorch_model.bin"], False)[1] == []
    assert wanted_files(["config.json", "pytorch_model.bin"], True)[1] == ["pytorch_model.bin"]


# -- the workflow: the online command of docs/getting-started.md, over loopback ---------------------------

#: A cheap overlay: WinoBias dev type 1 (no rewrites, plain metric) and CrowS-Pairs gender, one variant.
HUB_MODEL = "hub-bert"


def _online_config(workdir: Path, data_url: str, revision: str = "main") -> Path:
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["data_dir"] = None
    for dataset in ("winobias", "crows_pairs"):
        config["data"][dataset] = loopback_entry(config["data"][dataset], f"{data_url}/{dataset}/")
    config["models"][HUB_MODEL] = _entry(revision=revision)
    config["only_benchmarks"] = ["winobias", "crows_pairs"]
    wino = config["benchmarks"]["winobias"]
    wino["types"] = [1]
    wino["scoring"]["conditions"] = []
    wino["metric"].update(online_skew=["none"], alice_bob=False)
    crows = config["benchmarks"]["crows_pairs"]
    crows["bias_types"] = ["gender"]
    crows["scoring"]["variants"] = ["nangia"]
    path = workdir / "online.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _snakemake_online(workdir: Path, hub_url: str, *args: str) -> subprocess.CompletedProcess:
    """snakemake with huggingface_hub online against `hub_url` (CI exports HF_HUB_OFFLINE=1: overridden here,
    for this subprocess only) and an empty HF cache."""
    command, env = snakemake_command(*args)
    env = {k: v for k, v in env.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=hub_url, HF_HOME=str(workdir / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1")
    return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def data_server(shared_data):
    server, thread = serve_in_thread(partial(FileHandler, directory=str(shared_data)))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.mark.workflow
def test_online_command_builds_a_summary_once(tiny_files, data_server, repo_root, tmp_path):
    workdir = copy_workflow(repo_root, tmp_path / "wf")
    config = _online_config(workdir, data_server)
    target = f"results/{HUB_MODEL}/pretrained/summary.parquet"
    hub = FakeHub(_repos(tiny_files))
    try:
        proc = _snakemake_online(workdir, hub.url, target, "--configfile", str(config))
        assert proc.returncode == 0, proc.stderr[-6000:]
        folder = workdir / "resources/models" / HUB_MODEL
        assert recorded_commit(folder) == COMMIT
        fetched = len(hub.downloads())
        assert fetched == len(json.loads((folder / SOURCE_FILE).read_text())["files"])  # each file once
        summary = pq.read_table(workdir / target).to_pylist()
        assert {r["benchmark"] for r in summary} == {"winobias", "crows_pairs"}
        assert {r["model_commit"] for r in summary} == {COMMIT}  # provenance: the commit `main` resolved to
        assert {r["model_id"] for r in summary} == {REPO_ID}
        # A second run schedules nothing and asks the hub for nothing.
        before = len(hub.requests)
        again = _snakemake_online(workdir, hub.url, "-n", target, "--configfile", str(config))
        assert again.returncode == 0, again.stderr[-4000:]
        assert scheduled_outputs(again) == [], again.stdout[-3000:]
        assert len(hub.requests) == before
    finally:
        hub.stop()


@pytest.mark.workflow
def test_online_wrong_revision_stops_naming_the_key(tiny_files, data_server, repo_root, tmp_path):
    workdir = copy_workflow(repo_root, tmp_path / "wf")
    config = _online_config(workdir, data_server, revision="no-such-tag")
    hub = FakeHub(_repos(tiny_files))
    try:
        proc = _snakemake_online(workdir, hub.url, f"resources/models/{HUB_MODEL}", "--configfile", str(config))
    finally:
        hub.stop()
    assert proc.returncode != 0
    assert f"models.{HUB_MODEL}.revision: 'no-such-tag' is not a revision" in proc.stdout + proc.stderr
    assert not (workdir / "resources/models" / HUB_MODEL).exists()
    assert not list((workdir / "resources/models").glob(f".{HUB_MODEL}*"))


@pytest.mark.workflow
def test_hub_model_jobs_read_the_fetched_folder_and_fetching_is_local(repo_root, tmp_path, shared_data):
    """Dry run with the Slurm profile: scoring, fine-tuning and SentenceDebias jobs of a hub model list its
    folder (under models_dir, here outside the checkout) as an input; fetch_hub_model and the data rules are
    localrules (they run on the submit host), the model jobs are not."""
    from helpers.workflow_runs import run_snakemake

    workdir = copy_workflow(repo_root, tmp_path / "wf")
    (workdir / "resources/data").mkdir(parents=True, exist_ok=True)
    targets = [
        "results/bert-base/pretrained/seed0/scores/winobias.parquet",
        "results/bert-base/cds/seed0/model",
        "results/bert-base/sd/seed0/model",
    ]
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    methods = {n: e["kind"] for n, e in config["methods"].items()}
    targets = [t for t in targets if t.split("/")[2] in methods]
    models_dir = tmp_path / "scratch" / "models"
    proc = run_snakemake(workdir, "-n", "--profile", "profiles/slurm", *targets, "--config", f"models_dir={models_dir}")
    text = proc.stdout + proc.stderr
    folder = f"{models_dir}/bert-base"
    assert f"rule fetch_hub_model:\n    output: {folder}\n" in text, text[-3000:]
    assert text.count("rule fetch_hub_model:") == 1
    for target in targets:
        # a score file is an update() output: Snakemake prints it with " (update)"
        block = re.split(rf"output: {re.escape(target)}(?: \(update\))?\n", text, maxsplit=1)[0].rsplit("\n\n", 1)[1]
        assert folder in block.split("output:")[0], block
    local = json.loads(
        subprocess.run([sys.executable, "-c", _LOCALRULES], cwd=workdir, capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert "fetch_hub_model" in local
    assert {f"data_{d}" for d in config["data"]} <= set(local)
    assert "score_benchmark" not in local and "finetune" not in local


#: The workflow's localrules, through Snakemake's API (a dry run does not print which jobs are local).
_LOCALRULES = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(snakefile=Path("Snakefile"), workdir=Path("."), resource_settings=ResourceSettings(cores=1))
    print(json.dumps(sorted(workflow._workflow._localrules)))
"""
