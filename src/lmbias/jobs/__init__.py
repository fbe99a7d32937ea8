"""The jobs that act on benchmark definitions, what the Snakemake scripts call: scoring a model on one or more
benchmarks (`scoring`, `model_scoring`, `sharded` for data-parallel processes), computing metric rows and
summaries from cached scores (`metrics`) and paired pre/post comparisons (`comparisons`). The package sits right
above lmbias.benchmarks; the engine and the metrics below it never look a benchmark up.
"""
