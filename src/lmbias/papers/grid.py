"""config.yaml `papers:`: which of our (model, method) pairs each paper's tables and figures read.

A paper's grid is the cross product of its `models` and `methods`; a pair the model's family cannot run
(gpr on a causal or seq2seq model, anything but pretrained on a headless encoder) is simply not a pair:
it is skipped without an error, since a cross product always has such holes.

A pair whose inputs the user cannot have is *left out*, explicitly: Manela et al.'s GPR fine-tune needs the
licensed OntoNotes 5.0 (`corpora.ontonotes.path`), so without it the gpr pairs are not built, and every
table that would show them, and the run's log, say which pairs were left out and why (`left_out_pairs`).
The paper's other cells are still built.
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


#: Corpora a user may not have, by path prefix: (config key that provides them, why it may be unset).
UNAVAILABLE_CORPORA = {
    "results/corpora/ontonotes/": ("corpora.ontonotes.path", "licensed OntoNotes 5.0 (LDC2013T19), not downloadable"),
}


def unavailable_reason(config: dict, method: str) -> str | None:
    """Why `method`'s inputs cannot be had with this config (e.g. "needs corpora.ontonotes.path: licensed
    OntoNotes 5.0 ..."), or None when they can."""
    corpus = str((config["methods"][method] or {}).get("corpus") or "")
    for prefix, (key, why) in UNAVAILABLE_CORPORA.items():
        if corpus.startswith(prefix):
            value = config
            for part in key.split("."):
                value = (value or {}).get(part) if isinstance(value, dict) else None
            if not value:
                return f"needs {key}: {why}"
    return None


def _grid(config: dict, paper: str) -> list[tuple[str, str]]:
    entry = (config.get("papers") or {})[paper]
    return [(m, k) for m in entry["models"] for k in entry["methods"] if runs(config, m, k)]


def paper_pairs(config: dict, paper: str) -> list[tuple[str, str]]:
    """The paper's (model, method) pairs in grid order (models outer), without the ones a family cannot run
    and without the ones left out for inputs the user cannot have (`left_out_pairs`)."""
    return [(m, k) for m, k in _grid(config, paper) if unavailable_reason(config, k) is None]


def left_out_pairs(config: dict, paper: str) -> list[dict]:
    """{model, method, kind, reason} of each grid pair left out because its inputs cannot be had."""
    out = []
    for m, k in _grid(config, paper):
        reason = unavailable_reason(config, k)
        if reason is not None:
            out.append({"model": m, "method": k, "kind": config["methods"][k]["kind"], "reason": reason})
    return out


def left_out_summary(left_out: list[dict]) -> str:
    """One line per reason: "gpr-a, gpr-u for bert-base, bert-large (needs corpora.ontonotes.path: ...)"."""
    by_reason: dict[str, tuple[list, list]] = {}
    for item in left_out:
        methods, models = by_reason.setdefault(item["reason"], ([], []))
        if item["method"] not in methods:
            methods.append(item["method"])
        if item["model"] not in models:
            models.append(item["model"])
    return "; ".join(f"{', '.join(methods)} for {', '.join(models)} ({reason})"
                     for reason, (methods, models) in by_reason.items())


def pair_info(config: dict, model: str, method: str, with_settings: bool) -> dict:
    """What a table job needs of one pair: names, kind (a sweep instance's kind is its base kind), hub id,
    the method's `recipe` (whose code it reproduces; None for the papers' text) and (only when the table
    reads them) the resolved training settings."""
    model_entry, method_entry = config["models"][model], config["methods"][method]
    info = {"model": model, "method": method, "kind": method_entry["kind"], "hub_id": model_entry.get("hub_id"),
            "recipe": method_entry.get("recipe")}
    if with_settings:
        resolved = registry.resolve_method(model, model_entry, method, method_entry, config["models"])
        info["settings"] = pair_settings(model_entry, method_entry, resolved)
    return info
