"""A (model, method) pair as its jobs run it: lmbias.methods.resolution resolves the method for the model (kind, corpus,
trainer settings, SentenceDebias and INLP options), refusing a method the model's family cannot run; here the
method's corpus is also checked to be one this config builds."""

from __future__ import annotations

from lmbias.methods import resolution
from lmbias.workflow import corpora

#: {id(config): (config, corpus paths already checked)}: a DAG build resolves each pair many times and the
#: corpus check lists every corpus file; the config is held, so its id is not reused while cached.
_CHECKED_CORPORA: dict[int, tuple[dict, set[str]]] = {}


def _checked_corpora(config: dict) -> set[str]:
    held = _CHECKED_CORPORA.get(id(config))
    if held is None or held[0] is not config:
        held = _CHECKED_CORPORA[id(config)] = (config, set())
    return held[1]


def check_model_method(config: dict, model: str, method: str) -> None:
    """ConfigError naming both when the model's family cannot run the method."""
    resolution.check_method_family(model, config["models"][model]["family"], method, config["methods"][method])


def resolved_method(config: dict, model: str, method: str) -> dict:
    """Kind, corpus, trainer settings (or SD options) of `method` for `model`; ConfigError naming both when
    the model's family cannot run it, or naming methods.<method>.corpus when it is no corpus this config builds."""
    resolved = resolution.resolve_method(
        model, config["models"][model], method, config["methods"][method], config["models"]
    )
    if "corpus" in resolved:
        checked = _checked_corpora(config)
        if resolved["corpus"] not in checked:
            corpora.check_method_corpus(config, method, resolved["corpus"])
            checked.add(resolved["corpus"])
    return resolved


def method_kind(config: dict, method: str) -> str:
    return config["methods"][method]["kind"]


def has_model_folder(config: dict, method: str) -> bool:
    """Whether the method leaves a model folder (fine-tuned or fitted) that scoring loads."""
    return method_kind(config, method) in resolution.TRAINED_METHOD_KINDS | resolution.FITTED_METHOD_KINDS
