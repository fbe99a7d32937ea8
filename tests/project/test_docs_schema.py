"""The generated configuration reference (docs/reference/configuration.md) lists every key of the schema."""

from lmbias.docs_schema import FREE_NAME, load_schema, render_reference, schema_keys


def _property_names(node, found):
    """Every name under a `properties:` mapping anywhere in the schema, found independently of docs_schema."""
    if isinstance(node, dict):
        for name, child in (node.get("properties") or {}).items():
            found.add(name)
            _property_names(child, found)
        for key, child in node.items():
            if key != "properties":
                _property_names(child, found)
    elif isinstance(node, list):
        for child in node:
            _property_names(child, found)
    return found


def test_every_schema_key_appears_in_the_reference(repo_root):
    schema = load_schema(repo_root / "schemas" / "config.schema.yaml")
    text = render_reference(schema)
    paths = [key.path for key in schema_keys(schema)]
    names = _property_names(schema, set())
    assert len(names) > 100
    missing = sorted(name for name in names if not any(p.split(".")[-1] == name for p in paths))
    assert not missing, f"schema keys missing from the reference: {missing}"
    for path in paths:
        assert f"`{path}`" in text, path
    # Keys of every section, including those only reached through $defs (generic benchmark entries).
    for path in (
        "models.<name>.device_map",
        "methods.<name>.training.adapter.r",
        "aggregate.interval",
        "corpora.ontonotes.gpr.variants.<name>.split_by",
        "data.<name>.files.<name>.sha256",
        "benchmarks.<name>.scoring.stride",
        "benchmarks.crows_pairs.scoring.clm_context",
    ):
        assert path in paths, path


def test_descriptions_defaults_and_references_are_rendered():
    schema = {
        "description": "Top.",
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"description": "The a | key.", "enum": ["x", "y"], "default": "x"},
            "b": {"type": "object", "properties": {"c": {"type": ["integer", "null"], "description": "C."}}},
            "d": {"$ref": "#/properties/b"},
            "e": {
                "type": "object",
                "additionalProperties": {"type": "object", "properties": {"f": {"type": "boolean"}}},
            },
        },
    }
    text = render_reference(schema)
    assert "## `a`" in text and "The a | key." in text and "Default: `x`." in text and "Required." in text
    assert "| `b.c` | integer or null |  | C. |" in text
    assert "as `b`" in text
    assert f"| `e.{FREE_NAME}.f` | true/false |" in text
