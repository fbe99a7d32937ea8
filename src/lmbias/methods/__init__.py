"""Debiasing methods as config.yaml names them (`methods.<name>: {kind: ...}`): the kinds and the keys each
takes (`kinds`), the sweeps that multiply an entry into instances (`sweeps`), and how an entry resolves for a
model (`resolution`: kind, corpus, trainer settings, SentenceDebias/INLP/Self-Debias options, which benchmarks
it applies to). The package sits above the engine and the trainer, whose settings classes check an entry when
the DAG is built, and below the workflow and the paper tables that ask it.
"""
