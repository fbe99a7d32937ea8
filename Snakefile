# lmbias: measure and mitigate gender bias in pretrained language models.
# Targets: results/{model}/{method}/summary.parquet (see docs/targets.md). Config: config.yaml, checked
# against schemas/config.schema.yaml before any job runs.

import sys
import time
from pathlib import Path

from snakemake.utils import min_version, validate

sys.path.insert(0, f"{workflow.basedir}/src")  # the library of this checkout, also inside conda envs
from lmbias.config import config_sources, name_source, validate_config
from lmbias.errors import ConfigError
from lmbias.methods.sweeps import expand_method_targets, expand_sweeps

min_version("9.0")


# `snakemake --report results/report.html <targets>`: the papers' tables and figures with captions (report/).
report: "report/workflow.rst"


configfile: "config.yaml"


# Our validator first: its message names the offending key (models.tiny-bert.famly: unknown key) and the
# file that set it (config.yaml, a --configfile overlay or --config).
CONFIG_SOURCES = config_sources("config.yaml", workflow.config_settings.configfiles, workflow.config_settings.config)
validate_config(config, workflow.source_path("schemas/config.schema.yaml"), sources=CONFIG_SOURCES)
validate(config, "schemas/config.schema.yaml")

# Sweeps (methods.<name>.sweep) become plain methods named <name>@<setting>=<value>, and targets.methods'
# <name>@* (and papers.<paper>.methods') their instances, here and only here: every rule, wildcard and message below sees the instances.
try:
    config["targets"]["methods"] = expand_method_targets(config["targets"]["methods"], config["methods"])
    for _model, _methods in (config["targets"].get("methods_of") or {}).items():
        config["targets"]["methods_of"][_model] = expand_method_targets(
            _methods, config["methods"], f"targets.methods_of.{_model}"
        )
    for _paper, _entry in (config.get("papers") or {}).items():
        if isinstance(_entry, dict) and isinstance(_entry.get("methods"), list):
            _entry["methods"] = expand_method_targets(_entry["methods"], config["methods"], f"papers.{_paper}.methods")
    config["methods"] = expand_sweeps(config["methods"])
except ConfigError as error:
    raise name_source(error, CONFIG_SOURCES) from None


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/corpora.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/aggregate.smk"
include: "rules/papers.smk"


rule all:
    default_target: True
    input:
        all_targets(),


_RUN_STARTED = time.time()


onsuccess:
    # The main job's readable result: print the headline table when this run wrote it.
    _page = Path("results/summary.md")
    if _page.is_file() and _page.stat().st_mtime >= _RUN_STARTED:
        print(f"\n{_page.read_text(encoding='utf-8')}")
        print(
            f"The results page (a figure per headline, then this table): {Path('results/summary.html').resolve()}; every row: "
            "results/<model>/<method>/summary.parquet; paper tables and figures: snakemake --report results/report.html <targets>"
        )


onerror:
    # Each failed job's named error (ConfigError, DataError, ...) on the console, from its log, whatever the
    # profile and executor: with no profile (show-failed-logs off) Snakemake only says "check log file(s)".
    # scheduler.failed: the jobs that failed for good (after their retries); a group job stands for its members.
    from lmbias.job_runtime import failed_jobs_report

    _failed = getattr(getattr(workflow, "scheduler", None), "failed", None) or ()
    _report = failed_jobs_report(
        (member.rule.name, [str(f) for f in member.log])
        for job in _failed
        for member in getattr(job, "jobs", [job])
    )
    if _report:
        print(_report, file=sys.stderr)
