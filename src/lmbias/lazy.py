"""Modules imported on first use.

Building the DAG imports every benchmark module (the registry reads their definitions), and a metric job
imports its benchmark's module; neither runs a forward pass or a statistical test. `torch` (about 1.1 s to
import) and `scipy.stats` (about 0.4 s) are therefore bound through `lazy_module`, so that a dry run, every
DAG build and every metric job (thousands in a paper grid) skip them, while the code that calls them reads
as usual (`torch.zeros(...)`, `sps.ttest_1samp(...)`).
"""

from __future__ import annotations

import importlib
import sys
import types


class _LazyModule(types.ModuleType):
    """Stands in for a module until an attribute is read; then imports it and takes over its namespace, so
    later reads are plain dictionary lookups (no `__getattr__` on the hot path)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_loaded"] = False

    def _load(self) -> types.ModuleType:
        module = importlib.import_module(self.__name__)
        if not self.__dict__["_lazy_loaded"]:
            self.__dict__.update(module.__dict__)
            self.__dict__["_lazy_loaded"] = True
        return module

    def __getattr__(self, attribute: str):
        return getattr(self._load(), attribute)

    def __dir__(self):
        return dir(self._load())


def lazy_module(name: str) -> types.ModuleType:
    """`name`, imported when an attribute of it is first read (at once if it is already imported)."""
    if name in sys.modules:
        return sys.modules[name]
    return _LazyModule(name)
