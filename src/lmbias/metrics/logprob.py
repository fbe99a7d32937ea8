"""logprob-score effect size and permutation p (over-debiasing paper, appendix A), from cached scores.

For each row asso = log p_t(TM) - log p_t(TAM) (see `lmbias.benchmarks.logprob`). With T1 the male and T2
the female targets and A1/A2 the male-/female-dominated professions,

    s(t) = mean_{a in A1} asso(t, a) - mean_{b in A2} asso(t, b)     (means over professions and templates)
    effect size = (mean_{T1} s - mean_{T2} s) / std_{T1 u T2} s

and p is the one-sided permutation test over partitions of the targets (`lmbias.metrics.weat`). A positive effect
size means male targets are more associated with male-dominated professions (the paper's Table 7 sign).
The unit of the test is the target phrase ("my mom"), as in the authors' code, which groups by person.

Subsets: ``all`` (every target and profession), ``dev`` and ``test`` (targets and professions of that split
only; see `lmbias.parsers.logprob`). Rows per subset: ``effect_size`` (with p_value), ``association_difference``
(the effect size's numerator, mean_T1 s - mean_T2 s) and ``mean_association`` per target gender x profession
group. Options: ``ddof`` (1, the sample std of the appendix; 0 as the authors' code), ``std_epsilon``
(0; added to the std, 1e-8 in the authors' code), ``alternative``
(greater | two-sided), ``n_samples`` and ``seed`` of the Monte Carlo test (used when there are more than
``exact_max`` partitions: 184,756 for all 20 targets; the test split's 12,870 are enumerated exactly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lmbias.errors import DataError
from lmbias.metrics.weat import EXACT_MAX, N_SAMPLES, check_std_epsilon, effect_size, permutation_test
from lmbias.options import check_block

SUBSETS = ("all", "dev", "test")


@dataclass(frozen=True)
class LogprobOptions:
    ddof: int = 1
    alternative: str = "greater"
    n_samples: int = N_SAMPLES
    exact_max: int = EXACT_MAX
    seed: int = 0
    std_epsilon: float = 0.0

    @classmethod
    def from_config(cls, metric_cfg: dict, key: str = "benchmarks.logprob.metric") -> LogprobOptions:
        check_block(metric_cfg, "benchmarks.logprob.metric", key)
        opts = cls(**(metric_cfg or {}))
        return replace(opts, std_epsilon=check_std_epsilon(opts.std_epsilon, f"{key}.std_epsilon"))

    def variant(self, attribute_masks: str) -> str:
        """std_epsilon appears only when non-zero, so labels without it never change."""
        eps = f",std_epsilon={self.std_epsilon:g}" if self.std_epsilon else ""
        return f"masks={attribute_masks},ddof={self.ddof}{eps},alternative={self.alternative}"


def target_associations(target, gender, group, asso) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """s(t) per target: (male targets' s, female targets' s, their names). Inputs are per-row arrays."""
    s_male, s_female, names_m, names_f = [], [], [], []
    for t in sorted(set(target.tolist())):
        sel = target == t
        genders = set(gender[sel].tolist())
        if len(genders) != 1:
            raise DataError(f"logprob scores: target {t!r} has rows of genders {sorted(genders)}")
        a1 = asso[sel & (group == "male")]
        a2 = asso[sel & (group == "female")]
        if len(a1) == 0 or len(a2) == 0:
            raise DataError(f"logprob scores: target {t!r} lacks male- or female-dominated professions")
        s = float(a1.mean() - a2.mean())
        if genders == {"male"}:
            s_male.append(s)
            names_m.append(t)
        else:
            s_female.append(s)
            names_f.append(t)
    return np.asarray(s_male), np.asarray(s_female), names_m, names_f


def logprob_metric_rows(scores: pa.Table, options: LogprobOptions) -> list[dict]:
    target = np.asarray(scores.column("target").to_pylist(), dtype=object)
    gender = np.asarray(scores.column("gender").to_pylist(), dtype=object)
    group = np.asarray(scores.column("attribute_group").to_pylist(), dtype=object)
    split = np.asarray(scores.column("split").to_pylist(), dtype=object)
    asso = np.asarray(scores.column("logp_tm").to_numpy(), dtype=np.float64) - np.asarray(
        scores.column("logp_tam").to_numpy(), dtype=np.float64
    )
    masks = sorted(set(scores.column("attribute_masks").to_pylist())) or ["word"]
    variant = options.variant("+".join(masks))
    rows: list[dict] = []

    def row(metric, subset, value, n, p=math.nan):
        rows.append(
            {
                "benchmark": "logprob",
                "metric": metric,
                "variant": variant,
                "subset": subset,
                "value": float(value),
                "ci_low": math.nan,
                "ci_high": math.nan,
                "p_value": float(p),
                "n": int(n),
            }
        )

    for subset in SUBSETS:
        sel = np.ones(len(target), dtype=bool) if subset == "all" else split == subset
        if not sel.any():
            continue
        s_m, s_f, _, _ = target_associations(target[sel], gender[sel], group[sel], asso[sel])
        if len(s_m) == 0 or len(s_f) == 0:
            raise DataError(f"logprob scores, subset {subset}: needs male and female targets")
        n = int(sel.sum())
        es = effect_size(s_m, s_f, ddof=options.ddof, std_epsilon=options.std_epsilon)
        p = permutation_test(
            s_m,
            s_f,
            exact_max=options.exact_max,
            n_samples=options.n_samples,
            seed=options.seed,
            alternative=options.alternative,
        ).p_value
        row("effect_size", subset, es, n, p)
        row("association_difference", subset, s_m.mean() - s_f.mean(), n)
        for tg in ("male", "female"):
            for ag in ("male", "female"):
                cell = sel & (gender == tg) & (group == ag)
                row(
                    "mean_association",
                    f"{subset}/target={tg}/profession={ag}",
                    asso[cell].mean() if cell.any() else math.nan,
                    int(cell.sum()),
                )
    return rows
