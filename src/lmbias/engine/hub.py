"""Hub models fetched once, into a folder that every job then reads offline.

On most clusters only the submit host reaches the internet, and ten scoring jobs of one model must not race
to download the same files into the HF cache. So the workflow's `fetch_hub_model` rule (a localrule) calls
fetch_hub_model here: it resolves the entry's `revision` to a commit, downloads that commit's config,
tokenizer and safetensors files (pickled `*.bin` weights only with `allow_pickle: true`) into a temporary
folder beside the destination, records where they came from in SOURCE_FILE (hub id, requested revision,
resolved commit, every file's size and sha256) and renames the folder into place. A failure leaves no
folder. Jobs load the folder with `local_files_only=True` (lmbias.engine.models, `snapshot`) and take the
commit for the summary's `model_commit` from SOURCE_FILE (recorded_commit). A revision that is not a commit
hash (is_pinned) is logged as a warning, at the fetch and at every load (warn_unpinned).

Gated models (Llama, Gemma: the hub serves their files only to accounts that accepted the licence) need a
token: the fetch sends `HF_TOKEN` from the environment (else huggingface_hub's stored login, if any), and a
401/403 from the hub is a HubAccessError that says to accept the licence and set the token. The token is
never written anywhere.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from lmbias.engine.model_spec import ModelSpec
from lmbias.errors import ConfigError, LmbiasError
from lmbias.io import atomic_folder, file_sha256

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"[0-9a-f]{40}")
#: What a hub model's fetched folder records about its origin (written by fetch_hub_model).
SOURCE_FILE = "lmbias_source.json"
#: Top-level repo files a model needs besides its weights: config, tokenizer files (json, txt vocabularies
#: and merges, sentencepiece models).
CONFIG_PATTERNS = ("*.json", "*.txt", "*.model")
SAFE_WEIGHT_PATTERNS = ("*.safetensors",)
PICKLED_WEIGHT_PATTERNS = ("*.bin",)


#: Modules whose exceptions mean the connection failed or broke off (httpx2: huggingface_hub >= 1.x's client).
_TRANSPORT_MODULES = ("httpx", "httpcore", "h11", "requests", "urllib3")


class HubDownloadError(LmbiasError):
    """The hub could not be reached, or a download broke off or came back short; nothing was kept."""


class HubAccessError(LmbiasError):
    """The hub refused access (HTTP 401/403): a gated model whose licence this account has not accepted, a
    private one, or no (valid) token; nothing was kept."""


def read_source(folder: str | os.PathLike) -> dict:
    """The SOURCE_FILE record of a fetched folder ({} when there is none)."""
    path = Path(folder) / SOURCE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def recorded_commit(folder: str | os.PathLike) -> str:
    """The hub commit a fetched folder's files came from ("" when it records none)."""
    return str(read_source(folder).get("commit") or "")


def is_pinned(revision: str | None) -> bool:
    """True for a full commit hash: the only hub revision that always names the same weights."""
    return bool(revision) and bool(_COMMIT.fullmatch(revision))


def warn_unpinned(spec: ModelSpec, commit: str) -> None:
    """Log a warning for a hub id whose revision is not a commit (the fetch and every load of it call this)."""
    if spec.is_local or is_pinned(spec.revision):
        return
    log.warning(
        "models.%s: revision %r of %s is not a commit, so these numbers cannot be reproduced exactly once the "
        "hub moves on; it resolved to commit %s (recorded in the summary's model_commit). Pin it: revision: %s",
        spec.name,
        spec.revision or "main",
        spec.source,
        commit or "?",
        commit or "<commit>",
    )


#: The environment variable the fetch reads its token from (huggingface_hub's own name for it).
TOKEN_ENV = "HF_TOKEN"


def hub_token() -> str | None:
    """`HF_TOKEN` from the environment (None when unset or blank: huggingface_hub then uses a stored login)."""
    token = (os.environ.get(TOKEN_ENV) or "").strip()
    return token or None


def _status(exc) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _access_error(key: str, repo: str, exc) -> HubAccessError:
    """The named error for a 401/403: what to do, with or without a token sent."""
    status = _status(exc)
    page = f"{_endpoint().rstrip('/')}/{repo}"
    if hub_token() is None:
        why = f"{TOKEN_ENV} is not set"
    else:
        why = f"the token in {TOKEN_ENV} was refused or has not been granted access to it yet"
    return HubAccessError(
        f"{key}: {page} refused access (HTTP {status or '401/403'}): it is gated or private, and {why}. If it is a "
        f"gated model (Llama, Gemma, ...), log in on {_endpoint()}, accept its licence at {page}, create a read "
        f"token and set {TOKEN_ENV}=<token> in the environment of the host that fetches models (where snakemake "
        f"runs; on Slurm, the submit host); if it is not, check {key}.hub_id. Nothing was kept."
    )


