"""Corpus recipes of the peers' code: the over-debiasing authors' CDS (DA-Gender bert_CDS.py: the first
int(rate * N) sentences swapped, names on, every pronoun flipped) and Bartl et al.'s own gap_flipped.tsv
read as their code/main.py reads it. Each peer computation is transcribed here from their code."""

from __future__ import annotations

import re

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.paths import REPO_ROOT
from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_outputs, write_config
from lmbias.corpora import jobs
from lmbias.corpora.augment import cds_corpus, choose_prefix
from lmbias.corpora.bartl import bartl_corpus, read_flipped_gap
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.sentences import SENTENCES_SCHEMA, gap_sentences, load_splitter
from lmbias.corpora.swap_lexicon import PRONOUNS, load_lexicon
from lmbias.errors import ConfigError, DataError
from lmbias.io import file_sha256
from lmbias.parsers.gap import parse_gap
from lmbias.parsers.sources import dataset_files

BARTL = "bartl2020_gap_flipped/gap_flipped.tsv"
LU2018 = str(REPO_ROOT / "resources/wordlists/lu2018_gender_pairs.tsv")


@pytest.fixture(scope="module")
def config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


@pytest.fixture(scope="module")
def sentencizer():
    return load_splitter("en_core_web_sm", "sentencizer")


@pytest.fixture(scope="module")
def gap_validation(shared_data, sentencizer):
    """GAP's validation contexts split into sentences (the sentencizer: fast), with the gold links."""
    table, _ = gap_sentences(parse_gap({"validation": shared_data / "gap" / "gap-validation.tsv"}), sentencizer)
    return table


# -- (a) prefix selection -------------------------------------------------------------------------


def _their_prefix_cds(sentences: list[str], rate: float, invert) -> list[str]:
    """DA-Gender bert_CDS.py: size = int(CDS_ratio * len(sents)); the first `size` inverted, the rest kept."""
    size = int(rate * len(sentences))
    return [invert(s) for s in sentences[:size]] + sentences[size:]


@pytest.mark.parametrize("rate", [0.29, 0.6, 0.95, 1.0])
def test_prefix_selection_swaps_the_first_int_rate_n_sentences(gap_validation, rate):
    naive = Swapper(load_lexicon(), "naive")
    table = gap_validation.slice(0, 100).select(["doc_id", "sentence_id", "split", "text"])
    texts = table.column("text").to_pylist()
    out = cds_corpus(table, naive, rate, seed=0, selection="prefix")
    expected = _their_prefix_cds(texts, rate, naive.swap_text)
    assert out.column("text").to_pylist() == expected
    size = int(rate * 100)  # 0.29 * 100 == 28.999...: 28, where round() would give 29
    assert out.column("swapped").to_pylist() == [True] * size + [False] * (100 - size)
    assert out.column("text").to_pylist()[size:] == texts[size:]
    if rate == 0.29:
        assert size == 28
    # the random draw (default) is not a prefix
    drawn = cds_corpus(table, naive, rate, seed=0).column("swapped").to_pylist()
    assert sum(drawn) == round(rate * 100) and (
        rate == 1.0 or drawn != [True] * sum(drawn) + [False] * (100 - sum(drawn))
    )


def test_prefix_of_documents_and_bad_selection(gap_validation):
    naive = Swapper(load_lexicon(), "naive")
    table = gap_validation.slice(0, 60).select(["doc_id", "sentence_id", "split", "text"])
    ids = table.column("doc_id").to_pylist()
    first = list(dict.fromkeys(ids))[: int(0.5 * len(set(ids)))]
    out = cds_corpus(table, naive, 0.5, seed=0, unit="document", selection="prefix")
    assert out.column("swapped").to_pylist() == [d in first for d in ids]
    assert choose_prefix(["b", "a", "b", "c"], 0.7) == {"b", "a"}  # int(0.7 * 3) = 2, first-appearance order
    with pytest.raises(ConfigError, match="selection: must be one of"):
        cds_corpus(table, naive, 0.5, seed=0, selection="first")
    with pytest.raises(ConfigError, match=r"corpora\.gap\.interventions\.x\.selection: must be one of"):
        jobs.check_intervention(
            {"method": "cds", "intervention": "naive", "swap_rate": 1.0, "selection": "top"},
            "corpora.gap.interventions.x",
        )
    with pytest.raises(ConfigError, match=r"x\.selection: only cds"):
        jobs.check_intervention({"method": "cda", "intervention": "naive", "selection": "prefix"}, "x")


