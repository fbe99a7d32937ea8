"""Config validation with messages that name the offending key (e.g. `models.tiny-bert.famly`)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from lmbias.errors import ConfigError


def _key_path(path) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else (("." if parts else "") + str(p)))
    return "".join(parts) or "<top level>"


def config_errors(config: dict, schema_path: str | Path) -> list[str]:
    """Every schema violation as 'key.path: message', most specific first."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    messages = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "oneOf" and all("required" in alt for alt in error.validator_value):
            keys = ", ".join(k for alt in error.validator_value for k in alt["required"])
            messages.append(f"{_key_path(error.absolute_path)}: needs exactly one of: {keys}")
            continue
        leaf = error
        if error.context:  # oneOf/anyOf: report the closest sub-error
            leaf = jsonschema.exceptions.best_match(error.context)
        key = _key_path(list(error.absolute_path) + [p for p in leaf.relative_path if leaf is not error])
        if error.validator == "additionalProperties" and not error.context:
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            for name in extra:
                messages.append(f"{_key_path(list(error.absolute_path) + [name])}: unknown key")
            continue
        messages.append(f"{key}: {leaf.message}")
    return messages


def validate_config(config: dict, schema_path: str | Path, source: str = "config.yaml") -> None:
    """Raise ConfigError listing every violation with its key path; nothing runs on an invalid config."""
    errors = config_errors(config, schema_path)
    if errors:
        raise ConfigError(f"{source} is invalid:\n  " + "\n  ".join(errors))
