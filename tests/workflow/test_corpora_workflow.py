"""rules/corpora.smk for real, on a copy of the workflow: GAP sentences (validation split, to stay fast),
two counterfactual variants, the GPR task on the WinoBias type-1 conll files; then what an edit rebuilds,
and config errors that must stop the run before any job."""

from __future__ import annotations

import re

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.workflow_runs import copy_workflow, run_snakemake, write_config
from lmbias.config import config_errors
from lmbias.corpora.jobs import check_corpora_config
from lmbias.errors import ConfigError

pytestmark = pytest.mark.workflow

TARGETS = [
    "results/corpora/gap/sentences.parquet",
    "results/corpora/gap/cda-naive.parquet",
    "results/corpora/gap/cds-names.parquet",
    "results/corpora/ontonotes/gpr-U.parquet",
    "results/corpora/ontonotes/gpr-A.parquet",
]


def _scheduled(proc) -> list[str]:
    """Every output path of the jobs a dry run would execute (a job may have several), sorted."""
    text = proc.stdout + proc.stderr
    return sorted(p for line in re.findall(r"^\s*output: (.+)$", text, re.M) for p in line.split(", "))


def _small(shared_data):
    def edit(config):
        config["data_dir"] = str(shared_data)
        config["benchmarks"]["gap"]["splits"] = ["validation"]
        # type 1 only (pro + anti, 792 documents), to stay fast; tests/corpora/test_gpr.py reads all four files
        config["corpora"]["ontonotes"].update(
            path=str(shared_data / "winobias" / "conll_format"), pattern="dev_type1_*_conll"
        )

    return edit


@pytest.fixture(scope="module")
def corpora_run(tmp_path_factory, repo_root, shared_data):
    workdir = copy_workflow(repo_root, tmp_path_factory.mktemp("corpora"))
    config = write_config(workdir, _small(shared_data))
    run_snakemake(workdir, "--configfile", str(config), *TARGETS)
    return workdir, shared_data


def test_corpora_are_built_with_logs_and_benchmarks(corpora_run):
    workdir, _ = corpora_run
    sentences = pq.read_table(workdir / "results/corpora/gap/sentences.parquet")
    assert sentences.num_rows == 1383 and set(sentences.column("split").to_pylist()) == {"validation"}
    cda = pq.read_table(workdir / "results/corpora/gap/cda-naive.parquet")
    assert cda.num_rows == 2 * 1383
    assert cda.column("is_counterfactual").to_pylist() == [False, True] * 1383
    assert cda.column("text").to_pylist()[0::2] == sentences.column("text").to_pylist()
    cds = pq.read_table(workdir / "results/corpora/gap/cds-names.parquet")
    assert cds.num_rows == 1383 and all(cds.column("is_counterfactual").to_pylist()), "swap_rate 1.0: every document"
    assert sum(cds.column("changed").to_pylist()) > 1000
    u = pq.read_table(workdir / "results/corpora/ontonotes/gpr-U.parquet")
    a = pq.read_table(workdir / "results/corpora/ontonotes/gpr-A.parquet")
    assert (u.num_rows, a.num_rows) == (810, 1620)
    assert sorted(set(u.column("split").to_pylist())) == ["train", "validation"]
    assert pq.read_table(workdir / "results/corpora/ontonotes/sentences.parquet").num_rows == 792
    for name in ("gap/sentences", "gap/cda-naive", "gap/cds-names", "ontonotes/sentences", "ontonotes/gpr"):
        assert (workdir / f"logs/corpora/{name}.log").exists(), name
        assert (workdir / f"benchmarks/corpora/{name}.tsv").exists(), name
    log = (workdir / "logs/corpora/gap/cds-names.log").read_text()
    assert "1383 sentences in" in log and "swap_rate=1" in log


