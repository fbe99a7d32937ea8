"""The configuration reference page of the docs, generated from schemas/config.schema.yaml.

The schema's `description:` texts are the reference: docs/gen_pages.py renders them at build time
(mkdocs-gen-files), so the page lists every key the schema knows and cannot drift from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lmbias.io import load_yaml

#: How a key whose name the user chooses (a model, a method, a dataset, ...) is written in a key path.
FREE_NAME = "<name>"

_COMBINATORS = ("oneOf", "anyOf", "allOf")


@dataclass(frozen=True)
class SchemaKey:
    """One key of config.yaml as the schema describes it."""

    path: str  # dotted, FREE_NAME where the user names the key (`models.<name>.dtype`)
    kind: str  # what values it takes, in words
    default: str  # the schema's default, "" where it gives none
    required: bool
    description: str


def load_schema(path: str | Path) -> dict:
    return load_yaml(Path(path).read_text())


def _ref_path(ref: str) -> str:
    """`#/properties/benchmarks/properties/seat` -> `benchmarks.seat` (`#/$defs/x` -> `$defs.x`)."""
    parts = [p for p in ref.lstrip("#/").split("/") if p not in ("properties", "additionalProperties")]
    return ".".join(parts)


def _value_kind(node: dict) -> str:
    """The values a schema node admits, in words (enum, const, type, items, alternatives)."""
    if "$ref" in node:
        return f"as `{_ref_path(node['$ref'])}`"
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    branches = [b for b in node.get("oneOf", node.get("anyOf", [])) if isinstance(b, dict)]
    alternatives = [kind for kind in (_value_kind(b) for b in branches) if kind]
    if alternatives:  # branches that only differ in their required keys leave the plain type below
        return " or ".join(alternatives)
    types = node.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    names = []
    for t in types:
        if t == "array" and isinstance(node.get("items"), dict):
            item = _value_kind(node["items"])
            names.append(f"list of {item}" if item else "list")
        elif t == "object":
            names.append("mapping")
        elif t != "null":
            names.append({"string": "text", "number": "number", "integer": "integer", "boolean": "true/false"}[t])
    if "null" in types:
        names.append("null")
    if not names and ("properties" in node or "additionalProperties" in node):
        names.append("mapping")
    return " or ".join(names)


def _has_keys(node: dict) -> bool:
    """Whether a node defines keys of its own (rather than being a plain value)."""
    return isinstance(node, dict) and any(k in node for k in ("properties", "$ref", "if", *_COMBINATORS))


def _walk(node: dict, path: str, schema: dict, keys: list[SchemaKey], inlined: tuple[str, ...]) -> None:
    """Collect the keys under `node` (at key path `path`) into `keys`, depth first, in schema order."""
    if not isinstance(node, dict):
        return
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/") and ref not in inlined:
        # Definitions are written out where they are used; references to a key path stay references.
        target = schema
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        _walk(target, path, schema, keys, (*inlined, ref))
    required = set(node.get("required", []))
    for name, child in (node.get("properties") or {}).items():
        child_path = f"{path}.{name}" if path else name
        child = child if isinstance(child, dict) else {}
        keys.append(
            SchemaKey(
                path=child_path,
                kind=_value_kind(child),
                default="" if "default" not in child else f"`{child['default']}`",
                required=name in required,
                description=" ".join(str(child.get("description", "")).split()),
            )
        )
        _walk(child, child_path, schema, keys, inlined)
    free = node.get("additionalProperties")
    if _has_keys(free):
        free_path = f"{path}.{FREE_NAME}" if path else FREE_NAME
        keys.append(
            SchemaKey(
                free_path, _value_kind(free) or "mapping", "", False, " ".join(str(free.get("description", "")).split())
            )
        )
        _walk(free, free_path, schema, keys, inlined)
    for combinator in _COMBINATORS:
        for branch in node.get(combinator, []):
            _walk(branch, path, schema, keys, inlined)
    for branch in ("then", "else"):
        if isinstance(node.get(branch), dict):
            _walk(node[branch], path, schema, keys, inlined)


def schema_keys(schema: dict) -> list[SchemaKey]:
    """Every key path of config.yaml, once each, in schema order (a key reached twice keeps its first entry)."""
    keys: list[SchemaKey] = []
    _walk(schema, "", schema, keys, ())
    unique: dict[str, SchemaKey] = {}
    for key in keys:
        known = unique.get(key.path)
        if known is None or (not known.description and key.description):
            unique[key.path] = key
    return list(unique.values())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_reference(schema: dict) -> str:
    """The Markdown page: one section per top-level key, one table row per key path below it."""
    lines = [
        "# Configuration reference",
        "",
        "Every key of `config.yaml`, generated from the descriptions in `schemas/config.schema.yaml` when the",
        "docs are built (`lmbias.docs_schema`). Every mapping is closed: a key not listed here stops the run",
        "before any job starts. `<name>` stands for a name you choose (a model, a method, a dataset, ...).",
        "How the keys work together: [Configuration](../configuration.md).",
        "",
    ]
    if schema.get("description"):
        lines += [" ".join(str(schema["description"]).split()), ""]
    keys = schema_keys(schema)
    for top in [k for k in keys if "." not in k.path]:
        lines += [f"## `{top.path}`", ""]
        if top.description:
            lines += [top.description, ""]
        facts = [
            f"Values: {top.kind}." if top.kind else "",
            f"Default: {top.default}." if top.default else "",
            "Required." if top.required else "",
        ]
        if any(facts):
            lines += [" ".join(f for f in facts if f), ""]
        below = [k for k in keys if k.path.startswith(top.path + ".")]
        if below:
            lines += ["| key | values | default | description |", "|---|---|---|---|"]
            for key in below:
                name = f"`{key.path}`" + (" (required)" if key.required else "")
                lines.append(f"| {name} | {_cell(key.kind)} | {_cell(key.default)} | {_cell(key.description)} |")
            lines.append("")
    return "\n".join(lines)
