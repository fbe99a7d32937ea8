"""config.yaml `papers:`: which of our (model, method) pairs each paper's tables and figures read.

A paper's grid is the cross product of its `models` and `methods`; a pair the model's family cannot run
(gpr on a causal or seq2seq model, anything but pretrained on a headless encoder) is simply not a pair:
it is skipped without an error, since a cross product always has such holes.
"""

from __future__ import annotations

from lmbias import registry
from lmbias.errors import ConfigError
from lmbias.papers.published import PAPERS
from lmbias.papers.tables import pair_settings


def check_papers(config: dict) -> None:
    """ConfigError naming the key: an unknown paper, or a model or method the config does not define."""
    papers = config.get("papers") or {}
    if not isinstance(papers, dict):
        raise ConfigError(f"papers: expected a mapping of paper -> {{models, methods}}, got {papers!r}")
    for paper, entry in papers.items():
        if paper not in PAPERS:
            raise ConfigError(f"papers.{paper}: unknown paper; known papers: {', '.join(PAPERS)}")
        if not isinstance(entry, dict):
            raise ConfigError(f"papers.{paper}: expected {{models: [...], methods: [...]}}, got {entry!r}")
        for key, known in (("models", config["models"]), ("methods", config["methods"])):
            names = entry.get(key)
            if not isinstance(names, list) or not names:
                raise ConfigError(f"papers.{paper}.{key}: expected a non-empty list of configured {key}")
            for i, name in enumerate(names):
                if name not in known:
                    raise ConfigError(f"papers.{paper}.{key}[{i}]: unknown {key[:-1]} {name!r}; configured: "
                                      f"{', '.join(sorted(known))}")


def runs(config: dict, model: str, method: str) -> bool:
    try:
        registry.check_method_family(model, config["models"][model]["family"], method, config["methods"][method])
    except ConfigError:
        return False
    return True


def paper_pairs(config: dict, paper: str) -> list[tuple[str, str]]:
    """The paper's (model, method) pairs in grid order (models outer), without the ones a family cannot run."""
    entry = (config.get("papers") or {})[paper]
    return [(m, k) for m in entry["models"] for k in entry["methods"] if runs(config, m, k)]


def pair_info(config: dict, model: str, method: str, with_settings: bool) -> dict:
    """What a table job needs of one pair: names, kind (a sweep instance's kind is its base kind), hub id,
    and (only when the table reads them) the resolved training settings."""
    model_entry, method_entry = config["models"][model], config["methods"][method]
    info = {"model": model, "method": method, "kind": method_entry["kind"], "hub_id": model_entry.get("hub_id")}
    if with_settings:
        resolved = registry.resolve_method(model, model_entry, method, method_entry)
        info["settings"] = pair_settings(model_entry, method_entry, resolved)
    return info
