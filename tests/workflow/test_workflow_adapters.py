"""lmbias.workflow.adapters: the decisions as rules/common.smk's input functions, as Snakemake calls them."""

from __future__ import annotations

import inspect

from snakemake.common import get_function_params, get_input_function_aux_params
from snakemake.iocontainers import Wildcards

from helpers.shipped_config import shipped_config
from lmbias.workflow import adapters, inputs, params
from lmbias.workflow.scoring_specs import spec_digest


def test_an_adapter_passes_what_the_workflow_holds_then_the_named_wildcards_in_order():
    seen = []

    def decision(config, selection, model, method):
        seen.append((config, selection, model, method))
        return "value"

    adapter = adapters.of_wildcards(decision, "config", "selection", names="model method")
    wildcards = Wildcards(fromdict={"method": "cds", "seed": "0", "model": "tiny-bert"})
    assert adapter(wildcards) == "value"
    assert seen == [("config", "selection", "tiny-bert", "cds")]
    assert adapters.of_wildcards(lambda config: config, "c")(wildcards) == "c"  # no wildcard named


def test_snakemake_sees_a_function_of_the_wildcards_alone_without_inspecting_it_again():
    adapter = adapters.of_wildcards(params.scoring_max_tokens, {}, names="model")
    assert list(get_function_params(adapter)) == ["wildcards"]
    # the other arguments Snakemake could pass (input, output, threads, attempt, ...) are not asked for
    assert get_input_function_aux_params(adapter, {"input": [], "threads": 1, "attempt": 1}) == {}
    assert inspect.signature(adapter) is adapters.WILDCARDS_ONLY
    assert adapter.__name__ == "scoring_max_tokens"


def test_an_adapter_gives_what_the_decision_gives_for_the_jobs_wildcards():
    config = shipped_config()
    wildcards = Wildcards(fromdict={"model": "tiny-bert", "method": "cds", "seed": "0", "benchmark": "winobias"})
    adapter = adapters.of_wildcards(inputs.scoring_inputs, config, names="model method seed benchmark")
    assert adapter(wildcards) == inputs.scoring_inputs(config, "tiny-bert", "cds", "0", "winobias")
    method_settings = adapters.of_wildcards(params.method_part, config, "settings", names="model method")
    assert method_settings(wildcards) == params.resolved_method(config, "tiny-bert", "cds")["settings"]


def test_scoring_specs_are_built_once_and_content_and_digest_read_the_same(monkeypatch):
    config = shipped_config()
    built = []

    def counted(config, variant, benchmark):
        built.append((variant, benchmark))
        return params.scoring_spec(config, variant, benchmark)

    monkeypatch.setattr(adapters, "scoring_spec", counted)
    specs = adapters.ScoringSpecs(config)
    content = specs.benchmark_content("cds", "winobias")
    assert isinstance(content, params.Unrecorded)
    assert content.value == params.scoring_spec(config, "cds", "winobias")
    assert specs.benchmark_digest("cds", "winobias") == spec_digest("winobias", content.value)
    specs.benchmark_content("cds", "winobias")
    assert built == [("cds", "winobias")]
    assert specs.model_content("tiny-bert").value == params.model_scoring_spec(config, "tiny-bert")
    assert specs.model_digest("tiny-bert") == spec_digest("tiny-bert", params.model_scoring_spec(config, "tiny-bert"))


def test_library_sets_are_listed_when_first_asked_for(monkeypatch, repo_root):
    config = shipped_config()
    calls, library_sets = [], inputs.library_sets

    def counted(config, base):
        calls.append(base)
        return library_sets(config, base)

    monkeypatch.setattr(adapters.inputs, "library_sets", counted)
    sets = adapters.LibrarySets(config, repo_root)
    assert calls == []
    assert sets.sources("winobias") == library_sets(config, repo_root)["winobias"]
    assert sets.sources("finetune")
    assert calls == [repo_root]
