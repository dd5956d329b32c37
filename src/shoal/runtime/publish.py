"""Live data of a running job (issue 29, item 1): every ``live_period`` seconds (default 0.5,
``SHOAL_LIVE_PERIOD``; 0 turns it off) each PE of a ``shoal run`` job appends one row to
``<jobdir>/live/pe-N.jsonl``, and PE 0 appends its events to ``<jobdir>/live/events.jsonl``
(the format: :mod:`shoal.live`, which reads them; the paths: :class:`shoal.jobdir.JobDir`).

A row covers the time since the previous one (``dt``): the calls and seconds of each entry
method (``"Class.method"``), the idle and the overhead seconds (the rest of ``dt``), the
messages and bytes sent and received, the RSS, the queue's length and the local elements.
Nothing is measured twice: the seconds are the elements' own statistics (``slot.stats``,
what :func:`shoal.stats` and the balancer read), the idle seconds the loop's
(:meth:`Runtime.idle_seconds`, with the idle stretch in progress), the messages the
quiescence counters (``created``/``processed``), the bytes the transport's (which counts
the small envelopes it receives only while a PE publishes: ``Transport.counting``, an
``MPI_Get_count`` each, about 740 instructions). A row holds the
difference of each since the previous row: an element that arrives counts from its arrival
(its statistics travel with it), one that leaves takes what it ran here since the last row
into the next row.

Who calls: the scheduler (:mod:`shoal.runtime.pe`) compares the clock it has just read with
``rt.publish_at`` at every drain of its queue and every idle turn (a float comparison; no
timer, no clock read added to a message's path); a long entry method delays the row,
whose ``dt`` then says so. A row costs about 1 us per local element (the walk over their
statistics): where that would exceed ``COST_SHARE`` (0.5%) of the PE's time, the next row
comes later (tens of thousands of elements on a PE). The last row is written when the
scheduler stops. Each line is written whole by one ``write`` on a file opened for
appending; a file whose last line was cut (its PE killed) gets a newline first, so the rows
after a restart stay readable.

Events (PE 0): each balancing step when it ends (``after`` null), and once its result is
measured at the next step a second line of the same ``step`` with ``after`` (the reader
merges them); each checkpoint; each resize served; a recovery after a failed PE (``--ft``).
The supervisor (:mod:`shoal.supervise`) adds the failures and restarts of whole launches.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from shoal.files import append_line, open_append
from shoal.jobdir import JobDir

if TYPE_CHECKING:
    from shoal.runtime.collection import Collection, Slot
    from shoal.runtime.interfaces import Core

OFF = float("inf")  # rt.publish_at when nothing is published
COST_SHARE = 0.005  # the most of a PE's time its rows may take (the period stretches)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss() -> int:
    """This process's resident memory now (bytes; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Publisher:
    """One PE's writer of live rows (and PE 0's of events); does nothing when off."""

    def __init__(self, rt: Core, period: float, home: JobDir | None = None):
        self.rt = rt
        self.home = home if home is not None else JobDir.of_rank()
        self.period = period if self.home is not None else 0.0
        self.on = self.period > 0
        self.fd = -1
        self.events_fd = -1
        self.host = socket.gethostname()
        self.base: dict[Slot, dict[str, list[float]]] = {}  # stats at the last row
        self.gone: dict[str, list[float]] = {}  # what elements that left ran here since
        self.t = 0.0  # perf_counter at the last row
        self.idle = self.created = self.processed = 0.0
        self.bytes_sent = self.bytes_received = 0
        # the balancing steps whose result is not measured yet: (when, lb_history record)
        self.lb_open: list[tuple[float, dict[str, Any]]] = []
        self.pending: list[tuple[str, dict[str, Any]]] = []  # events to write at start

    # ------------------------------------------------------------- start and stop
    def start(self) -> None:
        """Before the scheduler runs (after a restart restored the elements): open the
        files, take the baseline, arm the first row."""
        if not self.on:
            return
        assert self.home is not None
        rt = self.rt
        try:
            self.fd = open_append(self.home.live_pe(rt.pe))
            if rt.pe == 0:
                self.events_fd = open_append(self.home.live_events)
                self.home.note_live_pes(rt.npes, list(rt.nodes.hosts))
        except OSError as exc:  # a job directory this node cannot write: no live data
            self.on = False
            import sys

            sys.stderr.write(f"shoal: PE {rt.pe}: no live data ({exc})\n")
            return
        for kind, fields in self.pending:
            self.event(kind, **fields)
        self.pending = []
        rt.migration.subscribe(self)
        rt.net.counting = True  # every byte received counted (see Transport.bytes_received)
        for coll in rt.colls.values():
            for slot in coll.local.values():
                self.base[slot] = _copy(slot.stats)
        self._mark(time.perf_counter(), 0.0)
        rt.publish_at = self.t + self.period

    def close(self) -> None:
        """The scheduler stopped: the last row, and the files closed."""
        if not self.on:
            return
        self.tick(time.perf_counter(), 0.0)
        self.rt.publish_at = OFF
        self._close_files()

    def abandon(self) -> None:
        """The run ended by a failed PE (``--ft``): the files closed, no last row."""
        self.rt.publish_at = OFF
        self._close_files()

    def _close_files(self) -> None:
        for fd in (self.fd, self.events_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.events_fd = -1
        self.on = False

    # ------------------------------------------------------------- rows
    def tick(self, now: float, idle_since: float) -> None:
        """The scheduler's clock read ``now`` (perf_counter) has passed ``publish_at``:
        append the row of the time since the last one. ``idle_since``: when the idle
        stretch in progress began (0: the PE is not idle)."""
        rt = self.rt
        entries = self._entries()
        idle = rt.idle_seconds() + (now - idle_since if idle_since else 0.0)
        net = rt.net
        dt = now - self.t
        d_idle = max(0.0, idle - self.idle)
        busy = sum(v[1] for v in entries.values())
        row = {"t": time.time(), "dt": dt, "pe": rt.pe, "host": self.host,
               "entries": entries, "idle": d_idle,
               "overhead": max(0.0, dt - busy - d_idle),
               "sent": int(rt.created - self.created),
               "received": int(rt.processed - self.processed),
               "bytes_sent": net.bytes_sent - self.bytes_sent,
               "bytes_received": net.bytes_received - self.bytes_received,
               "rss": rss(), "queue": len(rt.queue.fifo) + len(rt.queue.heap),
               "elements": sum(len(c.local) for c in rt.colls.values())}
        self._mark(now, idle)
        try:
            append_line(self.fd, row)
        except OSError:  # the directory went away (the job is ending): stop publishing
            rt.publish_at = OFF
            self._close_files()
            return
        # a row costs at most COST_SHARE of the PE's time: with very many elements the
        # period stretches (the rows' dt says so)
        rt.publish_at = now + max(self.period, (time.perf_counter() - now) / COST_SHARE)

    def _mark(self, now: float, idle: float) -> None:
        rt = self.rt
        self.t = now
        self.idle = idle if idle else rt.idle_seconds()
        self.created, self.processed = rt.created, rt.processed
        self.bytes_sent, self.bytes_received = rt.net.bytes_sent, rt.net.bytes_received

    def _entries(self) -> dict[str, list[float]]:
        """Calls and seconds of each entry method since the last row; the baseline moves
        on to now. (The hot loop of a row, about 1 us an element: summed per collection
        by method name, the ``Class.method`` names made once per collection.)"""
        out, self.gone = self.gone, {}
        base = self.base
        seen = 0
        for coll in self.rt.colls.values():
            if coll.local:
                seen += len(coll.local)
                _add(coll.cls.__name__, _grown(coll.local.values(), base), out)
        if len(base) > seen:  # elements deleted or collections destroyed: forget them
            self.base = {slot: base[slot] for coll in self.rt.colls.values()
                         for slot in coll.local.values() if slot in base}
        return out

    # ------------------------------------------------------------- elements coming and going
    def element_left(self, coll: Collection, slot: Slot, dest: int) -> None:
        before = self.base.pop(slot, None)
        _delta(coll.cls.__name__, slot.stats, before or {}, self.gone)

    def elements_left(self, coll: Collection) -> None:
        """(Each was taken into account as it left.)"""

    def element_joined(self, coll: Collection, slot: Slot) -> None:
        self.base[slot] = _copy(slot.stats)  # what it ran elsewhere is not this PE's

    def elements_arrived(self, coll: Collection, slots: list[Slot],
                         fetches: list[tuple] | None) -> None:
        for slot in slots:
            if slot not in self.base:
                self.base[slot] = _copy(slot.stats)

    # ------------------------------------------------------------- events (PE 0)
    def event(self, kind: str, **fields: Any) -> None:
        """Append an event (PE 0; elsewhere, or off, nothing)."""
        if self.events_fd < 0:
            return
        try:
            append_line(self.events_fd, {"t": time.time(), "kind": kind, **fields})
        except OSError:
            pass

    def lb_step(self, record: dict[str, Any]) -> None:
        """A balancing step ended (its ``lb_history`` record)."""
        if self.events_fd < 0:
            return
        t = time.time()
        self.lb_open.append((t, record))
        self._lb(t, record)

    def lb_measured(self) -> None:
        """The steps whose ``after_measured`` is known now get their second line."""
        still = []
        for t, record in self.lb_open:
            if record.get("after_measured") is None:
                still.append((t, record))
            else:
                self._lb(t, record)
        self.lb_open = still

    def _lb(self, t: float, r: dict[str, Any]) -> None:
        try:
            append_line(self.events_fd, {
                "t": t, "kind": "lb", "step": r.get("step"),
                "strategy": r.get("strategy"), "before": r.get("before"),
                "after": r.get("after_measured"), "predicted": r.get("after_predicted"),
                "migrations": r.get("migrations"), "seconds": r.get("total_time")})
        except OSError:
            pass


def _grown(slots: Iterable[Slot], base: dict[Slot, dict[str, list[float]]]
           ) -> dict[str, list[float]]:
    """What the statistics of ``slots`` grew by since ``base`` (moved on to them), summed
    by method name."""
    mine: dict[str, list[float]] = {}
    for slot in slots:
        before = base.get(slot)
        if before is None:
            before = base[slot] = {}
        for name, st in slot.stats.items():
            b = before.get(name)
            if b is None:
                calls, secs = st[0], st[1]
                before[name] = [calls, secs]
            else:
                calls, secs = st[0] - b[0], st[1] - b[1]
                if not (calls or secs):
                    continue
                b[0], b[1] = st[0], st[1]
            acc = mine.get(name)
            if acc is None:
                mine[name] = [calls, secs]
            else:
                acc[0] += calls
                acc[1] += secs
    return mine


def _add(cls: str, grown: dict[str, list[float]], out: dict[str, list[float]]) -> None:
    """Add a collection's ``grown`` (by method) to ``out`` (by ``Class.method``)."""
    for name, (calls, secs) in grown.items():
        _bump(out, f"{cls}.{name}", calls, secs)


def _bump(out: dict[str, list[float]], key: str, calls: float, secs: float) -> None:
    """``out[key]`` grows by ``calls`` calls and ``secs`` seconds."""
    acc = out.get(key)
    if acc is None:
        out[key] = [int(calls), secs]
    else:
        acc[0] += int(calls)
        acc[1] += secs


def _copy(stats: dict[str, list[float]]) -> dict[str, list[float]]:
    return {name: [st[0], st[1]] for name, st in stats.items()}


def _delta(cls: str, stats: dict[str, list[float]], before: dict[str, list[float]],
           out: dict[str, list[float]]) -> None:
    """Add what ``stats`` grew by since ``before`` to ``out`` (by ``Class.method``); move
    ``before`` on to ``stats``."""
    for name, st in stats.items():
        b = before.get(name)
        if b is None:
            calls, secs = st[0], st[1]
            before[name] = [st[0], st[1]]
        else:
            calls, secs = st[0] - b[0], st[1] - b[1]
            if not (calls or secs):
                continue
            b[0], b[1] = st[0], st[1]
        _bump(out, f"{cls}.{name}", calls, secs)
