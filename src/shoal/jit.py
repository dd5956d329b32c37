"""numba's ``njit`` for shoal's kernels, with its on-disk cache made safe for many
processes at once.

numba caches a compiled function in ``__pycache__`` as an index (signature -> data file
number) and one data file per signature, read and written without a lock. Two processes
that compile different signatures of one function at the same time (the PEs of a job on
a fresh install, two jobs, two test workers) both read the empty index, both number their
data file 1, and the second overwrites the first's code under the first's index entry:
the next process that loads that signature runs code compiled for other types
(numba/numba#4807, open). This module holds an exclusive
``flock`` of one lock file per machine and user around numba's cache load and save, so a
load never sees half of another process's save and numbering is never lost. Compiling
itself stays parallel; only the cache's file work is serialized (a few milliseconds per
function, once). Across nodes that share an install on NFS, flock may not reach the other
nodes: compile once before a multi-node job (any run on one node does it).

Every shoal module imports ``njit`` from here, not from numba. The test suite compiles
every kernel with bounds checks (``NUMBA_BOUNDSCHECK``, tests/conftest.py): an index out of
range raises ``IndexError`` there instead of writing over the heap, which a job only shows
later as ``free(): invalid pointer`` in whatever frees next.
"""

from __future__ import annotations

import fcntl
import functools
import os
import tempfile
from collections.abc import Callable
from typing import Any

from numba import njit
from numba.core import caching

__all__ = ["njit"]

LOCK = os.path.join(tempfile.gettempdir(), f"shoal-numba-cache-{os.getuid()}.lock")


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return method(self, *args, **kwargs)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    run.shoal_locked = True  # type: ignore[attr-defined]
    return run


def _install() -> None:
    for name in ("load_overload", "save_overload"):
        method = getattr(caching.Cache, name)
        if not getattr(method, "shoal_locked", False):
            setattr(caching.Cache, name, _locked(method))


_install()
