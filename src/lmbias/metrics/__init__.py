"""Bias metrics computed from cached per-item scores (cheap; no forward passes here)."""


def clm_context_label(scores, key: str) -> str:
    """ ",context=<name>" for causal-LM scores conditioned otherwise than the default (`bos`), as their
    `clm_context` column records (`scoring.clm_context`, lmbias.engine.scoring.CLM_CONTEXTS); "" for bos and for
    scores written before the option. Scores that mix contexts are refused, naming `key`."""
    from lmbias.errors import ConfigError

    if "clm_context" not in scores.column_names:
        return ""
    found = set(scores.column("clm_context").to_pylist()) - {None}
    if len(found) > 1:
        raise ConfigError(f"{key}: the scores mix causal contexts {sorted(found)}; rescore with one")
    context = found.pop() if found else "bos"
    return "" if context == "bos" else f",context={context}"
