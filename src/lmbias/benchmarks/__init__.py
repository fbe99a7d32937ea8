"""One module per benchmark: how its items are scored and which metrics read those scores.

Each module defines ``BENCHMARKS``, a list of `lmbias.benchmarks.definition.BenchmarkDef` holding every fact
about its benchmark (scorer, metric rows, paired test, families, what it reads from a model, whether its rows
shard, its headlines, the library modules its results depend on). `lmbias.benchmarks.catalog` discovers them,
so adding a benchmark means adding a module here (and a parser in lmbias.parsers where its data is new) and an
entry under `benchmarks:` in config.yaml: docs/development/add-a-benchmark.md.
"""