def test_swap_unit_defaults_to_sentences_as_the_job_does(gap_validation):
    """cds_corpus' default unit is the job's (check_intervention: swap_unit sentence)."""
    naive = Swapper(load_lexicon(), "naive")
    table = gap_validation.slice(0, 60).select(["doc_id", "sentence_id", "split", "text"])
    assert (
        jobs.check_intervention({"method": "cds", "intervention": "naive", "swap_rate": 0.5}, "x")["swap_unit"]
        == "sentence"
    )
    default = cds_corpus(table, naive, 0.5, seed=4).column("swapped").to_pylist()
    assert default == cds_corpus(table, naive, 0.5, seed=4, unit="sentence").column("swapped").to_pylist()
    assert sum(default) == 30


def test_the_dagender_template_builds_a_prefix_corpus_through_the_job(config, gap_validation, tmp_path):
    entry = config["corpora"]["gap"]["interventions"]["cds-dagender-{swap_rate}"]
    key, resolved = jobs.resolve_intervention(
        config["corpora"]["gap"]["interventions"], "cds-dagender-0.9", "corpora.gap.interventions"
    )
    assert key == "corpora.gap.interventions.cds-dagender-{swap_rate}" and resolved == {**entry, "swap_rate": 0.9}
    opts = jobs.check_intervention(resolved, key)
    assert (
        opts["names"],
        opts["protect_proper_noun_clusters"],
        opts["selection"],
        opts["swap_unit"],
        opts["substitutor"],
        opts["wordlist"],
    ) == (True, False, "prefix", "sentence", "hall_maudslay", "lu2018")
    # the job passes the selection through (naive: no spaCy pipeline needed)
    sentences = tmp_path / "sentences.parquet"
    pq.write_table(gap_validation.slice(0, 40), sentences)
    out = tmp_path / "cds.parquet"
    jobs.build_counterfactual(
        sentences,
        out,
        {"lu2018_pairs": LU2018},
        {"method": "cds", "intervention": "naive", "swap_rate": 0.9, "selection": "prefix"},
        "en_core_web_sm",
    )
    flags = pq.read_table(out).column("is_counterfactual").to_pylist()
    assert flags == [True] * int(0.9 * 40) + [False] * (40 - int(0.9 * 40))


# -- (b) names on, proper-noun protection off: every pronoun flips ----------------------------------

_WORD = re.compile(r"\w+")


def _pronouns_kept(original: str, swapped: str) -> list[str]:
    """Gendered pronouns of `original` left as they were (word by word; a name swap is one word for one)."""
    a, b = _WORD.findall(original), _WORD.findall(swapped)
    assert len(a) == len(b), (original, swapped)
    return [x for x, y in zip(a, b) if x.lower() in PRONOUNS and x == y]


