"""Option blocks checked once, against their part of the workflow's schema (schemas/config.schema.yaml).

The Snakefile validates the whole config against the schema before any job runs; a job, the `lmbias` command or a
library caller gets a config slice (`benchmarks.<name>.metric`, ...) without that step. `check_block` validates
such a slice against the same part of the same schema, so that a type, a range, an allowed value or an unknown key
is written down once (in the schema) and its error names the key as the workflow's would. The option classes keep
only the checks a schema cannot say.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import jsonschema

from lmbias.errors import ConfigError
from lmbias.io import load_yaml

#: The workflow's schema: beside the package in a checkout and in every copy of the workflow (src/ and schemas/).
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


@functools.cache
def load_schema(path: str | Path = SCHEMA_FILE) -> dict:
    """The schema at `path` (read once per process); a ConfigError naming it when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"the config schema {path} is missing (lmbias reads it beside its src/ folder)")
    return load_yaml(path.read_text(encoding="utf-8"))


def schema_part(schema_key: str, schema: dict | None = None) -> dict:
    """The part of the schema for a dotted config key ("benchmarks.occupations.metric"), through `properties` and
    the schema's own references ("$ref": "#/..."; seat_v1's metric block is seat's). A key that starts with
    "$defs.<name>" starts at that definition (a block several entries share: "$defs.generation")."""
    root = schema if schema is not None else load_schema()
    parts = schema_key.split(".")
    node = root
    if parts[0] == "$defs":
        node = _dereferenced(root.get("$defs", {}).get(parts[1] if len(parts) > 1 else ""), root)
        parts = parts[2:]
    for part in parts:
        node = _dereferenced(node.get("properties", {}).get(part), root) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise KeyError(f"{schema_key}: no such part of the config schema")
    return node


def _dereferenced(node, root: dict):
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target = root
        for step in node["$ref"][2:].split("/"):
            target = target[step]
        node = target
    return node


def schema_errors(instance, schema: dict, list_known: bool = False) -> list[tuple[list, str]]:
    """Every violation of `schema` by `instance` as (key path, message), sorted by key path; an unknown key is
    reported under its own name (with list_known, followed by the keys its block knows), the closest alternative
    of a oneOf/anyOf under the deepest key; a NaN or infinite number anywhere, which no range of the schema
    catches (every comparison with NaN is false), as not a finite number."""
    validator = jsonschema.Draft202012Validator(schema)
    messages = [(path, f"{value!r} is not a finite number") for path, value in _non_finite(instance, [])]
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "oneOf" and all("required" in alt for alt in error.validator_value):
            keys = ", ".join(k for alt in error.validator_value for k in alt["required"])
            messages.append((list(error.absolute_path), f"needs exactly one of: {keys}"))
            continue
        leaf = error
        if error.context:  # oneOf/anyOf: report the closest sub-error
            leaf = jsonschema.exceptions.best_match(error.context)
        key = list(error.absolute_path) + [p for p in leaf.relative_path if leaf is not error]
        if error.validator in ("additionalProperties", "unevaluatedProperties") and not error.context:
            known = _known_keys(error.schema, schema)
            text = "unknown key" + (f" (known: {', '.join(sorted(known))})" if list_known and known else "")
            for name in sorted(set(error.instance) - known):
                messages.append((list(error.absolute_path) + [name], text))
            continue
        messages.append((key, leaf.message))
    return messages


def _known_keys(node: dict, root: dict) -> set[str]:
    """The keys a closed block names: its own `properties` and those of the blocks its allOf refers to (an
    unevaluatedProperties block: bold.scoring is $defs.generation's keys and its own)."""
    known = set(node.get("properties", {}))
    for part in node.get("allOf", []):
        known |= _known_keys(_dereferenced(part, root), root)
    return known


def _non_finite(value, path: list) -> list[tuple[list, float]]:
    """(key path, value) of every NaN or infinite float in a config value (YAML's .nan, .inf)."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(path, value)]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _non_finite(v, [*path, k])]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _non_finite(v, [*path, i])]
    return []


def key_path(parts, prefix: str = "") -> str:
    """'models.tiny-bert.training' from its parts (list items as [i]), after `prefix` when given."""
    text = prefix
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    return text or "<top level>"


def check_block(block, schema_key: str, key: str | None = None) -> None:
    """ConfigError naming the key (`key`, default schema_key) of every way `block` breaks the schema's part for
    `schema_key`; None and {} are an empty block. The keys differ for an entry under a name of its own (a peer's
    reading, `benchmarks.crows_pairs-biasbench.metric`), which takes its dataset's part of the schema. The part is
    read with the schema's definitions beside it, so that its references to "#/$defs/..." resolve."""
    root = load_schema()
    part = {**schema_part(schema_key, root), "$defs": root.get("$defs", {})}
    errors = schema_errors({} if block is None else block, part, list_known=True)
    if errors:
        raise ConfigError("; ".join(f"{key_path(parts, key or schema_key)}: {text}" for parts, text in errors))
