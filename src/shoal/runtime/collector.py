"""The runtime's use of Python's cyclic garbage collector while it runs.

CPython frees most objects by reference counting; its cyclic collector runs on top, each
time allocations outnumber deallocations by a threshold (700 for the youngest generation),
and a full collection walks every tracked object of the process. At :func:`shoal.start` the
process already holds its modules, classes, numba dispatchers and MPI bindings: about
110,000 tracked objects on a PE of LeanMD, none of which will become garbage. A full
collection walked them all each time, 42-67 ms on this machine (3-4 of them in a 10 s
LeanMD run on 2 PEs, gc callbacks timing each), and a PE that pauses stops the others as
well as soon as they wait for its messages.

So while the scheduler runs:

- the objects alive at the start are moved out of the collector's reach (``gc.freeze``):
  full collections walk only what the run created (7,600-24,000 objects on a LeanMD PE);
- the youngest generation is collected every ``YOUNG`` (10,000) net allocations, not 700:
  a message makes and drops a few tuples, which reference counting frees, and collecting
  them 14x less often spends 14x fewer pauses on them.

Both are undone when the runtime stops (library mode gives control back to the caller), so
nothing the program created before ``start`` is lost to the collector for good (unless the
program had frozen objects itself: then what it froze, and what the runtime did, stay
frozen). Cycles made before the start and dropped during the run wait until then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG = 10_000  # net allocations between collections of the youngest generation


@contextmanager
def tuned() -> Iterator[None]:
    """While inside: the objects alive now are frozen and young collections are rarer
    (module doc); both undone on leaving."""
    saved = gc.get_threshold()
    theirs = gc.get_freeze_count() > 0  # the program froze objects itself: they stay
    gc.freeze()
    gc.set_threshold(max(YOUNG, saved[0]), *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        if not theirs:
            gc.unfreeze()
