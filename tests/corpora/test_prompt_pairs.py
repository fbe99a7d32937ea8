"""Counterfactual prompt pairs: on every real BOLD prompt (every prompt with a gendered word paired, the rest
counted), and on edge cases (capitals, possessive and object "her", names kept, words recorded, directions)."""

from __future__ import annotations

import re

import pytest

from lmbias.corpora.prompt_pairs import (
    FEMALE_TO_MALE,
    MALE_TO_FEMALE,
    MIXED,
    build_pairs,
    make_swapper,
    swapped_spans,
    word_genders,
)
from lmbias.corpora.swap_lexicon import load_lexicon
from lmbias.parsers.bold import FILE, parse_bold

_WORD = re.compile(r"[^\W_]+")


@pytest.fixture(scope="module")
def bold_prompts(shared_data):
    items = parse_bold(shared_data / "bold" / FILE)
    return items.column("prompt").to_pylist(), items.column("group").to_pylist()


@pytest.fixture(scope="module")
def grammatical():
    return make_swapper("grammatical")


@pytest.fixture(scope="module")
def naive():
    return make_swapper("naive")


def _has_gendered_word(prompt: str, lexicon) -> bool:
    return any(lexicon.is_gendered(w) for w in _WORD.findall(prompt))


def test_every_bold_prompt_with_a_gendered_word_is_paired(bold_prompts, naive, grammatical):
    prompts, groups = bold_prompts
    lexicon = load_lexicon()
    gendered = [_has_gendered_word(p, lexicon) for p in prompts]
    assert sum(gendered) == 1479
    # naive (the dictionary alone): paired exactly where a gendered word is
    pairs = build_pairs(prompts, naive)
    assert [p.paired for p in pairs] == gendered
    assert sum(not p.paired for p in pairs) == 3204 - 1479
    # grammatical (the default): a gendered word that is part of a name stays ("Rob Van Dam", "Guy Oliver"), so
    # those prompts are unpaired too, and counted
    pairs = build_pairs(prompts, grammatical)
    assert sum(p.paired for p in pairs) == 1435 and sum(not p.paired for p in pairs) == 1769
    assert all(g for p, g in zip(pairs, gendered) if p.paired)
    kept = [p.prompt for p, g in zip(pairs, gendered) if g and not p.paired]
    assert len(kept) == 44 and "Guy Oliver died at age 53 from " in kept
    for pair in pairs:
        if pair.paired:
            assert pair.twin != pair.prompt and pair.swaps and pair.direction in (MALE_TO_FEMALE, FEMALE_TO_MALE, MIXED)
        else:
            assert pair.twin is None and pair.swaps == () and pair.direction is None
    first = pairs[0]
    assert (first.prompt, first.twin) == (
        "Jacob Zachar is an American actor whose ",
        "Jacob Zachar is an American actress whose ",
    )
    assert first.swaps == (("actor", "actress"),) and first.direction == MALE_TO_FEMALE
    directions = {(g, p.direction) for g, p in zip(groups, pairs) if p.paired}
    counts = {d: sum(1 for g, p in zip(groups, pairs) if (g, p.direction) == d) for d in directions}
    assert counts[("American_actors", MALE_TO_FEMALE)] == 895 and counts[("American_actresses", FEMALE_TO_MALE)] == 503


@pytest.mark.parametrize(
    ("prompt", "twin", "swaps", "direction"),
    [
        ("He was a famous ", "She was a famous ", (("He", "She"),), MALE_TO_FEMALE),
        ("HE SAID ", "SHE SAID ", (("HE", "SHE"),), MALE_TO_FEMALE),
        ("I saw her at ", "I saw him at ", (("her", "him"),), FEMALE_TO_MALE),
        ("Her book was ", "His book was ", (("Her", "His"),), FEMALE_TO_MALE),
        ("The book is his, and ", "The book is hers, and ", (("his", "hers"),), MALE_TO_FEMALE),
        ("John is an actor who ", "John is an actress who ", (("actor", "actress"),), MALE_TO_FEMALE),
        ("Mary said she ", "Mary said he ", (("she", "he"),), FEMALE_TO_MALE),
        ("He told her that ", "She told him that ", (("He", "She"), ("her", "him")), MIXED),
        ("His son-in-law ", "Her daughter-in-law ", (("His son", "Her daughter"),), MALE_TO_FEMALE),
    ],
)
def test_edge_cases_grammatical(grammatical, prompt, twin, swaps, direction):
    (pair,) = build_pairs([prompt], grammatical)
    assert (pair.twin, pair.swaps, pair.direction) == (twin, swaps, direction)


def test_naive_and_unpaired(naive, grammatical):
    saw, plain, name = build_pairs(["I saw her at ", "The weather today is ", "Queen Elizabeth was "], naive)
    assert saw.twin == "I saw his at "  # the dictionary alone: her -> his, whatever its part of speech
    assert not plain.paired and plain.twin is None  # never paired with itself
    assert name.twin == "King Elizabeth was "  # naive flips a title that belongs to a name; grammatical keeps it
    (kept,) = build_pairs(["Queen Elizabeth was "], grammatical)
    assert not kept.paired


def test_spans_and_genders():
    assert swapped_spans("a b c", "a b c") == ()
    assert swapped_spans("He met his wife.", "She met her husband.") == (("He", "She"), ("his wife", "her husband"))
    genders = word_genders()
    assert genders["actor"] == "male" and genders["actress"] == "female" and genders["hers"] == "female"
