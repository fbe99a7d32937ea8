"""How the suite is shared out between the two xdist workers (tests/helpers/xdist_groups.py)."""

from helpers.paths import REPO_ROOT
from helpers.xdist_groups import LONGEST_FIRST, ModulesTogetherLongestFirst, _rank


def test_a_test_goes_with_its_xdist_group_else_with_its_module():
    scheduler = object.__new__(ModulesTogetherLongestFirst)  # _split_scope reads no state
    assert scheduler._split_scope("tests/a/test_x.py::test_one") == "tests/a/test_x.py"
    assert scheduler._split_scope("tests/a/test_x.py::test_one[p@q]") == "tests/a/test_x.py"  # '@' in a parameter
    assert scheduler._split_scope("tests/a/test_x.py::Case::test_one[p]") == "tests/a/test_x.py"
    assert scheduler._split_scope("tests/a/test_x.py::test_one[p]@slurm") == "slurm"


def test_the_longest_modules_go_first_and_exist():
    """A module renamed or split without updating LONGEST_FIRST would silently lose its place."""
    assert [m for m in LONGEST_FIRST if not (REPO_ROOT / m).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    groups = ["tests/metrics/test_weat.py", *reversed(LONGEST_FIRST), "tests/project/test_cli.py"]
    assert sorted(groups, key=_rank) == [*LONGEST_FIRST, "tests/metrics/test_weat.py", "tests/project/test_cli.py"]
