"""Score files of every likelihood benchmark on tiny models, in minutes: a refactor's before/after check without a
main-job run (bench/compare_scores.py compares the two folders).

    python bench/tiny_scores.py OUT [--checkout PATH] [--data-dir ../shared/data] [--items 16]
    python bench/compare_scores.py OUT_BEFORE OUT_AFTER --glob '*.parquet'

Every benchmark entry of the checkout's config.yaml that reads likelihoods and whose data is under --data-dir is
scored on its first --items rows, with the entry's scoring block, by tiny GPT-2, BERT and BART built here (seed 0),
plain and (GPT-2, BERT) behind Self-Debias with its default prefix: one file per (benchmark, model, plain |
self_debias), `<benchmark>-<model>-<way>.parquet`. A benchmark that fails writes `.error` with the message, so a
refactor that breaks one shows up as a file present on one side only. `--checkout` imports lmbias from another
checkout's src/ (a `git worktree` of the commit before), so one environment scores both sides.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MODELS = (("gpt2", "clm"), ("bert", "mlm"), ("bart", "seq2seq"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--items", type=int, default=16)
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    sys.path.insert(0, str(checkout / "src"))

    import pyarrow.parquet as pq
    import torch

    from lmbias.benchmarks import catalog
    from lmbias.engine.lm import LanguageModel
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model
    from lmbias.engine.self_debias import wrap
    from lmbias.engine.tiny import build_tiny_model
    from lmbias.io import load_yaml
    from lmbias.parsers import parse_benchmark, required_files
    from lmbias.workflow.params import benchmark_scoring_slice

    print(f"lmbias from {Path(catalog.__file__).parents[2]}", flush=True)
    config = load_yaml((checkout / "config.yaml").read_text(encoding="utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)
    models = {}
    for arch, family in MODELS:
        folder = build_tiny_model(arch, args.out / "models" / arch, seed=0)
        model, tokenizer = load_model(model_spec(arch, {"path": str(folder), "family": family}))
        models[arch] = (family, model, tokenizer)
    written = 0
    for name, entry in config["benchmarks"].items():
        if not catalog.is_measurable(entry):
            continue
        definition = catalog.definition_of(entry, name)
        if definition.reads != "likelihoods":
            continue
        try:
            files = {f: args.data_dir / entry["dataset"] / f for f in required_files(entry, config["data"], name)}
            items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, name)
        except Exception as err:  # noqa: BLE001 (data not here: the benchmark is left out, said so)
            print(f"{name}: left out ({type(err).__name__}: {str(err)[:120]})", flush=True)
            continue
        items = items.slice(0, args.items)
        scoring = benchmark_scoring_slice(config, name).get("scoring", {})
        for arch, (family, model, tokenizer) in models.items():
            if family not in definition.families:
                continue
            ways = {"plain": model}
            if family != "seq2seq":
                ways["self_debias"] = wrap(model, tokenizer, family, {})
            for way, scorer in ways.items():
                torch.manual_seed(0)
                stem = args.out / f"{name}-{arch}-{way}"
                try:
                    table = definition.score(items, LanguageModel(scorer, tokenizer, family, model_name=arch), scoring)
                except Exception as err:  # noqa: BLE001 (recorded: a refactor that breaks it shows as .error)
                    stem.with_suffix(".error").write_text(f"{type(err).__name__}: {err}\n", encoding="utf-8")
                    continue
                pq.write_table(table, stem.with_suffix(".parquet"))
                written += 1
    print(f"{written} score files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
