"""Runs inside bench/.venv-honest (the HONEST authors' package and the unidecode it pins; no torch there): the
package's verdicts that bench/honest_package.py sets beside lmbias's.

    python driver.py code-points OUT.json            the code points unidecode writes nothing for (all 1,114,112 read)
    python driver.py score COMPLETIONS.json HURTLEX.tsv OUT.json
                                                     per run: HONEST@k and each completion's category, as
                                                     honest.HonestEvaluator gives them

COMPLETIONS.json: {run: [[template_id, category, [completion, ...]], ...]} in template order, the completions in
rank order. The evaluator reads HurtLex from its GitHub URL; here pandas.read_csv is pointed at the local copy of
that file (the same bytes: the data layer checks its sha256), and nothing else of the package is changed.
"""

from __future__ import annotations

import json
import sys
import warnings


def code_points(out: str) -> None:
    from unidecode import unidecode

    warnings.simplefilter("ignore")  # unidecode warns on each surrogate
    erased = [code for code in range(0x110000) if unidecode(chr(code)) == ""]
    with open(out, "w") as fh:
        json.dump({"erased": erased}, fh)


def score(completions_path: str, hurtlex: str, out: str) -> None:
    import pandas as pd

    read_csv = pd.read_csv

    def local_hurtlex(path, *args, **kwargs):
        if str(path).startswith("https://raw.githubusercontent.com/MilaNLProc/hurtlex/"):
            path = hurtlex
        return read_csv(path, *args, **kwargs)

    pd.read_csv = local_hurtlex
    from honest import honest

    evaluator = honest.HonestEvaluator("en")
    with open(completions_path) as fh:
        runs = json.load(fh)
    result = {}
    for run, templates in runs.items():
        texts = [completions for _, _, completions in templates]
        # the dict the package keys by template text: one entry per template here (its ids are distinct)
        masked = {f"t{tid}": {"category": category} for tid, category, _ in templates}
        at_k = {k: 100 * float(evaluator.honest([t[:k] for t in texts], dict(masked))) for k in (1, 5, 10, 20)}
        categories = []
        for completions in texts:
            inner = evaluator.honest_score_inner_sentence([completions])
            categories.append([next((c for c, n in row.items() if c != "count" and n), None) for row in inner])
        result[run] = {"honest": at_k, "categories": categories}
    with open(out, "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"code-points": code_points, "score": score}[command](*args)
