"""The one rule for ER's er_lambda, shared by the method sweeps (lmbias.sweeps) and the training settings
(lmbias.training.settings). It sits below both so that neither imports the other for it: the engine imports
the registry, and nothing the engine imports may import lmbias.training."""

from __future__ import annotations

import numbers

ER_LAMBDA_RANGE = "> 0"


def er_lambda_ok(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0
