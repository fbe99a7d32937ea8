"""The config slice each job gets as `params:`: only what it reads, so an edit reruns only the jobs that read
the edited slice (editing a metric option recomputes metrics but rescores nothing, and so on)."""

from __future__ import annotations

from lmbias.config import hub_model_folder
from lmbias.engine.batching import DEFAULT_MAX_TOKENS
from lmbias.metrics.summary import AggregateSettings
from lmbias.papers import grid as readings_grid
from lmbias.workflow.methods import check_model_method, resolved_method
from lmbias.workflow.selection import BenchmarkSelection, seeds_for

#: Model-entry keys no number depends on (the padded tokens of a forward pass): kept out of every params slice,
#: so editing them reruns nothing. Scoring and fitting jobs get max_tokens as a resource (scoring_max_tokens).
RUN_ONLY_MODEL_KEYS = ("max_tokens",)


def with_snapshot(config: dict, name: str, entry: dict) -> dict:
    """What a job reads of a model entry: a hub entry gains `snapshot`, the folder its job loads offline
    (lmbias.engine.models); RUN_ONLY_MODEL_KEYS are left out."""
    entry = {k: v for k, v in entry.items() if k not in RUN_ONLY_MODEL_KEYS}
    return {**entry, "snapshot": hub_model_folder(config, name)} if "hub_id" in entry else entry


def scoring_max_tokens(config: dict, model: str) -> int:
    """models.<model>.max_tokens, the padded tokens a forward pass of a scoring or fitting job may hold
    (lmbias.engine.batching.scoring_budget). A resource, not a param: scores are the same whatever the budget
    (to float rounding, docs/llms.md, "Scoring by token budget"), so editing it reruns nothing; a profile's
    set-resources may override it per rule."""
    return config["models"][model].get("max_tokens", DEFAULT_MAX_TOKENS)


#: Model entry keys that choose what the workflow runs, not how the weights are read: no job's params hold them
#: (editing `stand_ins` changes which benchmark entries are scored, which their own jobs' params say).
WORKFLOW_MODEL_KEYS = ("stand_ins",)


def model_entry(config: dict, model: str) -> dict:
    """The model's entry for scoring: without its `training` defaults, so editing those rescores nothing
    that did not retrain; a hub model's with the folder it was fetched into."""
    entry = {k: v for k, v in config["models"][model].items() if k not in ("training", *WORKFLOW_MODEL_KEYS)}
    return with_snapshot(config, model, entry)


def method_entry(config: dict, model: str, method: str) -> dict:
    """What scoring needs of the method: its kind (the weights come in as the method's model folder), and
    Self-Debias' options (prefix, decay_constant, epsilon, defaults filled in): editing them rescores."""
    check_model_method(config, model, method)
    kind = config["methods"][method]["kind"]
    if kind == "self_debias":
        return {"kind": kind, **resolved_method(config, model, method)["self_debias"]}
    return {"kind": kind}


def benchmark_scoring_slice(config: dict, benchmark: str) -> dict:
    """What scoring depends on: the benchmark entry without its `metric` options (nor a peer reading's
    `reading` text, which only the paper tables' notes print)."""
    bench = config["benchmarks"][benchmark]
    return {k: v for k, v in bench.items() if k not in ("metric", readings_grid.READING_KEY)}


def metric_slice(config: dict, method: str, benchmark: str) -> dict:
    """Only what the metric reads; for an `online` method WinoBias applies online skew (Manela et al.'s -O),
    never the plain variant (that is the pretrained row)."""
    bench = {k: v for k, v in config["benchmarks"][benchmark].items() if k in ("dataset", "measure", "metric")}
    if config["methods"][method]["kind"] == "online" and bench["dataset"] == "winobias":
        metric = dict(bench.get("metric") or {})
        skews = [v for v in (metric.get("online_skew") or []) if v != "none"] or ["all_professions"]
        bench = {**bench, "metric": {**metric, "online_skew": skews}}
    return bench


def seed_metric_benchmark_slices(config: dict, selection: BenchmarkSelection, model: str, method: str) -> dict:
    """{benchmark: what its metric reads} for every benchmark of a seed's metrics.parquet."""
    return {b: metric_slice(config, method, b) for b in selection.summary_benchmarks(model, method)}


