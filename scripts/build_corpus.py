"""Rules of rules/corpora.smk: GAP sentences, counterfactual variants, OntoNotes anonymisation, GPR task,
Bartl et al.'s flipped GAP in sentences.

Dispatches on the rule name; every value comes from snakemake.input/output/params/wildcards.
"""

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

from lmbias.corpora import jobs as corpora  # noqa: E402

sm = snakemake  # noqa: F821
rule = sm.rule
start = time.perf_counter()
if rule == "corpus_gap_sentences":
    counts = corpora.build_gap_sentences(sm.input.contexts, sm.output[0], sm.params.options, sm.params.spacy_model)
elif rule == "corpus_intervention":
    entry = corpora.check_intervention(sm.params.entry, sm.params.key)
    lexicon = {k: getattr(sm.input, k) for k in corpora.lexicon_inputs(entry["names"], entry["wordlist"])}
    counts = corpora.build_counterfactual(
        sm.input.sentences, sm.output[0], lexicon, sm.params.entry, sm.params.spacy_model, key=sm.params.key
    )
elif rule == "corpus_ontonotes":
    counts = corpora.build_ontonotes_sentences(
        list(sm.input.conll), sm.output[0], sm.params.options, sm.params.spacy_model
    )
elif rule == "corpus_gpr":
    # params.options: the file's resolved options (a variant's keys already over the base ones)
    lexicon = {
        k: getattr(sm.input, k)
        for k in corpora.lexicon_inputs(False, corpora.gpr_options(sm.params.options)["wordlist"])
    }
    counts = corpora.build_gpr(
        sm.input.sentences, sm.output.u, sm.output.a, lexicon, sm.params.options, sm.params.spacy_model
    )
elif rule == "corpus_bartl2020":
    counts = corpora.build_bartl_corpus(sm.input.tsv, sm.output[0], sm.params.options, sm.params.spacy_model)
else:
    raise ValueError(f"build_corpus.py does not know rule {rule!r}")
logging.info("%s -> %s: %s (%.1f s)", rule, ", ".join(map(str, sm.output)), counts, time.perf_counter() - start)
