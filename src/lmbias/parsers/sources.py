"""Raw data files: where each comes from (pinned URL or local folder) and getting it verified.

Every file in `data.<dataset>.files` has a sha256; a file lands at its destination only after its
bytes matched that hash, written to a temp file in the destination folder and renamed, so a failed
or interrupted download never leaves a partial or unverified file behind.

Precedence of sources for one file: `data.<dataset>.path` (a local folder for that dataset), then the
global `data_dir` (<data_dir>/<dataset>/<file>), then `base_url` + `upstream`. A file with `upstream: null`
is local-only: it is never downloaded, only copied (checksum verified) from those folders; a parser may
name it as a stand-in for a file missing there (`lmbias.parsers.required_files`, e.g. StereoSet's flat copy).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from lmbias import __version__
from lmbias.errors import ConfigError, DataError
from lmbias.io import file_mode

log = logging.getLogger(__name__)

CHUNK = 1 << 16
USER_AGENT = f"lmbias/{__version__}"
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The `sha256` value of a file whose checksum could not be verified when it was configured (no copy was
#: at hand). Its URL is still pinned to a commit; the file is accepted with a loud warning that prints the
#: hash it had, so the user can pin it. Every file we had a copy of is pinned by its real hash.
UNPINNED = "unpinned"


def _check_sha256(value, key: str) -> str:
    if value == UNPINNED:
        return UNPINNED
    if not isinstance(value, str) or not _SHA256.fullmatch(value.lower()):
        raise ConfigError(f"{key}.sha256 must be 64 hex digits (or {UNPINNED!r}), got {value!r}")
    return value.lower()


def _join_url(base_url: str, upstream: str) -> str:
    return base_url.rstrip("/") + "/" + upstream.lstrip("/")


def is_local_only(spec: Mapping) -> bool:
    """A configured file with `upstream: null`: read from a local folder only, never downloaded."""
    return isinstance(spec, Mapping) and "upstream" in spec and spec["upstream"] is None


def dataset_files(config_data_entry: Mapping, dataset: str = "<dataset>") -> dict[str, tuple[str, str]]:
    """{local file name: (full upstream URL, sha256)} for one `data.<dataset>` entry's downloadable files
    (local-only ones are left out)."""
    key = f"data.{dataset}"
    files = config_data_entry.get("files") if isinstance(config_data_entry, Mapping) else None
    if not isinstance(files, Mapping) or not files:
        raise ConfigError(f"{key}.files must map file names to {{upstream, sha256}}")
    base_url = config_data_entry.get("base_url")
    result = {}
    for name, spec in files.items():
        file_key = f"{key}.files.{name}"
        if is_local_only(spec):
            _check_sha256(spec.get("sha256"), file_key)
            continue
        if not isinstance(spec, Mapping) or not isinstance(spec.get("upstream"), str):
            raise ConfigError(f"{file_key} must have an 'upstream' path and a 'sha256'")
        if not isinstance(base_url, str) or not base_url:
            raise ConfigError(f"{key}.base_url is required to download {name}")
        result[name] = (_join_url(base_url, spec["upstream"]), _check_sha256(spec.get("sha256"), file_key))
    return result


def _file_entry(dataset: str, file: str, data_cfg: Mapping) -> Mapping:
    entry = data_cfg.get(dataset) if isinstance(data_cfg, Mapping) else None
    if not isinstance(entry, Mapping):
        raise ConfigError(
            f"data.{dataset}.files.{file}: unknown dataset {dataset!r} (configured: {sorted(data_cfg or {})})"
        )
    files = entry.get("files") or {}
    if file not in files:
        raise ConfigError(f"data.{dataset}.files.{file}: unknown file {file!r} for dataset {dataset!r}")
    return entry


def resolve_source(dataset: str, file: str, data_cfg: Mapping, data_dir: str | os.PathLike | None) -> tuple[str, str]:
    """("local", path) or ("url", url) for one configured file.

    `data.<dataset>.path` wins over `data_dir`, which wins over `base_url`. Local paths stay as
    written (relative to the working directory) so moving a checkout does not change them.
    """
    entry = _file_entry(dataset, file, data_cfg)
    if entry.get("path"):
        return "local", str(Path(entry["path"]) / file)
    if data_dir:
        return "local", str(Path(data_dir) / dataset / file)
    if is_local_only(entry["files"][file]):
        raise ConfigError(
            f"data.{dataset}.files.{file} is local-only (upstream: null): set data_dir or data.{dataset}.path "
            "to the folder that holds it"
        )
    url, _ = dataset_files({"base_url": entry.get("base_url"), "files": {file: entry["files"][file]}}, dataset)[file]
    return "url", url


def content_params(dataset: str, file: str, data_cfg: Mapping) -> dict:
    """What rule data_<dataset> tracks as `params` for one file: its name and pinned checksum (and upstream
    path), i.e. its content. Not where it is read from: a byte-identical copy of the data folder given as
    a new `data_dir` must not rerun anything, since the file is verified against `sha256` either way.
    The job resolves the source itself (`fetch_params` with the run's config)."""
    entry = _file_entry(dataset, file, data_cfg)
    spec = entry["files"][file]
    return {
        "dataset": dataset,
        "file": file,
        "upstream": spec.get("upstream"),
        "sha256": _check_sha256(spec.get("sha256"), f"data.{dataset}.files.{file}"),
    }


def fetch_params(dataset: str, file: str, data_cfg: Mapping, data_dir: str | os.PathLike | None) -> dict:
    """Everything rule data_<dataset> needs for one file (its `params`): this file's config slice
    (upstream, sha256), the resolved source, and the config key to name when a local file is missing."""
    entry = _file_entry(dataset, file, data_cfg)
    spec = entry["files"][file]
    kind, location = resolve_source(dataset, file, data_cfg, data_dir)
    config_key = f"data.{dataset}.path" if entry.get("path") else "data_dir"
    return {
        "dataset": dataset,
        "file": file,
        "upstream": spec.get("upstream"),
        "sha256": _check_sha256(spec.get("sha256"), f"data.{dataset}.files.{file}"),
        "source": kind,
        "location": location,
        "local_folder": (entry.get("path") or (str(Path(data_dir) / dataset) if data_dir else None)),
        "config_key": config_key,
    }


def _write_verified(
    dest: str | os.PathLike,
    sha256: str,
    fill: Callable[[BinaryIO, hashlib._Hash], int],
    describe: str,
) -> Path:
    """Run `fill(tmp_handle, digest)` into a temp file beside `dest`, check the digest, rename.

    On any failure neither the temp file nor `dest` remains.
    """
    dest = Path(dest)
    expected = sha256.lower()
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as handle:
            size = fill(handle, digest)
            handle.flush()
            os.fsync(handle.fileno())
        actual = digest.hexdigest()
        if expected == UNPINNED:
            log.warning(
                "UNVERIFIED: %s has no pinned checksum in config.yaml; it arrived with sha256 %s (%d bytes). "
                "Check it and pin it: sha256: %s",
                dest.name,
                actual,
                size,
                actual,
            )
        elif actual != expected:
            raise DataError(
                f"sha256 mismatch for {dest.name} from {describe}: expected {expected}, got {actual} ({size} bytes)",
                dest,
            )
        os.chmod(tmp, file_mode())  # mkstemp creates 0600; give the file the usual mode
        os.replace(tmp, dest)
        log.info("verified %s (%d bytes, sha256 %s) from %s", dest, size, actual, describe)
        return dest
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        dest.unlink(missing_ok=True)
        raise


def fetch_file(url: str, dest: str | os.PathLike, sha256: str, timeout: float = 60) -> Path:
    """Download `url` to `dest`, verifying length (Content-Length) and sha256 while streaming."""
    sha256 = _check_sha256(sha256, f"sha256 for {url}")

    def fill(handle: BinaryIO, digest) -> int:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        try:
            response = urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as err:
            raise DataError(f"download failed: HTTP {err.code} {err.reason} for {url}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise DataError(f"download failed for {url}: {reason}") from None
        with response:
            length = response.headers.get("Content-Length")
            expected = int(length) if length and length.isdigit() else None
            got = 0
            try:
                while True:
                    block = response.read(CHUNK)
                    if not block:
                        break
                    got += len(block)
                    digest.update(block)
                    handle.write(block)
            except http.client.IncompleteRead as err:
                got += len(err.partial)
                raise DataError(
                    f"truncated download from {url}: got {got} of {expected if expected is not None else '?'} bytes"
                ) from None
            except (TimeoutError, OSError, http.client.HTTPException) as err:
                raise DataError(f"download from {url} interrupted after {got} bytes: {err}") from None
        if expected is not None and got != expected:
            raise DataError(f"truncated download from {url}: got {got} of {expected} bytes")
        return got

    return _write_verified(dest, sha256, fill, url)


def copy_local(src: str | os.PathLike, dest: str | os.PathLike, sha256: str, config_key: str = "data_dir") -> Path:
    """Copy a local file to `dest` atomically after checking its sha256 (hashed while copying)."""
    src = Path(src)
    sha256 = _check_sha256(sha256, f"sha256 for {src}")
    if not src.is_file():
        Path(dest).unlink(missing_ok=True)
        raise DataError(f"local data file not found; fix config key `{config_key}` or add the file", src)

    def fill(handle: BinaryIO, digest) -> int:
        size = 0
        with open(src, "rb") as source:
            for block in iter(lambda: source.read(CHUNK), b""):
                digest.update(block)
                handle.write(block)
                size += len(block)
        return size

    return _write_verified(dest, sha256, fill, str(src))


def obtain(params: Mapping, dest: str | os.PathLike, timeout: float = 60) -> Path:
    """Materialise one file from fetch_params() output (what rule data_<dataset> runs)."""
    if params["source"] == "local":
        return copy_local(params["location"], dest, params["sha256"], params["config_key"])
    if params["source"] == "url":
        return fetch_file(params["location"], dest, params["sha256"], timeout=timeout)
    raise ConfigError(f"data.{params.get('dataset')}.files.{params.get('file')}: unknown source {params['source']!r}")


__all__ = [
    "is_local_only",
    "dataset_files",
    "resolve_source",
    "content_params",
    "fetch_params",
    "fetch_file",
    "copy_local",
    "obtain",
]
