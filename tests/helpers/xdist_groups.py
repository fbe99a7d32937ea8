"""How the suite is shared out between pytest-xdist's workers (`-n 2 --dist loadgroup` in pyproject.toml's
`addopts`: one worker per core of the 2-core CI machine; docs/development/index.md).

xdist's `loadgroup` sends the tests of one `xdist_group` to one worker and every other test on its own, and
hands out the largest groups (by test count) first. Two changes (tests/conftest.py returns this scheduler):

- A test without an `xdist_group` mark goes with its module: a module-scoped fixture (a Snakemake run, trained
  tiny models, the Slurm cluster) is then built once, in one worker, not once in each.
- The groups known to take longest (LONGEST_FIRST) go out first, so no long group starts last and leaves the
  other worker idle at the end; the rest follow as xdist orders them (most tests first).

No fixture is shared between modules, and the tests that need a port take a free one (Accelerate and
torch.distributed launches, the Slurm daemons, the loopback HTTP servers), so modules may run side by side.
"""

from __future__ import annotations

from collections import OrderedDict

from xdist.scheduler import LoadGroupScheduling

#: Modules (or xdist_group names) by time, longest first: the methods run (one Snakemake process running its
#: jobs in itself: one core), the shipped-config run and its dry runs, the two Slurm runs, the 2-process launches,
#: every combination in process, the LLM tiny grid, then the other modules that run or dry-run Snakemake. Order
#: from `--durations=0` of `-n 2` runs on the 2-core machine (docs/development/performance.md, "The test suite in
#: CI").
LONGEST_FIRST = (
    "tests/workflow/test_workflow_methods.py",
    "tests/workflow/test_workflow.py",
    "tests/cluster/test_slurm.py",
    "tests/cluster/test_fsdp.py",
    "tests/cluster/test_distributed.py",
    "tests/workflow/test_every_combination.py",
    "tests/papers/test_llm_grid.py",
    "tests/workflow/test_workflow_robust.py",
    "tests/workflow/test_shipped_targets.py",
    "tests/cluster/test_gpu_check.py",
    "tests/workflow/test_corpora_workflow.py",
    "tests/training/test_train.py",
    "tests/training/test_lora.py",
    "tests/workflow/test_sweeps.py",
    "tests/workflow/test_methods.py",
)


class ModulesTogetherLongestFirst(LoadGroupScheduling):
    """`--dist loadgroup`, with ungrouped tests grouped by module and the longest groups handed out first."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._queue_ordered = False

    def _split_scope(self, nodeid: str) -> str:
        group = super()._split_scope(nodeid)  # the xdist_group name, or the nodeid itself when it has none
        return nodeid.split("::", 1)[0] if group == nodeid else group

    def _assign_work_unit(self, node) -> None:
        if not self._queue_ordered:  # the first call: the queue holds every group, none handed out yet
            self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda item: _rank(item[0])))
            self._queue_ordered = True
        super()._assign_work_unit(node)


def _rank(group: str) -> int:
    """A group's place in LONGEST_FIRST; every other group after them (the sort keeps their order)."""
    return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)
