"""The scheduler queue of a PE: work waiting to run, lowest priority value first and FIFO
among equals (Acun14, Section II-B: message-driven execution).

An entry is ``(run, a, b)``: the scheduler calls ``run(a, b)``. Entries of priority 0, the
common case, wait in a deque; the others in a heap keyed by ``(prio, arrival)``. Negative
priorities run before the deque, positive ones when it is empty.

Migration and deletion take an element's entries out (:meth:`Queue.take`): for any number
of elements in one pass over the queue, so that moving k elements costs O(k + queue), not
O(k x queue). The deque and the heap are changed in place: the scheduler loop keeps
references to both.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

Entry = tuple  # (run, a, b) in the deque, (prio, arrival, run, a, b) in the heap


class Queue:
    """The deque of priority-0 entries and the heap of the others."""

    __slots__ = ("_append", "arrivals", "fifo", "front", "heap", "pushed")

    def __init__(self) -> None:
        self.fifo: deque[Entry] = deque()
        # its bound append: compiled, ``self.fifo.append`` is a call by name (about 230
        # instructions, 60 this way; the deque is changed in place, never replaced)
        self._append: Callable[[Entry], None] = self.fifo.append
        self.heap: list[Entry] = []
        self.arrivals = 0
        self.front = 0  # arrival numbers of entries put back (:meth:`unpop`), decreasing
        self.pushed = 0  # entries ever queued: work created, for quiescence detection

    def push(self, prio: int, run: Callable[[Any, Any], None], a: Any, b: Any) -> None:
        """Queue ``run(a, b)`` at priority ``prio``."""
        self.pushed += 1
        if prio == 0:
            self._append((run, a, b))
        else:
            self.arrivals += 1
            heapq.heappush(self.heap, (prio, self.arrivals, run, a, b))

    def extend(self, entries: Iterable[tuple[int, Callable[[Any, Any], None], Any, Any]]
               ) -> None:
        """:meth:`push` each ``(prio, run, a, b)`` in order."""
        fifo = self.fifo
        for prio, run, a, b in entries:
            if prio == 0:
                self.pushed += 1
                fifo.append((run, a, b))
            else:
                self.push(prio, run, a, b)

    def unpop(self, prio: int, run: Callable[[Any, Any], None], a: Any, b: Any) -> None:
        """Put back the entry just popped (or about to run) first among those of its
        priority (queued work again: counted once more, as it will be processed again)."""
        self.pushed += 1
        if prio == 0:
            self.fifo.appendleft((run, a, b))
        else:
            self.front -= 1
            heapq.heappush(self.heap, (prio, self.front, run, a, b))

    def pop(self) -> Entry:
        """The next entry (the queue is not empty)."""
        heap = self.heap
        if heap and (heap[0][0] < 0 or not self.fifo):
            return heapq.heappop(heap)[2:]
        return self.fifo.popleft()

    def __len__(self) -> int:
        return len(self.fifo) + len(self.heap)

    def take(self, targets: Iterable[object]) -> dict[int, list[Any]]:
        """Remove the entries whose first argument ``a`` is one of ``targets`` (elements'
        slots) in one pass: ``{id(target): [b, ...]}`` in the order they would have run
        among equal priorities (``b`` is the envelope, which says what to run and at which
        priority). Targets are matched by identity (the queue also holds envelopes, which
        cannot be hashed)."""
        taken: dict[int, list[Any]] = {id(t): [] for t in targets}
        get = taken.get
        keep: list[Entry] = []
        for e in self.fifo:
            mine = get(id(e[1]))
            if mine is None:
                keep.append(e)
            else:
                mine.append(e[2])
        if len(keep) < len(self.fifo):
            self.fifo.clear()
            self.fifo.extend(keep)
        hkeep: list[Entry] = []
        hmine: list[Entry] = []
        for e in self.heap:
            (hkeep if get(id(e[3])) is None else hmine).append(e)
        if hmine:
            self.heap[:] = hkeep
            heapq.heapify(self.heap)
            for e in sorted(hmine, key=lambda e: e[:2]):
                taken[id(e[3])].append(e[4])
        return taken