def test_names_without_protection_flip_every_pronoun(config, gap_validation, shared_data, tmp_path):
    linked = [r for r in gap_validation.to_pylist() if r["protect_spans"]][:12]
    sentences = tmp_path / "sentences.parquet"
    pq.write_table(pa.Table.from_pylist(linked, schema=SENTENCES_SCHEMA), sentences)
    lexicon = {"lu2018_pairs": LU2018, "name_pairs": str(shared_data / "cds" / "names_pairs_1000_scaled.json")}
    # the recipe's options with our substitutor (hall_maudslay keeps himself/herself: tested below)
    dagender = {
        **config["corpora"]["gap"]["interventions"]["cds-dagender-{swap_rate}"],
        "swap_rate": 1.0,
        "substitutor": "lmbias",
    }
    default = {k: v for k, v in dagender.items() if k not in ("protect_proper_noun_clusters", "selection")}
    built = {}
    for name, entry in (("dagender", dagender), ("default", default)):
        jobs.build_counterfactual(sentences, tmp_path / f"{name}.parquet", lexicon, entry, "en_core_web_sm")
        built[name] = pq.read_table(tmp_path / f"{name}.parquet").column("text").to_pylist()
    originals = [r["text"] for r in linked]
    assert all(not _pronouns_kept(o, s) for o, s in zip(originals, built["dagender"])), [
        (o, s) for o, s in zip(originals, built["dagender"]) if _pronouns_kept(o, s)
    ]
    assert sum(len(_pronouns_kept(o, s)) for o, s in zip(originals, built["default"])) > 0, (
        "the default (Lu et al.'s rule on) keeps pronouns linked to a kept name"
    )


# -- Hall Maudslay et al.'s substitutor (substitutor: hall_maudslay) ------------------------------------


def _their_two_way(pairs) -> dict:
    """CDA/substitutor.py's TwoWayDict filled pair by pair: a new pair drops both words' old pairings."""
    table = {}
    for male, female in pairs:
        male, female = male.lower(), female.lower()
        for word in (male, female):
            if word in table:
                old = table[word]
                del table[old], table[word]
        table[male], table[female] = female, male
    return table


def _their_invert(doc, base: dict, names: dict) -> str:
    """CDA/substitutor.py invert_document + invert_word + match_case, over a spaCy doc."""
    out = doc.text
    for word in reversed(doc):
        low, new = word.text.lower(), None
        if low in base:
            new = base[low]
        elif low in names and word.ent_type_ == "PERSON":
            new = names[low]
        elif low == "him":
            new = "her"
        elif low == "his":
            new = "hers" if word.tag_ == "NNS" else "her"
        elif low == "her":
            new = "his" if word.tag_ == "PRP$" else "him"
        elif low == "hers":
            new = "his"
        if new is None:
            continue
        t = word.text
        if t.islower():
            new = new.lower()
        elif t.isupper():
            new = new.upper()
        elif t[0].isupper() and t[1:].islower():
            new = new[0].upper() + new[1:].lower()
        out = out[: word.idx] + new + out[word.idx + len(t) :]
    return out


@pytest.fixture(scope="module")
def hall_maudslay(shared_data):
    lexicon = {"lu2018_pairs": LU2018, "name_pairs": str(shared_data / "cds" / "names_pairs_1000_scaled.json")}
    return jobs.make_swapper(lexicon, "grammatical", True, "en_core_web_sm", "hall_maudslay")


def test_hall_maudslay_substitutor_is_theirs_on_gap(hall_maudslay, gap_validation, shared_data):
    """Their lists as they load them (the JSON files), their word-by-word rules, on 80 GAP sentences."""
    import json

    base = _their_two_way(json.loads((shared_data / "cds" / "cda_default_pairs.json").read_text()))
    names = _their_two_way(json.loads((shared_data / "cds" / "names_pairs_1000_scaled.json").read_text()))
    texts = gap_validation.column("text").to_pylist()[:80]
    ours = hall_maudslay.swap_texts(texts)
    theirs = [_their_invert(doc, base, names) for doc in hall_maudslay.nlp.pipe(texts)]
    assert ours == theirs
    assert sum(o != t for o, t in zip(ours, texts)) > 40


