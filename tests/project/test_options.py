"""lmbias.options: an option block checked against its part of schemas/config.schema.yaml, the errors naming the key
as the workflow's validation does; the metric option classes check through it."""

from __future__ import annotations

import pytest

from helpers.paths import REPO_ROOT
from lmbias.benchmarks import catalog
from lmbias.errors import ConfigError
from lmbias.io import load_yaml
from lmbias.options import SCHEMA_FILE, check_block, load_schema, schema_part


def test_the_schema_is_the_workflows():
    assert SCHEMA_FILE == REPO_ROOT / "schemas" / "config.schema.yaml"
    assert schema_part("benchmarks.occupations.metric")["additionalProperties"] is False


def test_an_empty_block_passes_and_a_bad_one_names_every_key():
    check_block(None, "benchmarks.occupations.metric")
    check_block({}, "benchmarks.occupations.metric")
    with pytest.raises(ConfigError) as caught:
        check_block({"boot": 1, "seed": -1}, "benchmarks.occupations.metric", "benchmarks.occ-mine.metric")
    message = str(caught.value)
    assert "benchmarks.occ-mine.metric.boot: unknown key (known: bootstrap, seed)" in message
    assert "benchmarks.occ-mine.metric.seed: -1 is less than the minimum of 0" in message


def test_an_unknown_part_of_the_schema_is_a_key_error():
    with pytest.raises(KeyError, match="benchmarks.nothing.metric"):
        schema_part("benchmarks.nothing.metric")


def test_a_missing_schema_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="missing.yaml is missing"):
        load_schema(tmp_path / "missing.yaml")


def test_every_shipped_metric_block_is_accepted_by_its_option_class():
    """Known answer: the shipped config.yaml is valid, so every metric block it holds parses, readings included."""
    config = load_yaml((REPO_ROOT / "config.yaml").read_text())
    checked = 0
    for name, entry in config["benchmarks"].items():
        definition = catalog.definition_of(entry) if catalog.is_measurable(entry) else None
        parse = getattr(definition, "parse_options", None)
        if parse is not None and "metric" in entry:
            parse(entry["metric"], f"benchmarks.{name}.metric")
            checked += 1
    assert checked >= 9


def test_a_reference_in_the_schema_is_followed():
    """seat_v1's metric block is `$ref` seat's: the same part, so SEAT's options check the same keys for both."""
    assert schema_part("benchmarks.seat_v1.metric") == schema_part("benchmarks.seat.metric")


def test_a_definition_is_reached_by_its_key_and_its_references_resolve():
    """A block several entries share lives under $defs: bold.scoring is $defs.generation's keys and its own
    (closed by unevaluatedProperties), so an unknown key is named with both sets of known keys."""
    assert "decoding" in schema_part("$defs.generation")["properties"]
    check_block({"decoding": "sampling", "prompts_per_group": 2}, "benchmarks.bold.scoring")
    with pytest.raises(ConfigError) as caught:
        check_block({"beams": 4, "prompts_per_group": 0}, "benchmarks.bold.scoring")
    message = str(caught.value)
    assert "benchmarks.bold.scoring.beams: unknown key (known: batch_size, decoding, max_new_tokens, " in message
    assert "prompts_per_group, samples_per_prompt, seed, temperature, top_p)" in message
    assert "benchmarks.bold.scoring.prompts_per_group: 0 is less than the minimum of 1" in message
    with pytest.raises(ConfigError, match=r"generation\.prompts_per_group: unknown key"):
        check_block({"prompts_per_group": 2}, "$defs.generation_block", "generation")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_number_no_range_can_catch_is_named(value):
    """NaN passes every minimum and maximum (each comparison is false): the check names it itself."""
    with pytest.raises(ConfigError, match=r"benchmarks\.perplexity_gap\.metric\.confidence: .* is not a finite"):
        check_block({"confidence": value}, "$defs.perplexity_metric", "benchmarks.perplexity_gap.metric")


def test_every_dataset_with_an_entry_of_its_own_checks_entries_under_other_names():
    """An entry under a name of its own (crows_pairs-biasbench, a second winogenerated) takes its dataset's keys
    only where the dataset is in the schema's list of datasets with an entry and has its branch there: three places
    of the schema name a dataset, and a missed one (winogender's list entry was) lets a misspelt key through."""
    benchmarks = load_schema()["properties"]["benchmarks"]
    own = {}
    for name, entry in benchmarks["properties"].items():
        const = entry.get("properties", {}).get("dataset", {}).get("const")
        if const is not None:
            own.setdefault(const, name)
    listed = set(benchmarks["additionalProperties"]["if"]["properties"]["dataset"]["enum"])
    branches = {
        b["if"]["properties"]["dataset"]["const"]: b["then"]["$ref"]
        for b in benchmarks["additionalProperties"]["then"]["allOf"]
    }
    assert listed == set(own) == set(branches)
    for dataset, ref in branches.items():
        assert schema_part("benchmarks." + ref.rsplit("/", 1)[1])["properties"]["dataset"] == {"const": dataset}
