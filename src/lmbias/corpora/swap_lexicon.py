"""The swap lexicon of the counterfactual interventions (lmbias.corpora.counterfactual): gendered word partners
and name partners, read from the project's word lists and the published pair files.

The dictionary (``SwapLexicon``) merges, in this priority order, resources/wordlists/ (Lu et al.'s list
as printed in the paper, then the project's own extra pairs), the CDS pair list, WinoBias's
generalized_swaps.txt and extra_gendered_words.txt, and (separately) the CDS name pairs. Within a
source the listed direction is entered before the reverse one; a word that already has a partner keeps
it (first wins) and the conflict is recorded in ``SwapLexicon.conflicts`` and logged.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from lmbias.errors import ConfigError, DataError

log = logging.getLogger(__name__)

WORDLIST_DIR = Path(__file__).resolve().parents[3] / "resources" / "wordlists"
PRIMARY_WORDLIST = "lu2018_gender_pairs.tsv"
WINOBIAS_FILES = ("generalized_swaps.txt", "extra_gendered_words.txt")

#: Gendered pronouns: swapped by rules, never by the dictionary (source lists' entries for them are ignored).
PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})
#: Pronouns whose partner does not depend on grammar.
FIXED_PRONOUNS = {"he": "she", "she": "he", "him": "her", "hers": "his", "himself": "herself", "herself": "himself"}


@dataclass
class SwapLexicon:
    """Gendered word partners, lower-case, both directions (incl. plurals); names separately.

    ``word_pairs`` never contains the pronouns (see PRONOUNS); ``conflicts`` lists the entries that lost to
    an earlier partner ("source:line: word -> new (kept old)").
    """

    word_pairs: dict[str, str] = field(default_factory=dict)
    name_pairs: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def is_involution(self, word: str) -> bool:
        """True when swapping `word` twice gives it back (the partner's partner is the word)."""
        w = word.lower()
        for table in (self.word_pairs, self.name_pairs):
            if w in table:
                return table.get(table[w]) == w
        if w in PRONOUNS:  # he/she, himself/herself only: him/her/his/hers are many-to-many
            return w in FIXED_PRONOUNS and FIXED_PRONOUNS.get(FIXED_PRONOUNS[w]) == w
        return True

    def is_gendered(self, word: str) -> bool:
        w = word.lower()
        return w in PRONOUNS or w in self.word_pairs


def read_tsv_pairs(path: Path, *, sep: str | None = "\t") -> list[tuple[str, str, int]]:
    """(word, partner, line) from a two-column file; '#' comments and blank lines skipped."""
    pairs = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DataError(f"not valid UTF-8 ({exc.reason})", path, line) from exc
    except OSError as exc:
        raise DataError(f"cannot read word list: {exc.strerror}", path) from exc
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = raw.split(sep)
        if len(parts) != 2:
            raise DataError(
                f"expected 2 tab-separated columns (word, partner), got {len(parts)}: {raw!r}", path, lineno
            )
        a, b = (p.strip().lower() for p in parts)
        if not a or not b or any(ch.isspace() for ch in a + b):
            raise DataError(f"empty word or a word with inner whitespace: {raw!r}", path, lineno)
        pairs.append((a, b, lineno))
    return pairs


def read_json_pairs(path: Path) -> list[tuple[str, str, int]]:
    """(word, partner, line) from a JSON array of [masculine, feminine] string pairs."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise DataError(f"not valid UTF-8 ({exc.reason})", path) from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from exc
    except OSError as exc:
        raise DataError(f"cannot read pair list: {exc.strerror}", path) from exc
    if not isinstance(data, list):
        raise DataError(f"expected a JSON array of [word, partner] pairs, got {type(data).__name__}", path, 1)
    pairs = []
    for index, item in enumerate(data):
        ok = isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) and x.strip() for x in item)
        if not ok:
            # the upstream files are one line long: name the entry as well as the line
            line = text[: text.find(json.dumps(item)) if json.dumps(item) in text else 0].count("\n") + 1
            raise DataError(f"entry {index} is not a [word, partner] pair of non-empty strings: {item!r}", path, line)
        a, b = (x.strip().lower() for x in item)
        if any(ch.isspace() for ch in a + b):
            raise DataError(f"entry {index} has a word with inner whitespace: {item!r}", path, 1)
        pairs.append((a, b, 1))
    return pairs


def _merge(
    table: dict[str, str], pairs: list[tuple[str, str, int]], source: str, conflicts: list[str], *, skip_pronouns: bool
) -> int:
    """Enter listed directions first, then reverse ones; first partner wins. Returns entries added."""
    added = 0
    for direction in (0, 1):
        for a, b, line in pairs:
            word, partner = (a, b) if direction == 0 else (b, a)
            if word == partner:
                conflicts.append(f"{source}:{line}: {word} -> {partner} (maps a word to itself; ignored)")
                continue
            if skip_pronouns and (word in PRONOUNS or partner in PRONOUNS):
                continue
            old = table.get(word)
            if old is None:
                table[word] = partner
                added += 1
            elif old != partner:
                kind = "listed" if direction == 0 else "reverse"
                conflicts.append(f"{source}:{line}: {word} -> {partner} ({kind}; kept {word} -> {old})")
    return added


def wordlist_files(wordlist_dir=None) -> list[Path]:
    """The project word lists load_lexicon always reads, in load order (declare them as rule inputs)."""
    return _wordlist_files(Path(wordlist_dir) if wordlist_dir else WORDLIST_DIR)


def _wordlist_files(wordlist_dir: Path) -> list[Path]:
    if not wordlist_dir.is_dir():
        raise ConfigError(f"word list folder {wordlist_dir} not found (resources/wordlists/ of the repository)")
    files = sorted(wordlist_dir.glob("*.tsv"), key=lambda p: (p.name != PRIMARY_WORDLIST, p.name))
    if not files:
        raise ConfigError(f"no *.tsv word lists in {wordlist_dir}")
    return files


def load_lexicon(cds_pairs=None, winobias_dir=None, names=None, *, wordlist_dir=None, wordlists=None) -> SwapLexicon:
    """Merge resources/wordlists/ (all of them, or only the files in `wordlists` when given; [] = none)
    + CDS pairs json + WinoBias swap lists + CDS names json.

    Priority (first wins on conflicts): Lu et al.'s list, the project's extra lists, `cds_pairs`
    (cda_default_pairs.json), WinoBias generalized_swaps.txt, then extra_gendered_words.txt. Entries for the
    gendered pronouns are ignored (they are decided by rules). `names` (names_pairs_1000_scaled.json) fills
    ``name_pairs``. Malformed lines raise DataError naming file and line.
    """
    lex = SwapLexicon()
    sources: list[tuple[str, list[tuple[str, str, int]]]] = []
    chosen = _wordlist_files(Path(wordlist_dir) if wordlist_dir else WORDLIST_DIR) if wordlists is None else wordlists
    for path in map(Path, chosen):
        if not path.is_file():
            raise DataError(f"word list {path} not found", path)
        sources.append((str(path), read_tsv_pairs(path)))
    if cds_pairs is not None:
        sources.append((str(cds_pairs), read_json_pairs(Path(cds_pairs))))
    if winobias_dir is not None:
        for name in WINOBIAS_FILES:
            path = Path(winobias_dir) / name
            if not path.is_file():
                raise DataError(f"WinoBias word list {name} not found in {winobias_dir}", path)
            sources.append((str(path), read_tsv_pairs(path)))
    for source, pairs in sources:
        added = _merge(lex.word_pairs, pairs, source, lex.conflicts, skip_pronouns=True)
        lex.sources.append(source)
        log.debug("%s: %d pairs, %d new entries", source, len(pairs), added)
    n_word_conflicts = len(lex.conflicts)
    if names is not None:
        pairs = read_json_pairs(Path(names))
        added = _merge(lex.name_pairs, pairs, str(names), lex.conflicts, skip_pronouns=False)
        lex.sources.append(str(names))
        log.debug("%s: %d name pairs, %d entries", names, len(pairs), added)
    for line in lex.conflicts:
        log.debug("lexicon conflict: %s", line)
    if lex.conflicts:
        log.info(
            "swap lexicon: %d words, %d names; %d conflicting entries resolved first-wins "
            "(%d words, %d names; e.g. %s)",
            len(lex.word_pairs),
            len(lex.name_pairs),
            len(lex.conflicts),
            n_word_conflicts,
            len(lex.conflicts) - n_word_conflicts,
            lex.conflicts[0],
        )
    else:
        log.info("swap lexicon: %d words, %d names", len(lex.word_pairs), len(lex.name_pairs))
    return lex
