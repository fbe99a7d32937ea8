"""Compare the score files of two results folders (a refactor's before and after): the same files, the same data
and the same metadata apart from the score key, which hashes the library files and so changes when code moves.

    python bench/compare_scores.py BEFORE_CHECKOUT AFTER_CHECKOUT [--glob 'results/**/scores/*.parquet']

Prints one line per file that differs and the count; exits 1 when any does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

SCORE_KEY = b"lmbias.score_key"


def _values(table, column: str) -> list[str]:
    """A column as text, so that NaN cells compare equal (Table.equals never finds NaN equal to NaN)."""
    return [repr(v) for v in table.column(column).to_pylist()]


def differences(before: Path, after: Path) -> list[str]:
    """What differs between two score files, in words (empty: the same)."""
    a, b = pq.read_table(before), pq.read_table(after)
    found = []
    if a.schema.remove_metadata() != b.schema.remove_metadata():
        found.append("schema")
    elif any(_values(a, c) != _values(b, c) for c in a.column_names):
        found.append("data")
    ma = {k: v for k, v in (a.schema.metadata or {}).items() if k != SCORE_KEY}
    mb = {k: v for k, v in (b.schema.metadata or {}).items() if k != SCORE_KEY}
    found += [f"metadata {k.decode()}" for k in sorted(set(ma) | set(mb)) if ma.get(k) != mb.get(k)]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--glob", default="results/**/scores/*.parquet")
    args = parser.parse_args(argv)
    names = {side: sorted(p.relative_to(side) for p in side.glob(args.glob)) for side in (args.before, args.after)}
    only = set(names[args.before]) ^ set(names[args.after])
    for rel in sorted(only):
        print(f"only in one folder: {rel}")
    differing = 0
    for rel in sorted(set(names[args.before]) & set(names[args.after])):
        found = differences(args.before / rel, args.after / rel)
        if found:
            differing += 1
            print(f"{rel}: {', '.join(found)}")
    print(f"{len(names[args.before])} files before, {len(names[args.after])} after, {differing} differing")
    return 1 if differing or only else 0


if __name__ == "__main__":
    sys.exit(main())
