"""Reading a fitted method's settings (SentenceDebias, INLP) from its config.yaml entry.

Both are frozen dataclasses built from `methods.<name>` keys; these helpers give them the same errors: the
first unknown key named with the known ones, and an integer out of range named with its key path.
"""

from __future__ import annotations

from dataclasses import fields

from lmbias.errors import ConfigError


def from_entry(cls, entry: dict | None, key: str, what: str, ignored: tuple[str, ...]):
    """An instance of the dataclass `cls` from a method entry, less the `ignored` keys (kind, corpus, ...)."""
    d = {k: v for k, v in (entry or {}).items() if k not in ignored}
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown {what} setting (known: {', '.join(sorted(known))})")
    return cls(**d)


def check_int(value, where: str, minimum: int, optional: bool = False) -> None:
    """ConfigError naming `where` unless `value` is an integer >= minimum (or None, when optional)."""
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{where}: {value!r} is not an integer >= {minimum}")
