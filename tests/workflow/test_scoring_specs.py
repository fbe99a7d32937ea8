"""lmbias.workflow.scoring_specs and lmbias.engine.score_lock: what a benchmark's scores depend on from the
config, in a file whose digest names the edited part; one scoring process at a time per seed folder."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from helpers.shipped_config import shipped_config
from lmbias.engine.score_lock import scoring_lock
from lmbias.errors import ConfigError
from lmbias.workflow import params
from lmbias.workflow.scoring_specs import (
    method_spec_file,
    read_benchmark_spec,
    read_model_spec,
    scoring_variant,
    shared_method_entry,
    spec_digest,
    write_spec,
)


def test_a_digest_names_the_benchmark_and_the_part_an_edit_changed():
    config = shipped_config()
    before = spec_digest("crows_pairs", params.scoring_spec(config, "pretrained", "crows_pairs"))
    config["benchmarks"]["crows_pairs"]["bias_types"] = ["gender"]
    after = spec_digest("crows_pairs", params.scoring_spec(config, "pretrained", "crows_pairs"))
    assert before.startswith("crows_pairs: entry ") and len(before) < 80
    changed = [a for a, b in zip(before.split(", "), after.split(", ")) if a != b]
    assert [part.split(" ")[-2] for part in changed] == ["entry"]  # the method entry's digest is unchanged
    # a metric option is no part of the spec: editing it rescores nothing
    config["benchmarks"]["crows_pairs"]["metric"] = {"variant": "bias_bench"}
    assert spec_digest("crows_pairs", params.scoring_spec(config, "pretrained", "crows_pairs")) == after


def test_a_variant_spec_holds_what_every_method_of_it_scores_with():
    """Methods of one kind share a spec (a sweep's eight swap rates: their differences are in their model
    folders); a Self-Debias method has its own, with its options filled in as scoring reads them."""
    config = shipped_config()
    for method, entry in config["methods"].items():
        variant = scoring_variant(entry, method)
        spec = params.scoring_spec(config, variant, "crows_pairs")
        model = next(m for m, e in config["models"].items() if e["family"] in ("mlm", "clm"))
        try:
            expected = params.method_entry(config, model, method)
        except ConfigError:  # a method this model's family cannot run
            continue
        assert spec["method_entry"] == expected, method
        assert method_spec_file(config, method, "crows_pairs") == f"results/scoring/{variant}/crows_pairs.json"
    assert scoring_variant({"kind": "self_debias"}, "sd-gender") == "self_debias.sd-gender"
    assert scoring_variant({"kind": "cds"}, "cds-0.5") == "cds"


def test_a_spec_round_trips_and_a_broken_one_is_named(tmp_path):
    config = shipped_config()
    spec = params.scoring_spec(config, "pretrained", "winobias")
    path = tmp_path / "scoring/pretrained/winobias.json"
    write_spec(path, "winobias", spec)
    read = read_benchmark_spec(path)
    assert read["name"] == "winobias" and {k: read[k] for k in spec} == json.loads(json.dumps(spec))
    assert shared_method_entry([read, read], [path, path]) == read["method_entry"]
    model = tmp_path / "scoring/tiny-bert.json"
    write_spec(model, "tiny-bert", params.model_scoring_spec(config, "tiny-bert"))
    assert read_model_spec(model)["model_entry"]["family"] == "mlm"
    path.write_text('{"name": "winobias"}')
    with pytest.raises(ConfigError, match=r"winobias.json: not a scoring spec \(KeyError"):
        read_benchmark_spec(path)


def test_unrecorded_params_are_left_out_of_snakemakes_records():
    """Snakemake records only built-in values of params (persistence._serialize_param_builtin): the spec goes to
    the job but never into the reason `snakemake -n` prints; the digest beside it does."""
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    serialize = PersistenceBase._serialize_param_builtin
    assert serialize(None, params.Unrecorded({"a": 1})) is UNREPRESENTABLE
    assert serialize(None, "crows_pairs: benchmark 0123456789") != UNREPRESENTABLE


def _hold(folder, seconds, began):
    with scoring_lock(folder):
        began.put(time.monotonic())
        time.sleep(seconds)


def test_the_second_job_of_a_seed_waits_for_the_first(tmp_path):
    began = multiprocessing.get_context("spawn").Queue()
    holder = multiprocessing.get_context("spawn").Process(target=_hold, args=(tmp_path, 1.5, began))
    holder.start()
    first = began.get(timeout=60)
    with scoring_lock(tmp_path, poll_s=0.05):
        second = time.monotonic()
    holder.join(timeout=60)
    assert second - first >= 1.4  # it waited for the holder to finish
    with scoring_lock(tmp_path):  # a lock file left behind blocks nothing
        pass