def test_edits_rebuild_only_what_they_touch(corpora_run):
    workdir, data = corpora_run

    def edit(config):
        _small(data)(config)
        config["corpora"]["gap"]["interventions"]["cds-names"]["swap_rate"] = 0.6
        config["corpora"]["ontonotes"]["gpr"]["seed"] = 1

    proc = run_snakemake(workdir, "-n", "--configfile", str(write_config(workdir, edit)), *TARGETS)
    assert _scheduled(proc) == [
        "results/corpora/gap/cds-names.parquet",  # only the edited intervention, not sentences nor cda-naive
        "results/corpora/ontonotes/gpr-A.parquet",  # the GPR job, not the anonymised sentences it reads
        "results/corpora/ontonotes/gpr-U.parquet",
    ]


def test_gold_coreference_protects_pronouns_in_the_built_corpora(corpora_run):
    """Lu et al.'s rule through the rules: GAP's 392 validation pronoun-name links reach the sentences; in
    cds-names (grammatical, names: true, the option's default on) the pronoun of a kept name stays, the
    pronoun of a swapped name flips with it; WinoBias has no proper-noun cluster, so GPR protects nothing."""
    workdir, _ = corpora_run
    sentences = pq.read_table(workdir / "results/corpora/gap/sentences.parquet")
    assert sum(len(spans) for spans in sentences.column("protect_spans").to_pylist()) == 392
    cds = {
        (r["doc_id"], r["sentence_id"]): r["text"]
        for r in pq.read_table(workdir / "results/corpora/gap/cds-names.parquet").to_pylist()
    }
    # validation-4: "he" -> Reucassel (not in the name list: kept, so is his pronoun); "Mr", Peter and his "he" flip
    assert cds[("validation-4", 1)] == (
        "When TV cameras remained focused on Reucassel rather than Mrs Debnam, he "
        "said, ``Sorry, I'm not Heather Debnam, she's over there."
    )
    # validation-2: "She" -> Kathleen, a listed given name swapped to Timothy: the pronoun follows the name
    assert cds[("validation-2", 0)].startswith("Timothy Nott") and cds[("validation-2", 2)].startswith("He was")
    log = (workdir / "logs/corpora/gap/cds-names.log").read_text()
    assert re.search(
        r"\d+ gendered words kept by gold coreference with a name \(protect_proper_noun_clusters: true\)", log
    ), log
    onto = pq.read_table(workdir / "results/corpora/ontonotes/sentences.parquet")
    assert onto.column("protect").to_pylist() == [[]] * 792


def test_the_protect_option_rebuilds_only_its_corpora(corpora_run):
    workdir, data = corpora_run

    def edit(config):
        _small(data)(config)
        config["corpora"]["gap"]["interventions"]["cds-names"]["protect_proper_noun_clusters"] = False
        config["corpora"]["ontonotes"]["gpr"]["protect_proper_noun_clusters"] = True

    proc = run_snakemake(workdir, "-n", "--configfile", str(write_config(workdir, edit)), *TARGETS)
    assert _scheduled(proc) == [  # not the sentence tables, which carry the gold links whatever the option
        "results/corpora/gap/cds-names.parquet",
        "results/corpora/ontonotes/gpr-A.parquet",
        "results/corpora/ontonotes/gpr-U.parquet",
    ]


def test_gpr_without_ontonotes_path_names_the_key(corpora_run):
    workdir, data = corpora_run
    proc = run_snakemake(
        workdir, "-n", "--config", f"data_dir={data}", "results/corpora/ontonotes/gpr-U.parquet", check=False
    )
    assert proc.returncode != 0
    assert "corpora.ontonotes.path is not set" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"method": "cds", "intervention": "grammatical"},
            "corpora.gap.interventions.x.swap_rate: a cds intervention needs",
        ),
        (
            {"method": "cds", "intervention": "naive", "swap_rate": 0},
            "corpora.gap.interventions.x.swap_rate: must be in (0, 1]",
        ),
        (
            {"method": "cda", "intervention": "naive", "swap_rate": 0.5},
            "corpora.gap.interventions.x.swap_rate: only cds",
        ),
        ({"method": "cda", "intervention": "pos"}, "corpora.gap.interventions.x.intervention: must be one of"),
    ],
)
def test_intervention_cross_checks_name_the_key(entry, message):
    # Run by rules/corpora.smk while the Snakefile is read, before any job.
    with pytest.raises(ConfigError) as err:
        check_corpora_config({"gap": {"interventions": {"x": entry}}}, {"gap": {"dataset": "gap"}})
    assert message in str(err.value)
    with pytest.raises(ConfigError, match=r"corpora\.gap\.interventions\.gpr-U: the name 'gpr-U' is reserved"):
        check_corpora_config(
            {"gap": {"interventions": {"gpr-U": {"method": "cda", "intervention": "naive"}}}},
            {"gap": {"dataset": "gap"}},
        )
    with pytest.raises(ConfigError, match=r"corpora\.gap\.benchmark: 'gap2' is not a configured benchmark"):
        check_corpora_config({"gap": {"benchmark": "gap2"}}, {"gap": {"dataset": "gap"}})


