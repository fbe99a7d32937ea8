"""Bias during training (Lu et al. 2018, section 5.3): one cheap metric evaluated every N steps.

occupations_aob: the occupation benchmark's AOB (mean |log p(o | male prefix) - log p(o | female prefix)|
over occupations, lmbias.benchmarks.occupations + lmbias.metrics.occupations) on its 236 built-in items.
"""

from __future__ import annotations

import torch

from lmbias.errors import ConfigError


def make_probe(metric: str, family: str, key: str = "settings.eval_bias_metric"):
    """A function (model, tokenizer) -> float for `metric`."""
    if metric == "occupations_aob":
        from lmbias.benchmarks.occupations import score_occupations
        from lmbias.engine.lm import LanguageModel
        from lmbias.metrics.occupations import aggregate_occupation_bias, occupation_bias
        from lmbias.parsers.occupations import generate_occupation_items

        items = generate_occupation_items()

        def probe(model, tokenizer) -> float:
            was_training = model.training
            model.eval()
            with torch.no_grad():
                scores = score_occupations(items, LanguageModel(model, tokenizer, family), {"batch_size": 64})
            model.train(was_training)
            return aggregate_occupation_bias(b for b, _ in occupation_bias(scores).values())[0]

        return probe
    raise ConfigError(f"{key}: unknown bias metric {metric!r} (available: occupations_aob)")