def test_hall_maudslay_differs_from_ours_where_their_code_does(hall_maudslay, shared_data):
    text = "Queen Elizabeth said she saw herself at King's College with her brother John Taylor."
    assert (
        hall_maudslay.swap_text(text)
        == "King William said he saw herself at Queen's College with his sister Mary Jordan."
    )
    lexicon = load_lexicon(wordlists=[LU2018], names=shared_data / "cds" / "names_pairs_1000_scaled.json")
    ours = Swapper(lexicon, "grammatical", names=True).swap_text(text)
    assert "himself" in ours and "King's College" in ours and "Taylor" in ours


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"intervention": "naive"}, "x.intervention: the hall_maudslay substitutor decides"),
        ({"wordlist": "merged"}, "x.wordlist: the hall_maudslay substitutor reads its own list"),
        ({"protect_proper_noun_clusters": True}, "x.protect_proper_noun_clusters: the hall_maudslay substitutor keeps"),
        ({"substitutor": "spacy"}, "x.substitutor: must be one of"),
    ],
)
def test_hall_maudslay_options_are_checked(extra, message):
    entry = {"method": "cds", "intervention": "grammatical", "swap_rate": 1.0, "substitutor": "hall_maudslay", **extra}
    with pytest.raises(ConfigError, match=re.escape(message)):
        jobs.check_intervention(entry, "x")
    plain = {"method": "cds", "intervention": "grammatical", "swap_rate": 1.0, "substitutor": "hall_maudslay"}
    assert jobs.check_intervention(plain, "x")["protect_proper_noun_clusters"] is False  # its default


# -- (c), (d) Bartl et al.'s gap_flipped.tsv ----------------------------------------------------------


def _her_reading(path, split) -> list[str]:
    """code/main.py --tune: pd.read_csv(sep='\\t'); tune_data += sent_tokenize(text) for text in Text, in order
    (their NLTK sent_tokenize replaced by `split`)."""
    tune_data = []
    for text in pd.read_csv(path, sep="\t").Text:
        tune_data += split(text)
    return tune_data


def test_bartl_corpus_is_her_reading_of_the_file(shared_data, sentencizer, tmp_path):
    head = tmp_path / "gap_flipped.tsv"
    head.write_text(
        "".join((shared_data / BARTL).read_text(encoding="utf-8").splitlines(keepends=True)[:301]), encoding="utf-8"
    )
    table, counts = bartl_corpus(head, sentencizer)

    def split(text):
        return [s.text.strip() for s in sentencizer(text).sents if s.text.strip()]

    assert table.column("text").to_pylist() == _her_reading(head, split)
    assert table.column_names == jobs.COUNTERFACTUAL_SCHEMA.names
    frame = pd.read_csv(head, sep="\t")
    ids = table.column("doc_id").to_pylist()
    assert list(dict.fromkeys(ids)) == list(frame.ID) and counts["rows"] == 300
    assert table.column("split").to_pylist()[0] == "development" and all(table.column("is_counterfactual").to_pylist())
    assert table.column("changed").null_count == table.num_rows
    # sentence_id restarts at 0 in every context
    assert [s for d, s in zip(ids, table.column("sentence_id").to_pylist()) if d == ids[0]] == list(
        range(ids.count(ids[0]))
    )


def _tsv(tmp_path, lines: list[str]):
    path = tmp_path / "gap_flipped.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


HEADER = "\tID\tText\tPronoun"


@pytest.mark.parametrize(
    "lines, line, message",
    [
        (["\tID\tContext\tPronoun", "0\tdevelopment-1\tHe left.\the"], 1, "header lacks column(s) Text"),
        (
            [HEADER, "0\tdevelopment-1\tHe left.\the", "1\tdevelopment-2\tShe came."],
            3,
            "expected 4 tab-separated fields",
        ),
        ([HEADER, "0\tdevelopment-1\tHe left.\the", "", "1\tdevelopment-2\t \tshe"], 4, "has an empty Text"),
        ([HEADER, "0\t\tHe left.\the"], 2, "empty ID"),
        (
            [HEADER, "0\tdevelopment-1\tHe left.\the", "1\tdevelopment-1\tShe came.\tshe"],
            3,
            "occurs twice (first at line 2)",
        ),
        ([HEADER], 2, "no data rows"),
    ],
)
def test_malformed_tsv_names_file_and_line(tmp_path, lines, line, message):
    path = _tsv(tmp_path, lines)
    with pytest.raises(DataError) as err:
        read_flipped_gap(path)
    assert f"{path}:{line}: " in str(err.value) and message in str(err.value)


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "gap_flipped.tsv"
    path.write_bytes(HEADER.encode() + b"\n0\tdevelopment-1\tHe left.\the\n1\tdevelopment-2\tSh\xe9 came.\tshe\n")
    with pytest.raises(DataError, match=rf"{re.escape(str(path))}:3: not valid UTF-8"):
        read_flipped_gap(path)


