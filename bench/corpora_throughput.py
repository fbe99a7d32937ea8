"""Throughput of the GAP corpus path: split all 4,454 GAP contexts into sentences, then CDS them.

The same library calls the workflow's jobs make (lmbias.corpora.sentences.gap_sentences, then
lmbias.corpora.augment.cds_corpus with a lmbias.corpora.counterfactual.Swapper), on 2 cores. Target: under 60 s.

    .venv/bin/python bench/corpora_throughput.py [--data ../shared/data] [--splitter parser]
        [--intervention grammatical] [--no-names] [--swap-rate 1.0] [--cores 2]

Prints contexts/s, sentences/s and the total seconds (pipeline loading included and excluded), and
the 1-minute load average at the end: on a shared machine, a load above the core count means the
figures are slower than the code.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pin_cores(cores: int) -> str:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(cores))
    if hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, available[:cores])
        return ",".join(map(str, sorted(os.sched_getaffinity(0))))
    return "n/a"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("LMBIAS_TEST_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--spacy-model", default="en_core_web_sm")
    parser.add_argument("--splitter", default="parser", choices=["parser", "senter", "sentencizer"])
    parser.add_argument("--intervention", default="grammatical", choices=["grammatical", "naive"])
    parser.add_argument("--no-names", dest="names", action="store_false", help="do not swap first names")
    parser.add_argument("--swap-rate", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)

    cpus = _pin_cores(args.cores)
    sys.path.insert(0, str(REPO / "src"))
    from lmbias.corpora import jobs as corpora
    from lmbias.corpora.augment import cds_corpus, protect_from_table
    from lmbias.corpora.sentences import gap_sentences, load_splitter
    from lmbias.parsers.gap import parse_gap

    data = Path(args.data)
    t0 = time.perf_counter()
    gap = parse_gap({s: data / "gap" / f"gap-{s}.tsv" for s in ("development", "validation", "test")})
    nlp_split = load_splitter(args.spacy_model, args.splitter)
    lexicon = {k: v.replace("resources/data", str(data)) for k, v in corpora.lexicon_inputs(args.names).items()}
    swapper = corpora.make_swapper(lexicon, args.intervention, args.names, args.spacy_model)
    swapper.nlp  # noqa: B018  (loads the pipeline now, outside the timed work)
    t_loaded, c_loaded = time.perf_counter(), time.process_time()

    sentences, counts = gap_sentences(gap, nlp_split, batch_size=128)
    t_split, c_split = time.perf_counter(), time.process_time()
    table = sentences.select(["doc_id", "sentence_id", "split", "text"])
    # as the job does: grammatical interventions keep the pronouns GAP links to a name (Lu et al.'s rule)
    protect = protect_from_table(sentences) if args.intervention == "grammatical" else None
    out = cds_corpus(table, swapper, args.swap_rate, args.seed, batch_size=args.batch_size, protect=protect)
    t_cds, c_cds = time.perf_counter(), time.process_time()

    n_ctx, n_sent = gap.num_rows, sentences.num_rows
    split_s, cds_s, work_s, total_s = t_split - t_loaded, t_cds - t_split, t_cds - t_loaded, t_cds - t0
    changed = sum(out.column("changed").to_pylist())
    print(
        f"GAP split + CDS on {args.cores} cores (cpus {cpus}); splitter={args.splitter}, "
        f"intervention={args.intervention}{'+names' if args.names else ''}, swap_rate={args.swap_rate:g}"
    )
    print(
        f"  contexts: {n_ctx}   sentences: {n_sent} ({counts['sentences_split']} split, "
        f"{counts['duplicates_removed']} exact duplicates removed)   changed by CDS: {changed}"
    )
    print(f"  loading (GAP parse + spaCy pipelines + lexicon): {t_loaded - t0:6.1f} s")
    print(
        f"  split: {split_s:6.1f} s   ({n_ctx / split_s:7.1f} contexts/s, {n_sent / split_s:7.1f} sentences/s)"
        f"   CPU {c_split - c_loaded:.1f} s"
    )
    print(f"  CDS:   {cds_s:6.1f} s   ({n_sent / cds_s:7.1f} sentences/s)   CPU {c_cds - c_split:.1f} s")
    print(f"  split + CDS: {work_s:6.1f} s   ({n_ctx / work_s:.1f} contexts/s, {n_sent / work_s:.1f} sentences/s)")
    print(f"  total seconds, loading included: {total_s:.1f} s (target < 60 s: {'met' if total_s < 60 else 'NOT met'})")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"  CPU time of this process (user + sys): {usage.ru_utime + usage.ru_stime:.1f} s "
        f"(split + CDS: {c_cds - c_loaded:.1f} s)"
    )
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
        note = (
            "above the core count: other processes slowed the wall-clock figures"
            if load > os.cpu_count()
            else "the machine was not oversubscribed"
        )
        print(f"  1-minute load average at the end: {load:.1f} on {os.cpu_count()} cpus ({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
