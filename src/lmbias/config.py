"""Config validation with messages that name the offending key (e.g. `models.tiny-bert.famly`)."""

from __future__ import annotations

import re
from pathlib import Path

from lmbias.errors import ConfigError
from lmbias.io import load_yaml
from lmbias.options import key_path, schema_errors


def _blame(parts: list, sources) -> str | None:
    """The source that set the deepest part of `parts` (later sources win ties, as they override)."""
    best, depth = None, -1
    for name, data in sources:
        node, d = data, 0
        for part in parts:
            if isinstance(node, dict) and part in node:
                node, d = node[part], d + 1
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node, d = node[part], d + 1
            else:
                break
        if d >= depth:
            best, depth = name, d
    return best


def config_errors(config: dict, schema_path: str | Path, sources=None) -> list[str]:
    """Every schema violation as 'key.path: message', most specific first.

    `sources`: [(name, dict)] in override order (config.yaml, --configfile overlays, --config); each
    message then ends with the source that set the offending key.
    """
    return [
        f"{key_path(parts)}: {text}" + (f" (in {_blame(parts, sources)})" if sources else "")
        for parts, text in _errors(config, schema_path)
    ]


def _errors(config: dict, schema_path: str | Path) -> list[tuple[list, str]]:
    return schema_errors(config, load_yaml(Path(schema_path).read_text()))


def validate_config(config: dict, schema_path: str | Path, source: str = "config.yaml", sources=None) -> None:
    """Raise ConfigError listing every violation with its key path; nothing runs on an invalid config.

    With `sources` ([(name, dict)] in override order) each violation names the file (or `--config`) that
    set the key, and the message names the files involved instead of `source`.
    """
    errors = config_errors(config, schema_path, sources)
    if errors:
        if sources and len(sources) > 1:
            source = "the configuration (" + " + ".join(name for name, _ in sources) + ")"
        raise ConfigError(f"{source} is invalid:\n  " + "\n  ".join(errors))


def _parse_key(key: str) -> list:
    """'targets.models[1]' -> ['targets', 'models', 1]."""
    parts = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", key):
        parts.append(int(index) if index else name)
    return parts


def name_source(error: ConfigError, sources) -> ConfigError:
    """`error` (a message starting with a key path, 'targets.models[1]: ...') with the source that set
    that key appended, when there are several sources to choose from."""
    message = str(error)
    key = message.split(":", 1)[0]
    if not sources or len(sources) < 2 or " " in key:
        return error
    return ConfigError(f"{message} (in {_blame(_parse_key(key), sources)})")


def config_sources(workflow_config_file: str, configfiles, overrides) -> list[tuple[str, dict]]:
    """[(name, dict)] in Snakemake's override order: the workflow's config file, --configfile, --config."""
    sources = []
    for path in [workflow_config_file, *[str(p) for p in configfiles]]:
        if Path(path).is_file() and not any(name == path for name, _ in sources):
            sources.append((path, load_yaml(Path(path).read_text()) or {}))
    if overrides:
        sources.append(("--config", dict(overrides)))
    return sources


def tiny_model_pattern(models: dict) -> str:
    """Regex of the configured models with a `tiny` block: the only values rules/models.smk's {model} takes."""
    names = sorted(name for name, entry in models.items() if isinstance(entry, dict) and "tiny" in entry)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def gguf_model_pattern(models: dict, hub: bool | None = None) -> str:
    """Regex of the configured models with a `gguf` block (rules/models.smk's dequantize_gguf); hub=True: only
    those whose file is on the hub (fetch_gguf_file)."""
    names = sorted(
        name
        for name, entry in models.items()
        if isinstance(entry, dict)
        and isinstance(entry.get("gguf"), dict)
        and (hub is None or ("hub_id" in entry["gguf"]) == hub)
    )
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def gguf_file_folder(name: str) -> str:
    """Where fetch_gguf_file puts a GGUF entry's hub file: resources/gguf/<name>."""
    return f"resources/gguf/{name}"


def hub_model_pattern(models: dict) -> str:
    """Regex of the configured models with a `hub_id`: the values rules/models.smk's fetch_hub_model takes."""
    names = sorted(name for name, entry in models.items() if isinstance(entry, dict) and "hub_id" in entry)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def hub_model_folder(config: dict, name: str) -> str:
    """Where hub model `name` is fetched to (rule fetch_hub_model): <models_dir>/<name>, default
    resources/models like the tiny models."""
    return f"{str(config.get('models_dir') or 'resources/models').rstrip('/')}/{name}"


def check_papers(config: dict) -> None:
    """`papers:` cross-checks a schema cannot express (unknown paper, model or method names): ConfigError
    naming the key (see lmbias.papers.grid)."""
    from lmbias.papers.grid import check_papers as _check

    _check(config)
