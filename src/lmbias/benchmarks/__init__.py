"""One module per benchmark: how its items are scored and which metrics read those scores.

Each module defines ``BENCHMARKS`` (a list of `lmbias.registry.BenchmarkDef`: one dataset's scorer, its
metric rows and, where it has one, its paired pre/post test) and, where its jobs read resource files,
``RESOURCE_FILES``. `lmbias.registry` discovers every module of this package, so adding a benchmark means
adding a module here, an entry under `benchmarks:` in config.yaml, and a parser.
"""
