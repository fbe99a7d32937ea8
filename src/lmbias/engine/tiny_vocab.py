"""The tiny models' vocabulary: the project's word list, ``resources/vocab/tiny_words.txt``.

Every pronoun, gendered word, name and profession of the benchmarks is a word of the list, so that the tiny
models' tokenizers (lmbias.engine.tiny) make each one a single token. derive_word_list is how the list was made
from the benchmark data (``python -m lmbias.engine.tiny derive-words``); load_word_list reads it back.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from lmbias.errors import DataError

#: Default word list: resources/vocab/tiny_words.txt of this repository (the package is installed editable).
DEFAULT_WORDS = Path(__file__).resolve().parents[3] / "resources" / "vocab" / "tiny_words.txt"


def load_word_list(path: str | os.PathLike | None = None) -> list[str]:
    """Read a word list: one word per line, ``#`` lines and blank lines ignored.

    A word with whitespace or a repeated word is a DataError naming file and line.
    """
    path = Path(path) if path is not None else DEFAULT_WORDS
    if not path.is_file():
        raise DataError("word list not found", path)
    words: list[str] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            word = line.strip()
            if any(ch.isspace() for ch in word):
                raise DataError(f"a word may not contain whitespace: {word!r}", path, lineno)
            if word in seen:
                raise DataError(f"{word!r} repeats line {seen[word]}", path, lineno)
            seen[word] = lineno
            words.append(word)
    if not words:
        raise DataError("word list is empty", path)
    return words


#: Project-authored core vocabulary (lower case; the word list also holds each one Capitalised).
CORE_WORDS: tuple[str, ...] = tuple(
    """
    he she him her his hers himself herself they them their theirs themselves themself it its itself
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    someone somebody anyone anybody everyone everybody nobody person people who whom whose
    man woman men women boy girl boys girls father mother fathers mothers son daughter sons daughters
    brother sister brothers sisters husband wife husbands wives uncle aunt uncles aunts nephew niece
    nephews nieces grandfather grandmother grandson granddaughter grandpa grandma king queen kings queens
    prince princess lord lady gentleman gentlemen ladies sir madam mr mrs ms miss male female males
    females masculine feminine boyfriend girlfriend groom bride dad mom mum daddy mommy papa mama guy
    guys gal lad lass actor actress waiter waitress host hostess hero heroine steward stewardess
    chairman chairwoman spokesman spokeswoman businessman businesswoman policeman policewoman fireman
    salesman saleswoman congressman congresswoman monk nun priest priestess god goddess emperor empress
    duke duchess widower widow bachelor fiance fiancee paternal maternal patriarch matriarch
    masculinity femininity manhood womanhood brotherhood sisterhood gender sex
    alice bob carol dave eve frank grace henry james john mary patricia robert jennifer michael linda
    william elizabeth david barbara richard susan joseph jessica thomas sarah charles karen paul lisa
    mike amy kevin donna steve diana greg kate jeff ann bill joan emily emma olivia sophia noah liam
    doctor nurse engineer teacher lawyer scientist programmer homemaker secretary surgeon pilot
    professor student manager assistant receptionist librarian hairdresser mechanic carpenter
    """.split()
)

_WORD_RE = re.compile(r"[^\W\d_]+")


def _words_in(text: str) -> list[str]:
    return _WORD_RE.findall(text)


def _benchmark_texts(data_dir: Path):
    """Yield the benchmark texts the tiny vocabulary must cover, read in place (never copied).

    Every file goes through the project's reader for it, never a second reading of its raw format: the dataset
    parsers (lmbias.parsers; the WinoBias occupation lists through the WinoBias parser's read_occupations) and,
    for the WinoBias swap lists, which no parser reads, the swap lexicon's reader
    (lmbias.corpora.swap_lexicon.read_tsv_pairs). A missing file is a DataError naming it.
    """
    # imported here: building a tiny model (load_word_list) does not need the parsers
    from lmbias.corpora.swap_lexicon import WINOBIAS_FILES as WINOBIAS_SWAP_FILES
    from lmbias.corpora.swap_lexicon import read_tsv_pairs
    from lmbias.parsers import parse_bec_pro, parse_crows_pairs, parse_seat, parse_winobias
    from lmbias.parsers.bec_pro import FILES as BEC_PRO_FILES
    from lmbias.parsers.crows_pairs import FILE as CROWS_PAIRS_FILE
    from lmbias.parsers.seat import SUFFIX as SEAT_SUFFIX
    from lmbias.parsers.winobias import OCCUPATION_FILES, read_occupations, winobias_files

    wino = data_dir / "winobias"
    sentences = parse_winobias({name: wino / name for name in winobias_files("dev")}, split="dev")
    yield from sentences.column("sentence").to_pylist()
    for name in OCCUPATION_FILES:
        yield from read_occupations(wino / name)
    for name in WINOBIAS_SWAP_FILES:  # the reader lower-cases; the upstream lists are lower-case
        for word, partner, _ in read_tsv_pairs(wino / name):
            yield f"{word} {partner}"
    # BEC-Pro's professions_US_DE.tsv is not read: no parser reads it, and each of its words (English and German
    # professions) is a word of the BEC-Pro rows below, so the list is the same without it.
    for language, name in BEC_PRO_FILES.items():
        rows = parse_bec_pro(data_dir / "bec_pro" / name, language)
        columns = (rows.column(c).to_pylist() for c in ("sentence", "person", "profession"))
        for sentence, person, profession in zip(*columns):
            yield f"{sentence} {person} {profession}"
    yield from parse_seat(sorted((data_dir / "seat").glob(f"*{SEAT_SUFFIX}"))).column("text").to_pylist()
    pairs = parse_crows_pairs(data_dir / "crows_pairs" / CROWS_PAIRS_FILE, bias_types=["gender"])
    for more, less in zip(pairs.column("sent_more").to_pylist(), pairs.column("sent_less").to_pylist()):
        yield f"{more} {less}"


def _gap_texts(data_dir: Path):
    """The Text of every GAP row (development, validation and test), from the GAP parser's table."""
    from lmbias.parsers.gap import SPLITS, gap_file, parse_gap

    rows = parse_gap({split: data_dir / "gap" / gap_file(split) for split in SPLITS})
    yield from rows.column("text").to_pylist()


def _forms(word: str) -> list[str]:
    return sorted({word, word.lower()})


def derive_word_list(data_dir: str | os.PathLike, max_words: int = 6000, gap: bool = True) -> list[str]:
    """Derive the tiny-model word list (how resources/vocab/tiny_words.txt was made).

    1. CORE_WORDS, each lower-case and Capitalised (always kept);
    2. every word (regex ``[^\\W\\d_]+``, frequency >= 1) of the WinoBias dev sentences, occupation lists and
       swap lists, BEC-Pro EN/DE sentences, persons and professions, SEAT examples and CrowS-Pairs gender rows,
       each as seen and lower-cased (most frequent first if they exceed ``max_words``);
    3. when ``gap``: the most frequent GAP words (same forms) until ``max_words`` forms.
    The texts are those of the parsed tables (lmbias.parsers' parse_winobias, parse_bec_pro, parse_seat,
    parse_crows_pairs and parse_gap, called on ``data_dir``'s files), the occupation lists as the WinoBias parser
    reads them and the swap lists as the swap lexicon does: no raw file is read here a second way.
    The result is sorted by code point.
    """
    data_dir = Path(data_dir)
    chosen: set[str] = set()
    for word in CORE_WORDS:
        chosen.update({word, word[:1].upper() + word[1:]})

    def add_by_frequency(texts):
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(_words_in(text))
        for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            forms = [f for f in _forms(word) if f not in chosen]
            if len(chosen) + len(forms) > max_words:
                break
            chosen.update(forms)

    add_by_frequency(_benchmark_texts(data_dir))
    if gap:
        add_by_frequency(_gap_texts(data_dir))
    return sorted(chosen)


def write_word_list(words: list[str], path: str | os.PathLike, header: list[str] | tuple[str, ...] = ()) -> Path:
    """Write a word list (``#`` header lines, then one word per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {line}\n" for line in header) + "".join(f"{w}\n" for w in words)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


WORD_LIST_HEADER = (
    "lmbias tiny-model vocabulary: one word form per line, sorted by code point; lines starting with # are ignored.",
    "Project-authored. Made by `python -m lmbias.engine.tiny derive-words --data-dir ../shared/data --out <this file>`",
    "(lmbias.engine.tiny_vocab.derive_word_list): lmbias.engine.tiny_vocab.CORE_WORDS "
    "(pronouns, gendered word pairs, names, professions;",
    "lower-case and Capitalised) plus every word (regex [^\\W\\d_]+, frequency >= 1) of the WinoBias dev sentences",
    "and occupation/swap lists, BEC-Pro EN/DE sentences and professions, SEAT examples and CrowS-Pairs gender rows,",
    "then the most frequent GAP words, up to 6000 forms; each word as seen and lower-cased. No data file is copied.",
)
