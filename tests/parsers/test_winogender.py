"""WinoGender's parser on the real files: 720 sentences, the gotcha subset of 240, errors naming file and line."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from lmbias.errors import DataError
from lmbias.parsers.winogender import FILES, is_gotcha, majority_gender, parse_winogender


@pytest.fixture(scope="module")
def data(shared_data):
    return shared_data / "winogender"


@pytest.fixture(scope="module")
def items(data):
    return parse_winogender(*(data / f for f in FILES))


def test_real_data(items):
    rows = items.to_pylist()
    assert items.num_rows == 720
    assert Counter(r["gender"] for r in rows) == {"male": 240, "female": 240, "neutral": 240}
    assert len({r["occupation"] for r in rows}) == 60
    assert sum(r["participant"] == "someone" for r in rows) == 360
    first = rows[0]
    assert (first["sentid"], first["occupation"], first["participant"], first["answer"]) == (
        "technician.customer.1.male.txt",
        "technician",
        "customer",
        1,
    )
    assert (first["pronoun"], first["bls_pct_female"], first["bergsma_pct_female"]) == ("he", 40.34, 9.42)
    pronouns = {(r["gender"], r["pronoun_slot"], r["pronoun"]) for r in rows}
    assert ("female", "possessive", "her") in pronouns and ("neutral", "accusative", "them") in pronouns


def test_gotcha_subset_has_lm_evals_240_rows(items):
    rows = items.to_pylist()
    gotcha = [r for r in rows if r["gotcha"]]
    assert len(gotcha) == 240  # lm-eval's winogender_gotcha (the hub's gotcha config): 240 rows
    assert Counter(r["gender"] for r in gotcha) == {"male": 120, "female": 120}  # neutral: never
    assert sum(r["answer"] == 0 for r in gotcha) == 120  # Rudinger's / LLaMA's occupation-answer gotchas
    # technician: 40.34 % women (BLS) -> majority male; "he" with the participant as answer is a gotcha
    assert rows[0]["majority_gender"] == "male" and rows[0]["gotcha"]


def test_gotcha_rule():
    assert majority_gender(50.1) == "female" and majority_gender(49.9) == "male" and majority_gender(50) == "none"
    assert is_gotcha("female", 0, "male") and not is_gotcha("male", 0, "male")
    assert is_gotcha("male", 1, "male") and not is_gotcha("female", 1, "male")
    assert not is_gotcha("neutral", 0, "male") and not is_gotcha("female", 0, "none")


def _copy(data, tmp_path):
    for f in FILES:
        shutil.copy(data / f, tmp_path / f)
    return [tmp_path / f for f in FILES]


@pytest.mark.parametrize(
    "file, line, old, new, message",
    [
        ("all_sentences.tsv", 3, "technician.customer.1.female.txt", "technician.customer.1.fem.txt", "gender"),
        ("all_sentences.tsv", 2, "could pay with cash", "could pay in cash", "differs from its template"),
        ("templates.tsv", 2, "\t1\tThe $OCCUPATION", "\tx\tThe $OCCUPATION", "answer must be an integer"),
        ("occupations-stats.tsv", 2, "40.34", "forty", "bls_pct_female must be a number"),
    ],
)
def test_malformed_file_names_file_and_line(data, tmp_path, file, line, old, new, message):
    paths = _copy(data, tmp_path)
    target = tmp_path / file
    target.write_text(target.read_text().replace(old, new, 1))
    with pytest.raises(DataError, match=message) as error:
        parse_winogender(*paths)
    assert f"{file}:{line}:" in str(error.value)
