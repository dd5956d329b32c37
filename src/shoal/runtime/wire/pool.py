"""Receive buffers for the out-of-band buffers that arrive by MPI, reused once the program
has dropped them (issue 17, section 6).

A fresh buffer page-faults on every 4 KiB the first time it is written; a buffer whose
pages are mapped already does not. So the transport keeps the buffers it received into and
hands one out again when nothing refers to it any more. Unbounded, such a pool keeps a
buffer per distinct size forever (24 arrays of about 64 MiB of different sizes took a
receiver from 78 to 1619 MiB; 20,000 arrays of 8-64 KiB from 79 to 677 MiB). Here:

- sizes are rounded up to classes, four per octave (at most 25% larger than asked, and
  whole pages), so arrays of nearby sizes share buffers; a buffer is handed out as a view
  of the requested length;
- the pool holds at most ``limit`` bytes (the ``pool_bytes`` option of the runtime), least
  recently used buffers first out; a buffer larger than the limit is never kept;
- at most ``PER_CLASS`` buffers of one class are kept.

A buffer the pool forgets while the program still uses it stays alive until the program
drops it (the pool only stops counting it).
"""

from __future__ import annotations

import sys
from collections import OrderedDict

import numpy as np

from shoal.options import POOL_BYTES

PAGE = 4096
PER_CLASS = 4  # buffers of one size class kept, in use or free
# references to a free buffer while get() looks at it: its class list, the LRU order, the
# loop variable and getrefcount's argument
_FREE = 4


def size_class(n: int) -> int:
    """The bytes of the buffer that serves a request of ``n`` bytes: whole pages, the next
    of four classes per octave (``n`` in (4m, 8m]: a multiple of m)."""
    if n <= PAGE:
        return PAGE
    step = 1 << max((n - 1).bit_length() - 3, 0)
    c = -(-n // step) * step
    return -(-c // PAGE) * PAGE


class BufferPool:
    """Buffers of at most ``limit`` bytes in all, by size class, in least-recently-used
    order."""

    def __init__(self, limit: int = POOL_BYTES):
        self.limit = limit
        self.bytes = 0  # the sum of the classes of the buffers kept
        self._lru: OrderedDict[int, np.ndarray] = OrderedDict()  # id -> buffer, oldest first
        self._by_class: dict[int, list[np.ndarray]] = {}

    def get(self, n: int) -> np.ndarray:
        """``n`` bytes to receive into: a view of a kept buffer nothing refers to, else of a
        new one (kept if it fits the limit)."""
        c = size_class(n)
        kept = self._by_class.get(c)
        if kept is not None:
            for buf in kept:
                if sys.getrefcount(buf) == _FREE:
                    self._lru.move_to_end(id(buf))
                    return buf[:n]
        buf = np.empty(c, np.uint8)
        if c <= self.limit and (kept is None or len(kept) < PER_CLASS):
            self._keep(c, buf)
        return buf[:n]

    def _keep(self, c: int, buf: np.ndarray) -> None:
        self._by_class.setdefault(c, []).append(buf)
        self._lru[id(buf)] = buf
        self.bytes += c
        while self.bytes > self.limit:
            _, old = self._lru.popitem(last=False)
            oc = old.nbytes
            kept = self._by_class[oc]
            del kept[next(k for k, b in enumerate(kept) if b is old)]  # (== compares values)
            if not kept:
                del self._by_class[oc]
            self.bytes -= oc

    def __len__(self) -> int:
        return len(self._lru)
