"""Cross-checks of the config that the schema cannot express: names that must refer to configured entries,
reserved names, tiny-model paths. Each failure is a ConfigError whose message starts with the offending key
(the Snakefile names the file that set it, lmbias.config.name_source)."""

from __future__ import annotations

from lmbias.benchmarks import catalog
from lmbias.config import check_papers
from lmbias.errors import ConfigError
from lmbias.jobs import comparisons as paired_comparison
from lmbias.methods import resolution
from lmbias.metrics.summary import AggregateSettings
from lmbias.parsers import is_generated as is_generated_dataset
from lmbias.workflow.scorers import check_scorers
from lmbias.workflow.stand_ins import check_stand_ins

#: Folder names under results/ that are not models: a model named so would share its folder.
RESERVED_MODEL_NAMES = {"data", "corpora", "tables", "plots", "papers", "report.html"}


def _configured(names) -> str:
    return ", ".join(sorted(names))


def check_config(config: dict) -> None:
    """ConfigError naming the first key that refers to something the config does not define (or is reserved)."""
    models, methods, benchmarks = config["models"], config["methods"], config["benchmarks"]
    for name in models:
        if name in RESERVED_MODEL_NAMES:
            raise ConfigError(f"models.{name}: this name is reserved for a results/ folder; choose another")
    for name, entry in models.items():
        for built, what in (("tiny", "a tiny model is built"), ("gguf", "a GGUF file is dequantized")):
            if built in entry and entry.get("path") != f"resources/models/{name}":
                raise ConfigError(f"models.{name}.path: {what} into resources/models/{name}; set path to that")
    for i, name in enumerate(config["targets"]["models"]):
        if name not in models:
            raise ConfigError(f"targets.models[{i}]: unknown model {name!r}; configured: {_configured(models)}")
    for i, name in enumerate(config["targets"]["methods"]):
        if name not in methods:
            raise ConfigError(f"targets.methods[{i}]: unknown method {name!r}; configured: {_configured(methods)}")
    for model, names in (config["targets"].get("methods_of") or {}).items():
        if model not in config["targets"]["models"]:
            raise ConfigError(
                f"targets.methods_of.{model}: not one of targets.models ({_configured(config['targets']['models'])})"
            )
        for i, name in enumerate(names):
            if name not in methods:
                raise ConfigError(
                    f"targets.methods_of.{model}[{i}]: unknown method {name!r}; configured: {_configured(methods)}"
                )
    for name, bench in benchmarks.items():
        if bench["dataset"] not in config["data"] and not is_generated_dataset(bench["dataset"]):
            raise ConfigError(f"benchmarks.{name}.dataset: {bench['dataset']!r} is not a key of `data`")
        catalog.measure_of(bench, name)  # a misspelt `measure` fails here, naming the entry
    for key in ("only_benchmarks", "optional_benchmarks"):
        for i, name in enumerate(config.get(key) or []):
            if name not in benchmarks:
                raise ConfigError(f"{key}[{i}]: unknown benchmark {name!r}; configured: {_configured(benchmarks)}")
    for name, entry in config.get("comparisons", {}).items():
        paired_comparison.check_comparison(name, entry, config)
    for name, entry in methods.items():
        resolution.check_method_entry(name, entry)
        for i, bench in enumerate(entry.get("benchmarks") or []):
            if bench not in benchmarks:
                raise ConfigError(
                    f"methods.{name}.benchmarks[{i}]: unknown benchmark {bench!r}; configured: "
                    f"{_configured(benchmarks)}"
                )
    for name, entry in models.items():
        resolution.check_training_block(
            entry.get("training") or {}, f"models.{name}.training", resolution.MODEL_METHOD_DEFAULTS
        )
    AggregateSettings.from_config(config.get("aggregate"))
    check_papers(config)
    check_stand_ins(config)
    check_scorers(config)
    comparisons = config.get("comparisons", {})
    for i, name in enumerate(config["targets"].get("comparisons", [])):
        if name not in comparisons:
            raise ConfigError(
                f"targets.comparisons[{i}]: unknown comparison {name!r}; configured: "
                f"{_configured(comparisons) or 'none'}"
            )
