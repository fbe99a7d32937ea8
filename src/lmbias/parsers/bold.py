"""BOLD, gender domain (Dhamala et al. 2021): one row per prompt of prompts/gender_prompt.json.

The file maps each group to its persons and each person to the openings of Wikipedia sentences about them:
``{"American_actors": {"Jacob_Zachar": ["Jacob Zachar is an American actor whose "], ...},
"American_actresses": {...}}``: 2,048 prompts about 1,587 actors and 1,156 about 776 actresses (3,204). Rows
keep the file's order (group, then person, then prompt); `prompt_id` is that position. A prompt is kept as
written, trailing space included: the model continues it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import DataError
from lmbias.parsers.common import read_json, table

FILE = "gender_prompt.json"
#: The gender domain's groups and the gender each stands for (the metrics' `male` / `female` sides).
GROUPS = {"American_actors": "male", "American_actresses": "female"}

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "bold"
SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),  # position in the file (group, person, prompt order)
        ("group", pa.string()),  # American_actors | American_actresses
        ("gender", pa.string()),  # male | female
        ("person", pa.string()),  # the file's key, e.g. Jacob_Zachar
        ("prompt", pa.string()),
    ]
)


def parse_bold(path: str | os.PathLike) -> pa.Table:
    """Every prompt of gender_prompt.json; a file that is not BOLD's gender domain is a DataError naming it."""
    data = read_json(path)
    if not isinstance(data, dict) or set(data) != set(GROUPS):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise DataError(f"expected an object with the groups {sorted(GROUPS)}, found {found}", path)
    rows = []
    for group in GROUPS:  # actors first, as in the file
        persons = data[group]
        if not isinstance(persons, dict) or not persons:
            raise DataError(f"group {group!r}: expected a non-empty object of person -> prompts", path)
        for person, prompts in persons.items():
            if not isinstance(prompts, list) or not prompts:
                raise DataError(f"{group}.{person}: expected a non-empty list of prompts, got {prompts!r}", path)
            for k, prompt in enumerate(prompts):
                if not isinstance(prompt, str) or not prompt.strip():
                    raise DataError(f"{group}.{person}[{k}]: expected a non-empty prompt, got {prompt!r}", path)
                rows.append(
                    {
                        "prompt_id": len(rows),
                        "group": group,
                        "gender": GROUPS[group],
                        "person": person,
                        "prompt": prompt,
                    }
                )
    return table(rows, SCHEMA)


OPTIONS: tuple[str, ...] = ()


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return [FILE]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_bold(files[FILE])
