"""The `lmbias counterfactual` command, run as a subprocess the way users run it."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(args, stdin: bytes, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmbias.cli", *args], input=stdin, capture_output=True, timeout=timeout
    )


def test_naive_keeps_line_count_and_empty_lines(repo_root):
    lines = ["I saw her.", "", "He is here.", "   ", "The king and his sons", "Nothing to swap."]
    stdin = ("\n".join(lines) + "\n").encode("utf-8")
    script = repo_root / ".venv" / "bin" / "lmbias"
    if script.exists():  # the installed console script (pyproject: lmbias = "lmbias.cli:main")
        proc = subprocess.run(
            [str(script), "counterfactual", "--intervention", "naive"], input=stdin, capture_output=True, timeout=120
        )
    else:
        proc = run(["counterfactual", "--intervention", "naive"], stdin)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[:-1] == ["I saw his.", "", "She is here.", "   ", "The queen and her daughters", "Nothing to swap."]


def test_grammatical_with_names_and_shared_lists(shared_data):
    stdin = b"I saw her.\n\nJohn told Mary that the book was his.\r\nQueen Elizabeth visited Prince Street"
    proc = run(
        [
            "counterfactual",
            "--intervention",
            "grammatical",
            "--names",
            "--cds-pairs",
            str(shared_data / "cds" / "cda_default_pairs.json"),
            "--winobias-dir",
            str(shared_data / "winobias"),
            "--names-file",
            str(shared_data / "cds" / "names_pairs_1000_scaled.json"),
        ],
        stdin,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    # same lines, same endings (CRLF kept, no newline added at the end)
    assert proc.stdout.decode() == (
        "I saw him.\n\nMary told John that the book was hers.\r\nKing William visited Prince Street"
    )


def test_non_utf8_input_exits_2_naming_the_line():
    proc = run(["counterfactual", "--intervention", "naive"], b"He left.\nfine\nbad \xff\xfe byte\n")
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "line 3" in err and "UTF-8" in err
    assert proc.stdout == b"", "nothing is written when the input is unreadable"


def test_usage_errors_exit_2():
    proc = run(["counterfactual", "--names"], b"He left.\n")
    assert proc.returncode == 2 and b"--names-file" in proc.stderr
    proc = run(["counterfactual", "--intervention", "clever"], b"")
    assert proc.returncode == 2 and b"invalid choice" in proc.stderr
    proc = run([], b"")
    assert proc.returncode == 2


def test_bad_word_list_exits_2_naming_file_and_line(tmp_path):
    (tmp_path / "generalized_swaps.txt").write_text("actor\tactress\nno tab here\n", encoding="utf-8")
    (tmp_path / "extra_gendered_words.txt").write_text("", encoding="utf-8")
    proc = run(["counterfactual", "--intervention", "naive", "--winobias-dir", str(tmp_path)], b"He left.\n")
    assert proc.returncode == 2
    assert "generalized_swaps.txt:2" in proc.stderr.decode()


def test_help_documents_empty_lines():
    proc = run(["counterfactual", "--help"], b"")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.decode().split())
    assert "Empty and whitespace-only lines pass through" in text and "exit status 2" in text


@pytest.mark.parametrize("stdin", [b"", b"\n", b"\n\n\n", b" \n\t\r\n"])
def test_empty_inputs(stdin):
    proc = run(["counterfactual", "--intervention", "grammatical"], stdin)
    assert proc.returncode == 0 and proc.stdout == stdin