def _is_access_refused(exc) -> bool:
    from huggingface_hub.errors import GatedRepoError

    return isinstance(exc, GatedRepoError) or _status(exc) in (401, 403)


def wanted_files(repo_files, allow_pickle: bool) -> tuple[list[str], list[str]]:
    """(files to fetch, weight files among them) of a repo's file list: top-level files only, config and
    tokenizer files plus safetensors weights, plus pickled `*.bin` weights only with `allow_pickle`."""
    weight_patterns = SAFE_WEIGHT_PATTERNS + (PICKLED_WEIGHT_PATTERNS if allow_pickle else ())
    top = sorted(f for f in repo_files if "/" not in f)
    weights = [f for f in top if any(fnmatch.fnmatch(f, p) for p in weight_patterns)]
    if allow_pickle and any(f.endswith(".safetensors") for f in weights):  # never both copies of the weights
        weights = [f for f in weights if f.endswith(".safetensors")]
    others = [f for f in top if any(fnmatch.fnmatch(f, p) for p in CONFIG_PATTERNS)]
    return sorted(set(weights) | set(others)), weights


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def _resolve(name: str, repo: str, revision: str, key: str | None = None):
    """(commit, repo file names) of `repo` at `revision`; ConfigError naming the key (default models.<name>) for a
    wrong hub id or revision, HubDownloadError when the hub cannot be reached."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    key = key or f"models.{name}"
    try:
        info = HfApi(endpoint=_endpoint(), token=hub_token()).model_info(repo, revision=revision)
    except RevisionNotFoundError:
        raise ConfigError(
            f"{key}.revision: {revision!r} is not a revision (commit, branch or tag) of {repo} on "
            f"{_endpoint()}; fix {key}.revision"
        ) from None
    except (GatedRepoError, RepositoryNotFoundError) as exc:
        if _is_access_refused(exc):  # the hub answers 401 for gated, private and (without a token) missing repos
            raise _access_error(key, repo, exc) from None
        raise ConfigError(
            f"{key}.hub_id: {repo} is not a model on {_endpoint()} (or it is private: set "
            f"{TOKEN_ENV}); fix {key}.hub_id"
        ) from None
    except OfflineModeIsEnabled:
        raise HubDownloadError(
            f"{key}: HF_HUB_OFFLINE is set, so {repo} cannot be fetched; unset it where the "
            f"model is fetched (the submit host), or download the model yourself and set "
            f"{key}.path"
        ) from None
    except (HfHubHTTPError, OSError) as exc:  # httpx's transport errors are not OSErrors
        if _is_access_refused(exc):
            raise _access_error(key, repo, exc) from None
        raise HubDownloadError(
            f"{key}: cannot reach {_endpoint()} to resolve {repo}@{revision}: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        if type(exc).__module__.startswith(_TRANSPORT_MODULES):
            raise HubDownloadError(
                f"{key}: cannot reach {_endpoint()} to resolve {repo}@{revision}: {type(exc).__name__}: {exc}"
            ) from exc
        raise
    if not info.sha:
        raise HubDownloadError(f"{key}: {_endpoint()} did not say which commit {repo}@{revision} is")
    return info.sha, [s.rfilename for s in info.siblings or []]


def fetch_hub_model(name: str, entry: Mapping, out_dir: str | os.PathLike, key: str | None = None) -> Path:
    """Download models.<name> (its `hub_id`, `revision` and `allow_pickle`) at its revision into `out_dir`,
    atomically; see the module doc. `key`: the config key errors name (default models.<name>; a scorer's is
    scorers.<name>)."""
    key = key or f"models.{name}"
    repo, revision, allow_pickle = (
        entry.get("hub_id"),
        entry.get("revision") or "main",
        entry.get("allow_pickle", False),
    )
    if not isinstance(repo, str) or not repo.strip():
        raise ConfigError(f"{key}.hub_id: {repo!r} is not a hub id (only hub models are fetched)")
    if not isinstance(revision, str):
        raise ConfigError(f"{key}.revision: {revision!r} is not a string (quote commit hashes)")
    if not isinstance(allow_pickle, bool):
        raise ConfigError(f"{key}.allow_pickle: {allow_pickle!r} is not true or false")
    spec = ModelSpec(
        name=name,
        family=str(entry.get("family", "")),
        source=repo,
        revision=revision,
        is_local=False,
        allow_pickle=allow_pickle,
    )
    commit, repo_files = _resolve(name, repo, revision, key)
    files, weights = wanted_files(repo_files, spec.allow_pickle)
    if not weights:
        pickled, _ = wanted_files(repo_files, True)
        pickled = [f for f in pickled if f.endswith(".bin")]
        if pickled:
            raise ConfigError(
                f"{key}.allow_pickle: {repo}@{commit} has no safetensors weights, only pickled ones "
                f"({', '.join(pickled)}), which can run code when loaded; if you trust it, set {key}.allow_pickle: true"
            )
        raise ConfigError(f"{key}.hub_id: {repo}@{commit} has no weight files (*.safetensors) at its top level")
    warn_unpinned(spec, commit)
    out = Path(out_dir)
    log.info(
        "%s: fetching %d files of %s@%s (revision %s) from %s into %s",
        key,
        len(files),
        repo,
        commit,
        revision,
        _endpoint(),
        out,
    )
    with atomic_folder(out) as tmp:
        _download(key, repo, commit, files, tmp)
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's download metadata
        missing = [f for f in files if not (tmp / f).is_file()]
        if missing:
            raise HubDownloadError(f"{key}: {repo}@{commit}: {', '.join(missing)} did not arrive")
        record = {
            "hub_id": repo,
            "revision": revision,
            "commit": commit,
            "allow_pickle": spec.allow_pickle,
            "endpoint": _endpoint(),
            "files": {f: {"size": (tmp / f).stat().st_size, "sha256": file_sha256(tmp / f)} for f in files},
        }
        (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    log.info("%s: %s@%s in %s", key, repo, commit, out)
    return out


def _download(key: str, repo: str, commit: str, files: list[str], folder: Path) -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    try:
        snapshot_download(
            repo,
            revision=commit,
            allow_patterns=files,
            local_dir=folder,
            max_workers=4,
            endpoint=_endpoint(),
            token=hub_token(),
        )
    except (HfHubHTTPError, OSError) as exc:  # includes huggingface_hub's size check of each file
        if _is_access_refused(exc):  # a gated repo's metadata is public, its files are not
            raise _access_error(key, repo, exc) from None
        raise HubDownloadError(
            f"{key}: downloading {repo}@{commit} from {_endpoint()} failed: "
            f"{type(exc).__name__}: {exc}; nothing was kept, run again to retry"
        ) from exc
    except Exception as exc:
        if type(exc).__module__.startswith(_TRANSPORT_MODULES):  # broke off mid-download, server gone
            raise HubDownloadError(
                f"{key}: downloading {repo}@{commit} from {_endpoint()} broke off: "
                f"{type(exc).__name__}: {exc}; nothing was kept, run again to retry"
            ) from exc
        raise


def fetch_hub_file(key: str, repo: str, revision: str, filename: str, sha256: str, out_dir: str | os.PathLike) -> Path:
    """Download one file of a hub repository at `revision` into `out_dir` (atomically), with its sha256 checked
    against `sha256` before the folder is kept (a GGUF entry's file: lmbias.engine.gguf, rule fetch_gguf_file).
    `key` is the config key errors name (models.<name>.gguf). The folder records where the file came from."""
    commit, repo_files = _resolve(key, repo, revision, key)
    if filename not in repo_files:
        raise ConfigError(
            f"{key}.file: {filename} is not a file of {repo}@{commit} (it has: "
            + ", ".join(sorted(f for f in repo_files if f.endswith(".gguf")) or sorted(repo_files)[:10])
            + ")"
        )
    out = Path(out_dir)
    log.info("%s: fetching %s of %s@%s (revision %s) from %s into %s", key, filename, repo, commit, revision,
             _endpoint(), out)  # fmt: skip
    with atomic_folder(out) as tmp:
        _download(key, repo, commit, [filename], tmp)
        shutil.rmtree(tmp / ".cache", ignore_errors=True)
        if not (tmp / filename).is_file():
            raise HubDownloadError(f"{key}: {repo}@{commit}: {filename} did not arrive")
        found = file_sha256(tmp / filename)
        if found != sha256:
            raise HubDownloadError(
                f"{key}.sha256: {repo}@{commit}'s {filename} has sha256 {found}, but the entry pins {sha256}; "
                "nothing was kept (another file under that name: fix the entry's revision or sha256)"
            )
        record = {"hub_id": repo, "revision": revision, "commit": commit, "endpoint": _endpoint(),
                  "files": {filename: {"size": (tmp / filename).stat().st_size, "sha256": found}}}  # fmt: skip
        (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return out
