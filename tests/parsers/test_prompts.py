"""The prompt file parser (dataset `prompts`): text and JSON-lines files, errors that name the file and line, the
file choice among configured ones, and the parser registry."""

from __future__ import annotations

import pytest

from lmbias.errors import ConfigError, DataError
from lmbias.parsers import parse_benchmark, required_files
from lmbias.parsers.prompts import parse_prompts


def test_text_file_one_prompt_per_line(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_bytes(b"\xef\xbb\xbfHe said that \r\nThe actress was\n\n")  # BOM, CRLF, trailing blank lines
    table = parse_prompts(path)
    assert table.to_pylist() == [
        {"prompt_id": 0, "line": 1, "group": None, "prompt": "He said that "},  # trailing space kept
        {"prompt_id": 1, "line": 2, "group": None, "prompt": "The actress was"},
    ]


def test_jsonl_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "She works as a ", "group": "jobs", "id": 7}\n{"prompt": "The weather is "}\n')
    table = parse_prompts(path)
    assert table.column("prompt").to_pylist() == ["She works as a ", "The weather is "]
    assert table.column("group").to_pylist() == ["jobs", None]


@pytest.mark.parametrize(
    ("name", "content", "line", "message"),
    [
        ("p.txt", "first\n\nthird\n", 2, "blank line"),
        ("p.txt", "first\n   \nthird\n", 2, "blank line"),
        ("p.jsonl", '{"prompt": "a"}\n{"prompt": "b"\n', 2, "invalid JSON"),
        ("p.jsonl", '{"prompt": "a"}\n["b"]\n', 2, "expected a JSON object"),
        ("p.jsonl", '{"text": "a"}\n', 1, 'non-empty string "prompt"'),
        ("p.jsonl", '{"prompt": "  "}\n', 1, 'non-empty string "prompt"'),
        ("p.jsonl", '{"prompt": 3}\n', 1, 'non-empty string "prompt"'),
        ("p.jsonl", '{"prompt": "a", "group": 1}\n', 1, '"group" must be a string'),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, name, content, line, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError, match=message) as caught:
        parse_prompts(path)
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_empty_and_undecodable_files(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="file is empty"):
        parse_prompts(empty)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(DataError, match="not valid UTF-8") as caught:
        parse_prompts(latin)
    assert str(caught.value).startswith(f"{latin}:2: ")


def test_which_file_and_the_registry(tmp_path):
    one = {"prompts": {"path": str(tmp_path), "files": {"mine.txt": {"upstream": None, "sha256": "0" * 64}}}}
    entry = {"dataset": "prompts", "measure": "counterfactual_pairs"}
    assert required_files(entry, one, "cf") == ["mine.txt"]
    two = {"prompts": {"path": str(tmp_path), "files": {"a.txt": {}, "b.jsonl": {}}}}
    with pytest.raises(ConfigError, match=r"benchmarks\.cf\.file: data\.prompts\.files holds 2 files"):
        required_files(entry, two, "cf")
    assert required_files({**entry, "file": "b.jsonl"}, two, "cf") == ["b.jsonl"]
    with pytest.raises(ConfigError, match=r"benchmarks\.cf\.file: 'c\.txt' is not a file"):
        required_files({**entry, "file": "c.txt"}, two, "cf")
    with pytest.raises(ConfigError, match=r"benchmarks\.cf\.lines: unknown option"):
        required_files({**entry, "lines": 3}, two, "cf")
    path = tmp_path / "mine.txt"
    path.write_text("He was\nShe is\n")
    table = parse_benchmark(entry, {"mine.txt": path}, "cf")
    assert table.num_rows == 2 and table.schema.metadata[b"lmbias.dataset"] == b"prompts"
