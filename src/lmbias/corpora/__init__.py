"""Corpus stage (rules/corpora.smk): sentence splitting, name anonymisation, counterfactual swaps, GPR examples."""