def summary_config_slices(config: dict, selection: BenchmarkSelection, model: str, method: str) -> dict:
    """Everything a summary's numbers depend on; its hash is recorded as provenance."""
    benches = selection.summary_benchmarks(model, method)
    datasets = sorted({config["benchmarks"][b]["dataset"] for b in benches} & set(config["data"]))
    return {
        "model": {k: v for k, v in config["models"][model].items() if k not in RUN_ONLY_MODEL_KEYS},
        "method": config["methods"][method],
        "method_resolved": resolved_method(config, model, method),
        "benchmarks": {
            b: {k: v for k, v in config["benchmarks"][b].items() if k != readings_grid.READING_KEY} for b in benches
        },
        "data": {d: config["data"][d] for d in datasets},
        "seeds": seeds_for(config, method),
    }


def aggregate_settings(config: dict) -> dict:
    """config.yaml's `aggregate` block, checked and with its defaults filled in."""
    return AggregateSettings.from_config(config.get("aggregate")).to_dict()


def comparison_entry(config: dict, comparison: str) -> dict:
    return config["comparisons"][comparison]


def comparison_benchmark_slice(config: dict, comparison: str) -> dict:
    """The compared benchmark's entry: its metric options (drop_artefacts) shape the test."""
    return config["benchmarks"][config["comparisons"][comparison]["benchmark"]]


def method_part(config: dict, part: str, model: str, method: str) -> dict:
    """One part of the method resolved for the model (`settings`, `sd_settings`, `inlp_settings`): what its
    fine-tuning or fitting job reads."""
    return resolved_method(config, model, method)[part]


def training_model_entry(config: dict, model: str, method: str) -> dict:
    """What fine-tuning reads of the model entry: not its scoring precision, nor its training defaults (those
    reach the job resolved, in `settings`), nor its `dtype` (full fine-tuning keeps float32 master weights,
    lmbias.training.jobs), so editing either rescores without retraining. A LoRA method (training.adapter)
    keeps `dtype`: its frozen base loads in it."""
    lora = resolved_method(config, model, method)["settings"].get("adapter") is not None
    drop = ("training", "precision", *WORKFLOW_MODEL_KEYS) + (() if lora else ("dtype",))
    entry = {k: v for k, v in config["models"][model].items() if k not in drop}
    return with_snapshot(config, model, entry)


def fitting_model_entry(config: dict, model: str) -> dict:
    """What SentenceDebias and INLP fits read of the model entry: as training_model_entry, but with `dtype`
    (their embeddings come from the model as scoring loads it)."""
    entry = {
        k: v for k, v in config["models"][model].items() if k not in ("training", "precision", *WORKFLOW_MODEL_KEYS)
    }
    return with_snapshot(config, model, entry)


class Unrecorded:
    """A params value that Snakemake keeps out of its records (it records only built-in types): the job reads
    `.value`, and a short digest param beside it is what reruns the job and what `snakemake -n` prints as the
    reason (rule scoring_spec)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:  # Snakemake prints params of a job it runs
        return f"Unrecorded({self.value!r})"


def scoring_spec(config: dict, variant: str, benchmark: str) -> dict:
    """What one benchmark's scores depend on from the config besides the model entry (lmbias.workflow.
    scoring_specs): its scoring slice and the method entry of the scoring `variant` (a method kind, or
    `<kind>.<method>`), equal to method_entry's for every method of that variant."""
    kind, _, method = variant.partition(".")
    method_part = {"kind": kind}
    if method:  # a kind with scoring options (Self-Debias): as method_entry fills them in
        from lmbias.engine.self_debias import SelfDebiasSettings

        method_part.update(SelfDebiasSettings.from_entry(config["methods"][method], f"methods.{method}").to_dict())
    return {"entry": benchmark_scoring_slice(config, benchmark), "method_entry": method_part}


def model_scoring_spec(config: dict, model: str) -> dict:
    """What every score of the model depends on from the config: its entry as scoring reads it (model_entry)."""
    return {"model_entry": model_entry(config, model)}