def test_corpora_schema_is_closed(repo_root):
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    schema = repo_root / "schemas/config.schema.yaml"
    assert config_errors(config, schema) == []
    config["corpora"]["gap"]["interventions"]["cda-naive"]["sweep"] = 1
    config["corpora"]["gap"]["interventions"]["sentences"] = {"method": "cda", "intervention": "naive"}
    config["corpora"]["ontonotes"]["gpr"]["validation_fraction"] = 1.0
    errors = config_errors(config, schema)
    assert "corpora.gap.interventions.cda-naive.sweep: unknown key" in errors
    assert any(e.startswith("corpora.gap.interventions: 'sentences' does not match") for e in errors), errors
    assert any(e.startswith("corpora.ontonotes.gpr.validation_fraction:") for e in errors), errors


def test_corpus_rule_matches_the_gold_set(tmp_path, repo_root, shared_data):
    """A corpus built through rule corpus_intervention swaps like the tested swapper: the gold set's
    thresholds hold, and the parser-dependent possessive "HER" is right (it ran without the parser before)."""
    import pyarrow as pa

    from helpers.counterfactual_gold import gold_report, read_gold

    workdir = copy_workflow(repo_root, tmp_path / "gold")
    rows = read_gold() + [
        {
            "case": "her_possessive_caps",
            "original": "HER answer surprised him.",
            "expected": "HIS answer surprised her.",
        }
    ]
    sentences = pa.table(
        {
            "doc_id": [f"gold-{i}" for i in range(len(rows))],
            "sentence_id": [0] * len(rows),
            "split": ["validation"] * len(rows),
            "text": [r["original"] for r in rows],
        }
    )
    out = workdir / "results/corpora/gap/sentences.parquet"
    out.parent.mkdir(parents=True)
    pq.write_table(sentences, out)

    def edit(config):
        config["data_dir"] = str(shared_data)
        # the gold set was written for the merged lexicon (resources/wordlists + CDS pairs + WinoBias lists)
        config["corpora"]["gap"]["interventions"]["cda-gold"] = {
            "method": "cda",
            "intervention": "grammatical",
            "wordlist": "merged",
        }

    target = "results/corpora/gap/cda-gold.parquet"
    # the target first: --allowed-rules takes every following word (run_snakemake moves --configfile last)
    run_snakemake(
        workdir,
        target,
        "--allowed-rules",
        "corpus_intervention",
        "data_cds",
        "data_winobias",
        "--configfile",
        str(write_config(workdir, edit)),
    )
    got = {r["doc_id"]: r["text"] for r in pq.read_table(workdir / target).to_pylist() if r["is_counterfactual"]}
    outputs = [got[f"gold-{i}"] for i in range(len(rows))]
    assert outputs[-1] == "HIS answer surprised her."
    per_case, failures = gold_report(rows, outputs)
    pronouns = sum(c["pronouns"] for c in per_case.values())
    assert sum(c["pronouns_ok"] for c in per_case.values()) / pronouns >= 0.97, "\n".join(failures)
    assert sum(c["exact"] for c in per_case.values()) / len(rows) >= 0.95, "\n".join(failures)
