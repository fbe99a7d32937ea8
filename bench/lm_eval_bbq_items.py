"""lm-evaluation-harness's BBQ biased answers against lmbias's `target_loc`, for every item built from the templates.

    bench/.venv-lm-eval/bin/python bench/lm_eval_bbq_items.py [--items ITEMS.parquet] [--data-dir ../shared/data/bbq]
        [--seed 0] [--generator]

Runs in bench/.venv-lm-eval (lm-eval 0.4.13, bench/lm_eval_crows_pairs.py installs it), where lmbias is not
installed. Without --items it first builds the items with the main venv (.venv/bin/python: lmbias.parsers.bbq
parse_bbq, --seed) into a temp parquet; its `biased_locs` column holds every answer lmbias's rule calls biased
(lmbias.parsers.bbq.biased_answers), of which `target_loc` is the single one or -1.

lm-eval's side: its bbq task's `process_docs` (lm_eval/tasks/bbq/utils.py, imported from the installed package) on
the same items in the released file's form; its `biased_answers` (answer strings) become answer indices. Reported:
the items where the two sets of biased answers differ, the items where `target_loc` is not lm-eval's single
biased answer (-1 where lm-eval has none or two), and how many items have 0, 1 or 2 biased answers.

--generator: also runs the authors' generator (generate_from_template_all_categories.py and utils.py of --data-dir,
copied into a temp folder with its category list cut to Gender_identity and `random.seed(--seed)` put after its
imports; it needs pandas, which this venv has) and compares its items with ours: the items that differ as JSON
lines, by field, and the items where lm-eval's biased answers differ between its answer_info and ours (the
documented differences of lmbias.parsers.bbq: Q_id 7's substring labels, the flipped Q_id 35/36 pairs).

Exit status 1 when a biased-answer set or a target_loc differs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import datasets
import lm_eval
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
BUILD = """
import sys
import pyarrow.parquet as pq
from lmbias.parsers.bbq import FILES, parse_bbq
folder, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pq.write_table(parse_bbq(*(f"{folder}/{f}" for f in FILES), seed=seed), out)
"""
#: lmbias.parsers.bbq.RELEASED_FIELDS, written out: this script runs where lmbias is not installed.
RELEASED = (
    "example_id",
    "question_index",
    "question_polarity",
    "context_condition",
    "category",
    "answer_info",
    "additional_metadata",
    "context",
    "question",
    "ans0",
    "ans1",
    "ans2",
    "label",
)


def lm_eval_utils():
    """lm-eval's bbq utils module, loaded from the installed package's file (the task folder is no package)."""
    path = Path(lm_eval.__file__).parent / "tasks" / "bbq" / "utils.py"
    spec = importlib.util.spec_from_file_location("lm_eval_bbq_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lm_eval_biased(docs: list[dict]) -> dict[int, list[int]]:
    """{example_id: indices of lm-eval's biased answers} of released-format docs."""
    datasets.disable_progress_bars()
    processed = lm_eval_utils().process_docs(datasets.Dataset.from_list(docs))
    return {d["example_id"]: [k for k in range(3) if d[f"ans{k}"] in d["biased_answers"]] for d in processed.to_list()}


def released(row: dict) -> dict:
    doc = {k: row[k] for k in RELEASED}
    doc["question_index"] = str(doc["question_index"])
    return doc


def build_items(data_dir: Path, seed: int, where: Path) -> Path:
    out = where / "bbq_items.parquet"
    subprocess.run([str(MAIN_PYTHON), "-c", BUILD, str(data_dir), str(seed), str(out)], check=True, cwd=ROOT)
    return out


def run_generator(data_dir: Path, seed: int, where: Path) -> list[dict]:
    """The authors' generator on Gender_identity alone, seeded: its jsonl as records."""
    (where / "BBQ_Full").mkdir(parents=True)
    (where / "BBQ_Full" / "__init__.py").write_text("")
    (where / "BBQ_Full" / "utils.py").write_bytes((data_dir / "utils.py").read_bytes())
    templates = where / "BBQ_full" / "templates"
    templates.mkdir(parents=True)
    (where / "BBQ_full" / "data").mkdir()
    for name in ("new_templates - Gender_identity.csv", "vocabulary.csv", "vocabulary_proper_names.csv"):
        (templates / name).write_bytes((data_dir / name).read_bytes())
    source = (data_dir / "generate_from_template_all_categories.py").read_text()
    source, cats = re.subn(r"(?m)^cats = \[", 'cats = ["Gender_identity"]\n_all_cats = [', source)
    source, seeded = re.subn(r"(?m)^import ast$", f"import ast\nrandom.seed({seed})", source)
    assert cats == 1 and seeded == 1, "the generator's source changed: patch points not found"
    (where / "generate.py").write_text(source)
    subprocess.run([sys.executable, "generate.py"], check=True, cwd=where, stdout=subprocess.DEVNULL)
    lines = (where / "BBQ_full" / "data" / "Gender_identity.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=Path, help="a parquet with the parser's columns and `biased` (default: build)")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "bbq")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", action="store_true", help="also compare with the authors' generator")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = pq.read_table(args.items or build_items(args.data_dir, args.seed, tmp)).to_pylist()
        theirs = lm_eval_biased([released(r) for r in rows])
        set_differs = [r["example_id"] for r in rows if sorted(r["biased_locs"]) != theirs[r["example_id"]]]
        single = {i: (b[0] if len(b) == 1 else -1) for i, b in theirs.items()}
        target_differs = [r["example_id"] for r in rows if r["target_loc"] != single[r["example_id"]]]
        print(f"lm-eval {lm_eval.__version__}: {len(rows)} items (seed {args.seed})")
        print(f"  lm-eval's biased answers per item: {dict(sorted(Counter(map(len, theirs.values())).items()))}")
        print(f"  items whose biased-answer sets differ: {len(set_differs)} {set_differs[:10]}")
        print(f"  items whose target_loc is not lm-eval's single biased answer: {len(target_differs)}")
        if args.generator:
            generated = run_generator(args.data_dir, args.seed, tmp / "generator")
            ours = {r["example_id"]: json.dumps(released(r)) for r in rows}
            by_field = Counter(
                k for g in generated for k, v in json.loads(ours[g["example_id"]]).items() if g.get(k) != v
            )
            same = sum(json.dumps(g) == ours.get(g["example_id"]) for g in generated)
            theirs_generated = lm_eval_biased(generated)
            biased_differs = Counter(
                (g["question_index"], g["question_polarity"])
                for g in generated
                if theirs_generated[g["example_id"]] != theirs[g["example_id"]]
            )
            print(f"  the authors' generator, seed {args.seed}: {len(generated)} items, {same} identical JSON lines")
            print(f"    fields that differ (items): {dict(by_field)}")
            print(
                f"    items whose lm-eval biased answers differ (Q_id, polarity): {sum(biased_differs.values())} "
                f"{dict(sorted(biased_differs.items()))}"
            )
    return 1 if set_differs or target_differs else 0


if __name__ == "__main__":
    sys.exit(main())
