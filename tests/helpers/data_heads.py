"""The first lines of real data files, for the long workflow runs: the same files cut where the whole file only
makes a run slower, behind `data.<dataset>.path` with checksums that match the cut."""

from __future__ import annotations

from pathlib import Path

from lmbias.io import file_sha256


def write_data_heads(config: dict, shared_data: Path, root: Path, heads: dict[str, dict[str, int]]) -> None:
    """For each dataset of heads ({dataset: {file: lines kept}}): a folder root/<dataset> with the first lines of
    each listed file and links to the dataset's other real files; config's data.<dataset>.path points there and
    its checksums of the cut files are theirs."""
    for dataset, kept in heads.items():
        folder = root / dataset
        for name, entry in config["data"][dataset]["files"].items():
            source, dest = shared_data / dataset / name, folder / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if name in kept:
                dest.write_bytes(b"".join(source.read_bytes().splitlines(keepends=True)[: kept[name]]))
                entry["sha256"] = file_sha256(dest)
            elif source.exists():
                dest.symlink_to(source)
        config["data"][dataset]["path"] = str(folder)
