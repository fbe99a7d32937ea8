"""lmbias.corpora.counterfactual: the swap lexicon, the grammatical and naive interventions, names, the gold set.

The gold set (tests/gold/counterfactual_gold.tsv) was written by hand: each expected output is what the
documented grammatical intervention (names=False) should produce, whatever the system does. Run
`pytest -s tests/corpora/test_counterfactual.py -k gold` to see the per-case accuracy table.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from helpers.counterfactual_gold import format_table, gold_report, read_gold, word_tokens
from helpers.paths import REPO_ROOT
from lmbias.corpora.counterfactual import INTERVENTIONS, Swapper
from lmbias.corpora.nlp import load_spacy
from lmbias.corpora.swap_lexicon import PRONOUNS, SwapLexicon, load_lexicon
from lmbias.corpora.swap_rules import match_case
from lmbias.errors import ConfigError, DataError

WORDLISTS = REPO_ROOT / "resources" / "wordlists"


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def nlp():
    return load_spacy("en_core_web_sm")


@pytest.fixture(scope="session")
def lexicon(shared_data):
    return load_lexicon(cds_pairs=shared_data / "cds" / "cda_default_pairs.json", winobias_dir=shared_data / "winobias")


@pytest.fixture(scope="session")
def names_lexicon(shared_data):
    return load_lexicon(
        cds_pairs=shared_data / "cds" / "cda_default_pairs.json",
        winobias_dir=shared_data / "winobias",
        names=shared_data / "cds" / "names_pairs_1000_scaled.json",
    )


@pytest.fixture(scope="session")
def grammatical(lexicon, nlp):
    return Swapper(lexicon, "grammatical", nlp=nlp)


@pytest.fixture(scope="session")
def naive(lexicon):
    return Swapper(lexicon, "naive")


@pytest.fixture(scope="session")
def with_names(names_lexicon, nlp):
    return Swapper(names_lexicon, "grammatical", names=True, nlp=nlp)


def winobias_dev_sentences(folder: Path) -> list[str]:
    out = []
    for path in sorted(folder.glob("*.txt.dev")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(line.split(" ", 1)[1].replace("[", "").replace("]", ""))
    return out


# ------------------------------------------------------------------------------------------ lexicon


def test_interventions():
    assert INTERVENTIONS == ("grammatical", "naive")


def test_lu_list_transcription_matches_the_published_pair_list(shared_data):
    """resources/wordlists/lu2018_gender_pairs.tsv (from the paper text) == cda_default_pairs.json."""
    ours = []
    for line in (WORDLISTS / "lu2018_gender_pairs.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            ours.append(tuple(line.split("\t")))
    published = [tuple(p) for p in json.loads((shared_data / "cds" / "cda_default_pairs.json").read_text())]
    assert len(ours) == len(set(ours)) == 124
    assert set(ours) == set(published)


def test_lexicon_has_both_directions_and_plurals(lexicon):
    pairs = lexicon.word_pairs
    for a, b in [
        ("king", "queen"),
        ("kings", "queens"),
        ("actor", "actress"),
        ("actors", "actresses"),
        ("son-in-law", "daughter-in-law"),
        ("mr.", "mrs."),
        ("spokesman", "spokeswoman"),
    ]:
        assert pairs[a] == b and pairs[b] == a, (a, b)
    assert all(k == k.lower() and v == v.lower() for k, v in pairs.items())
    assert not PRONOUNS & set(pairs), "pronouns are decided by rules, never by the dictionary"
    # WinoBias's stray spaces ("actor \t actress ") are stripped
    assert not any(k != k.strip() or v != v.strip() for k, v in pairs.items())


def test_lexicon_conflicts_are_first_wins_deterministic_and_logged(shared_data, caplog):
    with caplog.at_level(logging.DEBUG, logger="lmbias.corpora.swap_lexicon"):
        a = load_lexicon(
            cds_pairs=shared_data / "cds" / "cda_default_pairs.json", winobias_dir=shared_data / "winobias"
        )
    b = load_lexicon(cds_pairs=shared_data / "cds" / "cda_default_pairs.json", winobias_dir=shared_data / "winobias")
    assert a.word_pairs == b.word_pairs and a.conflicts == b.conflicts
    # generalized_swaps.txt maps "chairwomen -> chairman" (sic); Lu et al.'s "chairmen - chairwomen" wins
    assert a.word_pairs["chairwomen"] == "chairmen"
    assert any("chairwomen -> chairman" in c for c in a.conflicts)
    # extra_gendered_words.txt's "priest -> nun" loses to Lu et al.'s "priest - priestess"
    assert a.word_pairs["priest"] == "priestess"
    assert "conflicting entries resolved" in caplog.text and "chairwomen -> chairman" in caplog.text


def test_lexicon_conflict_in_own_files(tmp_path):
    words = tmp_path / "words"
    words.mkdir()
    (words / "lu2018_gender_pairs.tsv").write_text("# header\nking\tqueen\n", encoding="utf-8")
    (words / "zz_extra.tsv").write_text("king\tempress\nlord\tqueen\n", encoding="utf-8")
    lex = load_lexicon(wordlist_dir=words)
    # the free reverse directions are added (empress -> king); the taken ones are conflicts, first wins
    assert lex.word_pairs == {"king": "queen", "queen": "king", "empress": "king", "lord": "queen"}
    assert len(lex.conflicts) == 2
    assert "zz_extra.tsv:1: king -> empress (listed; kept king -> queen)" in lex.conflicts[0]
    assert "zz_extra.tsv:2: queen -> lord (reverse; kept queen -> king)" in lex.conflicts[1]
    assert lex.is_involution("king") and not lex.is_involution("lord")


@pytest.mark.parametrize(
    "content, line",
    [("actor\tactress\nbroken line without tab\n", 2), ("# c\n\nwaiter\twaitress\textra\n", 3), ("boy\t  \n", 1)],
)
def test_malformed_winobias_line_names_file_and_line(tmp_path, content, line):
    (tmp_path / "generalized_swaps.txt").write_text(content, encoding="utf-8")
    (tmp_path / "extra_gendered_words.txt").write_text("cowboy\tcowgirl\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"generalized_swaps\.txt:{line}: "):
        load_lexicon(winobias_dir=tmp_path)


def test_malformed_json_pairs(tmp_path):
    bad = tmp_path / "pairs.json"
    bad.write_text('[["king", "queen"], ["lonely"]]', encoding="utf-8")
    with pytest.raises(DataError, match=r"pairs\.json:1: entry 1 is not a \[word, partner\] pair"):
        load_lexicon(cds_pairs=bad)
    bad.write_text('[["king", "queen"],\n ["a", ]]', encoding="utf-8")
    with pytest.raises(DataError, match=r"pairs\.json:2: invalid JSON"):
        load_lexicon(cds_pairs=bad)
    with pytest.raises(DataError, match="not found"):
        load_lexicon(winobias_dir=tmp_path)


def test_swapper_rejects_bad_configuration(lexicon):
    with pytest.raises(ConfigError, match="intervention"):
        Swapper(lexicon, "clever")
    with pytest.raises(ConfigError, match="names"):
        Swapper(lexicon, "naive", names=True)  # lexicon without name pairs


# ------------------------------------------------------------------------------------------ rules


def test_match_case():
    assert [match_case(w, "she") for w in ("he", "He", "HE")] == ["she", "She", "SHE"]
    assert match_case("Son-In-Law", "daughter-in-law") == "Daughter-In-Law"
    assert match_case("Son-in-law", "daughter-in-law") == "Daughter-in-law"


def test_naive_and_grammatical_differ_on_object_her(naive, grammatical):
    assert naive.swap_text("I saw her.") == "I saw his."  # the baseline's documented error
    assert grammatical.swap_text("I saw her.") == "I saw him."
    assert naive.swap_text("I saw her dog.") == grammatical.swap_text("I saw her dog.") == "I saw his dog."


def test_pronoun_rules(grammatical):
    cases = {
        "He saw her dog and gave her a bone.": "She saw his dog and gave him a bone.",
        "The book is his, and the pen is hers.": "The book is hers, and the pen is his.",
        "She hurt herself; he hurt himself.": "He hurt himself; she hurt herself.",
        "HE TOLD HER TO GO.": "SHE TOLD HIM TO GO.",
    }
    for original, expected in cases.items():
        assert grammatical.swap_text(original) == expected


def test_whitespace_and_punctuation_are_kept_exactly(grammatical, naive):
    text = "  He\tsaid:\n\n“She’s  here…”   (his\u00a0mother)  \r\n"
    expected = "  She\tsaid:\n\n“He’s  here…”   (her\u00a0father)  \r\n"
    assert grammatical.swap_text(text) == expected
    assert naive.swap_text(text) == expected
    assert grammatical.swap_text("") == "" and grammatical.swap_text("   ") == "   "


def test_verbs_are_not_flipped_by_grammatical_only(grammatical, naive):
    assert grammatical.swap_text("They will man the station.") == "They will man the station."
    assert naive.swap_text("They will man the station.") == "They will woman the station."
    assert grammatical.swap_text("I miss you.") == naive.swap_text("I miss you.") == "I miss you."


def test_proper_names_keep_their_titles_unless_names_are_swapped(grammatical, with_names, naive):
    text = "Queen Elizabeth walked down Prince Street to King's College with the king."
    assert grammatical.swap_text(text) == "Queen Elizabeth walked down Prince Street to King's College with the queen."
    # names=True: the name is swapped, so its title follows; place and institution names stay
    assert with_names.swap_text(text) == "King William walked down Prince Street to King's College with the queen."
    # naive: no POS, no entities
    assert naive.swap_text(text) == "King Elizabeth walked down Princess Street to Queen's College with the queen."


def test_courtesy_titles_flip_with_and_without_names(grammatical, with_names):
    text = "Mr. Smith said he would call Mrs. Jones."
    assert grammatical.swap_text(text) == "Mrs. Smith said she would call Mr. Jones."
    assert with_names.swap_text(text) == "Mrs. Smith said she would call Mr. Jones."  # surnames are kept


def test_names_are_swapped_consistently_within_a_document(with_names):
    texts = [
        "John met Mary in Paris.",
        "Later John called her.",
        "Elizabeth Taylor arrived.",
        "Taylor smiled.",
        "John left.",
    ]
    out = with_names.swap_texts(texts, doc_ids=["a", "a", "a", "a", "b"])
    assert out[0] == "Mary met John in Paris."
    assert out[1] == "Later Mary called him."
    # "Taylor" is a surname somewhere in document a, so it is never swapped there
    assert out[2] == "William Taylor arrived." and out[3] == "Taylor smiled."
    assert out[4] == "Mary left."


def test_swap_tokens_with_gold_tags_and_conll_ner(grammatical, naive):
    words = ["I", "saw", "her", "mother", "and", "gave", "her", "flowers", "."]
    gold = ["PRP", "VBD", "PRP$", "NN", "CC", "VBD", "PRP", "NNS", "."]
    assert grammatical.swap_tokens(words, gold) == ["I", "saw", "his", "father", "and", "gave", "him", "flowers", "."]
    # without tags a grammatical swapper tags the tokens itself; a naive one uses the naive rules
    assert grammatical.swap_tokens(["I", "saw", "her", "."]) == ["I", "saw", "him", "."]
    assert grammatical.swap_tokens(["I", "saw", "her", "."], ["-", "-", "-", "-"]) == ["I", "saw", "him", "."]
    assert naive.swap_tokens(["I", "saw", "her", "."]) == ["I", "saw", "his", "."]
    # the token count is kept, also for split compounds
    assert naive.swap_tokens(["my", "son", "-", "in", "-", "law"]) == ["my", "daughter", "-", "in", "-", "law"]
    # CoNLL-2012 NER brackets: a title inside a PERSON entity is kept
    words = ["Queen", "Elizabeth", "thanked", "the", "king", "."]
    tags = ["NNP", "NNP", "VBD", "DT", "NN", "."]
    assert grammatical.swap_tokens(words, tags, ["(PERSON*", "*)", "*", "*", "*", "*"]) == [
        "Queen",
        "Elizabeth",
        "thanked",
        "the",
        "queen",
        ".",
    ]
    # protect: Lu et al.'s "no flip in a cluster with a proper noun" when gold coreference is known
    words = ["Queen", "Elizabeth", "said", "she", "was", "tired", "."]
    tags = ["NNP", "NNP", "VBD", "PRP", "VBD", "JJ", "."]
    assert grammatical.swap_tokens(words, tags, protect=[3]) == words
    assert grammatical.swap_tokens(words, tags)[3] == "he"


def test_stats_count_changes(lexicon):
    s = Swapper(lexicon, "naive")
    s.swap_texts(["He left.", "Nothing here.", "The king and his son."])
    assert s.changed_count == 2 and s.stats.texts == 3
    assert s.stats.pronouns == 2 and s.stats.words == 2


# ------------------------------------------------------------------------------------------ gold set


def test_gold_set_accuracy(grammatical):
    rows = read_gold()
    assert len(rows) >= 200
    assert {
        "her_object",
        "her_possessive",
        "his_predicative",
        "hers",
        "reflexive",
        "all_caps",
        "proper_name",
        "plural",
        "possessive_s",
        "quotes",
        "no_swap",
    } <= {r["case"] for r in rows}
    outputs = grammatical.swap_texts([r["original"] for r in rows])
    per_case, failures = gold_report(rows, outputs)
    table = format_table(per_case)
    report = f"gold set, grammatical intervention (names=False)\n{table}\nfailures ({len(failures)}):\n" + "\n".join(
        failures
    )
    print("\n" + report)
    pronouns = sum(c["pronouns"] for c in per_case.values())
    pronoun_acc = sum(c["pronouns_ok"] for c in per_case.values()) / pronouns
    exact = sum(c["exact"] for c in per_case.values()) / len(rows)
    assert pronouns >= 250
    assert pronoun_acc >= 0.97, report
    assert exact >= 0.95, report
    # sentences with nothing to swap come back byte-identical
    assert per_case["no_swap"]["exact"] == per_case["no_swap"]["sentences"], report


def test_gold_report_can_fail():
    """The metric itself: a swapper that leaves everything alone scores 0 on pronouns."""
    rows = [r for r in read_gold() if r["case"] == "her_object"]
    per_case, failures = gold_report(rows, [r["original"] for r in rows])
    assert per_case["her_object"]["pronouns_ok"] == 0 and len(failures) == len(rows)


# ------------------------------------------------------------------------------------------ property


def one_to_one(text: str, lexicon: SwapLexicon) -> bool:
    """True when every gendered word of `text` has a partner whose partner is the word (no her/his/him/hers)."""
    for tok in word_tokens(text):
        low = re.split(r"['’]", tok.lower())[0]
        if low in PRONOUNS or low in lexicon.word_pairs or tok.lower() in lexicon.word_pairs:
            if not lexicon.is_involution(low):
                return False
    # multi-token dictionary entries (son-in-law) and "ma'am" style words
    for key in lexicon.word_pairs:
        if not key.isalnum() and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text.lower()):
            if not lexicon.is_involution(key):
                return False
    return True


def test_swapping_twice_returns_the_original(grammatical, lexicon, shared_data):
    """swap(swap(s)) == s for every sentence whose gendered words all map one-to-one.

    Gold sentences whose first swap is already wrong (a tagger error such as "They usher[VERB->JJ] guests")
    are left out here: the gold test counts them; this test checks that correct swaps come back.
    """
    rows = read_gold()
    first = grammatical.swap_texts([r["original"] for r in rows])
    gold = [r["original"] for r, out in zip(rows, first) if out == r["expected"]]
    assert len(gold) >= 0.95 * len(rows), f"only {len(gold)} of {len(rows)} gold sentences swap correctly"
    wino = winobias_dev_sentences(shared_data / "winobias")
    assert len(wino) == 1584
    candidates = [t for t in gold + wino if one_to_one(t, lexicon)]
    assert len(candidates) >= 700, len(candidates)
    once = grammatical.swap_texts(candidates)
    twice = grammatical.swap_texts(once)
    changed = sum(a != b for a, b in zip(candidates, once))
    assert changed >= 600, "the property must be exercised on sentences that do change"
    bad = [f"{a!r} -> {b!r} -> {c!r}" for a, b, c in zip(candidates, once, twice) if a != c]
    assert not bad, f"{len(bad)} of {len(candidates)} sentences do not come back:\n" + "\n".join(bad[:30])


def test_naive_swapping_twice_returns_the_original(naive, lexicon, shared_data):
    wino = winobias_dev_sentences(shared_data / "winobias")
    candidates = [t for t in wino if one_to_one(t, lexicon)]
    assert naive.swap_texts(naive.swap_texts(candidates)) == candidates


def test_one_to_one_filter_excludes_ambiguous_words(lexicon):
    assert one_to_one("He said she was right.", lexicon)
    assert not one_to_one("He saw her.", lexicon)
    assert one_to_one("The lady left.", lexicon)  # lady -> gentleman -> lady
    assert not one_to_one("The mommy left.", lexicon)  # mommy -> daddy -> mummy


def test_named_word_lists_choose_the_lexicon(shared_data):
    """corpora `wordlist`: lu2018 = Lu et al.'s 124 pairs only; winobias = Zhao et al.'s lists only (read from the
    data folder at run time); merged = every list. A word only WinoBias lists must not swap under lu2018."""
    from lmbias.corpora.jobs import lexicon_inputs, lexicon_kwargs

    def lexicon(name):
        files = {
            k: str(shared_data / Path(v).relative_to("resources/data"))
            if v.startswith("resources/data/")
            else str(WORDLISTS.parent.parent / v)
            for k, v in lexicon_inputs(False, name).items()
        }
        return load_lexicon(**lexicon_kwargs(files))

    lu, wino, merged = lexicon("lu2018"), lexicon("winobias"), lexicon("merged")
    assert [Path(s).name for s in lu.sources] == ["lu2018_gender_pairs.tsv"]
    assert [Path(s).name for s in wino.sources] == ["generalized_swaps.txt", "extra_gendered_words.txt"]
    assert set(lu.word_pairs) | set(wino.word_pairs) <= set(merged.word_pairs)
    only_wino = sorted(set(wino.word_pairs) - set(lu.word_pairs))
    assert only_wino, "the WinoBias lists add words to Lu et al.'s"
    assert len(merged.word_pairs) > max(len(lu.word_pairs), len(wino.word_pairs))
