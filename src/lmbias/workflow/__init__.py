"""The workflow's side of the library.

The workflow's decisions, plain functions of the config that rules/*.smk call through thin wildcard adapters
(each module imported on its own; a job's script loads none of them: what the jobs themselves share, job logging,
the device, library fingerprints and the failed jobs' errors, is `lmbias.job_runtime`, low in the layers):

- `validation`: cross-checks of the config a schema cannot express;
- `constraints`: the wildcard constraints, and the patterns of the paths the reject_* rules refuse;
- `selection`: which seeds, methods and benchmarks apply (the benchmarks a summary holds, and those it leaves out);
- `methods`: a (model, method) pair resolved, and the family and corpus checks;
- `corpora`: the corpus files the config builds and what their jobs read;
- `targets`: what a target expands to;
- `inputs`: which inputs a job reads; `params`: the config slice it gets;
- `refusals`: the errors naming what in a requested path is not configured;
- `adapters`: each of these decisions as an input or params function of a job's wildcards (rules/common.smk).
"""
