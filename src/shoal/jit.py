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
load never sees half of another process's save and numbering is never lost.

A cached function is also compiled for given argument types by one process at a time, under
a lock of its own (``_compile_once``): the others wait (at most ``COMPILE_WAIT``), then
find it in the cache. Without it, every process that starts on a cold cache compiles it:
the PEs of a job on a fresh install, a test worker and the example it runs. Two processes
simulating gossip on a cold cache each spent 16.5 s of CPU compiling the simulator's
kernel; with the lock, the second loads what the first saved. Functions without
``cache=True`` compile in parallel as before, as do different functions and the same
function for other types. Across nodes that share an install on NFS, flock may not reach
the other nodes: compile once before a multi-node job (any run on one node does it).

Every shoal module imports ``njit`` from here, not from numba. The test suite compiles
every kernel with bounds checks (``NUMBA_BOUNDSCHECK``, tests/conftest.py): an index out of
range raises ``IndexError`` there instead of writing over the heap, which a job only shows
later as ``free(): invalid pointer`` in whatever frees next.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from numba import njit
from numba.core import caching
from numba.core.dispatcher import Dispatcher

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


_COMPILING: set[str] = set()  # the compile locks this process holds (a nested compile of
# the same function, as recursion can make, must not wait for itself)


def compile_lock(func: str, sig: str) -> str:
    """The lock file under which function ``func`` (``module.qualname``) is compiled for
    the argument types ``sig`` (``str`` of numba's signature: ``(int64,)``). One per
    signature: a process whose signature is in the cache must not wait while another
    compiles the function for other types (a job's PE waited so for another test's long
    compile, and its first checkpoint came after the failures the test injected)."""
    name = hashlib.sha1(f"{func}{sig}".encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"shoal-numba-compile-{os.getuid()}-{name}.lock")


COMPILE_WAIT = 120.0  # seconds a process waits for another's compile before it compiles too


def _wait_for(lock: Any) -> bool:
    """Take the exclusive ``flock`` of the open file ``lock``, waiting at most
    ``COMPILE_WAIT`` seconds (polled every 50 ms: two processes compiling mutually
    recursive functions, each holding one's lock, would otherwise wait for each other for
    good); whether it was taken."""
    deadline = time.monotonic() + COMPILE_WAIT
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def _compile_once(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(self: Any, sig: Any) -> Any:
        if isinstance(self._cache, caching.NullCache):  # (not cached: nothing to wait for)
            return method(self, sig)
        func = self.py_func
        path = compile_lock(f"{func.__module__}.{func.__qualname__}", str(sig))
        if path in _COMPILING:
            return method(self, sig)
        with open(path, "a") as lock:
            held = _wait_for(lock)  # (then compile() finds another's save first)
            _COMPILING.add(path)
            try:
                return method(self, sig)
            finally:
                _COMPILING.discard(path)
                if held:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    run.shoal_locked = True  # type: ignore[attr-defined]
    return run


def _install() -> None:
    for name in ("load_overload", "save_overload"):
        method = getattr(caching.Cache, name)
        if not getattr(method, "shoal_locked", False):
            setattr(caching.Cache, name, _locked(method))
    if not getattr(Dispatcher.compile, "shoal_locked", False):
        Dispatcher.compile = _compile_once(Dispatcher.compile)  # type: ignore[method-assign]


_install()