# -- (e) the new data entries ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dataset, files",
    [("bartl2020_gap_flipped", ["gap_flipped.tsv"]), ("gn_glove", ["male_word_file.txt", "female_word_file.txt"])],
)
def test_new_data_entries_match_the_shared_copies(config, shared_data, dataset, files):
    entry = config["data"][dataset]
    pinned = dataset_files(entry, dataset)
    assert sorted(pinned) == sorted(files)
    for name in files:
        url, sha = pinned[name]
        assert url == entry["base_url"] + entry["files"][name]["upstream"]
        assert file_sha256(shared_data / dataset / name) == sha


# -- the workflow: the Bartl corpus and the recipes' corpora are targets the DAG schedules ------------------


@pytest.mark.workflow
def test_bartl_corpus_builds_through_its_rule(tmp_path, repo_root, shared_data):
    workdir = copy_workflow(repo_root, tmp_path / "wf")

    def edit(config):
        config["data_dir"] = str(shared_data)
        config["methods"]["cds-dagender"] = {
            "kind": "cds",
            "corpus": "results/corpora/gap/cds-dagender-{swap_rate}.parquet",
        }
        config["methods"]["cds-bartl"] = {"kind": "cds", "corpus": "results/corpora/bartl2020/gap-flipped.parquet"}

    configfile = str(write_config(workdir, edit))
    target = "results/corpora/bartl2020/gap-flipped.parquet"
    dry = run_snakemake(
        workdir,
        "-n",
        target,
        "results/corpora/gap/cds-dagender-0.9.parquet",
        "results/tiny-bert/cds-bartl/seed0/model",
        "results/tiny-bert/cds-dagender/seed0/model",
        "--configfile",
        configfile,
    )
    scheduled = scheduled_outputs(dry)
    for path in (
        target,
        "results/corpora/gap/cds-dagender-0.9.parquet",
        "results/corpora/gap/cds-dagender-1.0.parquet",
    ):
        assert path in scheduled, (path, scheduled)
    # the data rule has a message: its output shows in the reason line
    assert "Missing output files: resources/data/bartl2020_gap_flipped/gap_flipped.tsv" in dry.stdout
    # the real run reads the file's first 50 rows (pinned by their own sha256), to stay fast
    head = tmp_path / "head" / "gap_flipped.tsv"
    head.parent.mkdir()
    head.write_text(
        "".join((shared_data / BARTL).read_text(encoding="utf-8").splitlines(keepends=True)[:51]), encoding="utf-8"
    )

    def small(config):
        edit(config)
        config["data"]["bartl2020_gap_flipped"]["path"] = str(head.parent)
        config["data"]["bartl2020_gap_flipped"]["files"]["gap_flipped.tsv"]["sha256"] = file_sha256(head)

    run_snakemake(
        workdir,
        target,
        "--allowed-rules",
        "corpus_bartl2020",
        "data_bartl2020_gap_flipped",
        "--configfile",
        str(write_config(workdir, small)),
    )
    table = pq.read_table(workdir / target)
    assert table.schema.equals(jobs.COUNTERFACTUAL_SCHEMA, check_metadata=False)
    assert len(set(table.column("doc_id").to_pylist())) == 50 and table.num_rows > 100
    assert "50 rows ->" in (workdir / "logs/corpora/bartl2020/gap-flipped.log").read_text()
