"""The workflow's side of the library.

`lmbias.workflow.jobs` (re-exported here): helpers of the jobs and the Snakefile (job logging, device, library
fingerprints, the failed jobs' errors). The workflow's decisions, plain functions of the config that
rules/*.smk call through thin wildcard adapters (imported on their own, so a job's script does not load them):

- `validation`: cross-checks of the config a schema cannot express;
- `constraints`: the wildcard constraints, and the patterns of the paths the reject_* rules refuse;
- `selection`: which seeds, methods and benchmarks apply (the benchmarks a summary holds, and those it leaves out);
- `methods`: a (model, method) pair resolved, and the family and corpus checks;
- `corpora`: the corpus files the config builds and what their jobs read;
- `targets`: what a target expands to;
- `inputs`: which inputs a job reads; `params`: the config slice it gets;
- `refusals`: the errors naming what in a requested path is not configured.
"""

from lmbias.workflow.jobs import (
    failed_jobs_report,
    log_errors,
    pick_device,
    setup_job_logging,
    torch,
    write_source_fingerprint,
)

__all__ = ["failed_jobs_report", "log_errors", "pick_device", "setup_job_logging", "torch", "write_source_fingerprint"]
