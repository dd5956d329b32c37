"""PDES: the YAWNS windowed conservative protocol running the PHOLD benchmark (Acun14,
Section IV-E and Fig. 15), the fine-grained-message mini-app of shoal.

Logical processes (LPs) are a dense 1-D chare array (:class:`LP`), ``lps`` per PE under the
block map (LP ``i`` starts on PE ``i // lps``, which is what "remote" refers to; a periodic
balancer may move LPs, which changes no result, only when a PE flushes its aggregation
buffers, see :meth:`LP._finish_window`). Each LP holds its pending
events in a heap ordered by ``(timestamp, uid)``; ``uid = source LP << 32 | the source's
send number`` makes the order total, so ties are broken the same way everywhere.

YAWNS alternates two phases. Window calculation: every LP contributes its earliest pending
timestamp to a reduction whose minimum ``m`` is broadcast back; no LP can create an event
earlier than ``m + lookahead``, so the window is ``[m, min(m + lookahead, end_time))``.
Event execution: every LP executes its events inside the window in timestamp order; an event
created now lies at or after the window's end, so an LP's set of events in a window is known
when the window opens, and arrival order changes nothing.

PHOLD: executing an event at time ``t`` sends one new event to a random LP at ``t +
lookahead + Exp(mean_delay)``; with probability ``remote`` its LP is on another PE (chosen
uniformly among the other PEs), otherwise on this PE (any local LP, itself included). On one
PE every event is local. Each LP draws from its own stream (:class:`Stream`, seeded by
``(seed, lp)``), one draw per executed event in execution order, so a run depends on the
seed and the number of PEs only: :func:`serial`, a one-heap sequential simulator, gives the
same events per LP, the same last timestamps and the same number of windows.

How a window knows that every event it must execute has arrived: each event carries the
number of the window it was sent in, and the window reduction carries, besides the minimum,
how many events each LP was sent in the window just executed (a vector with one count per
LP, summed). A sender contributes the earliest of its pending events and of the events it
has just sent, so an event still in flight when the minimum is taken is counted by its
sender. An LP that gets the result executes the next window only once every event sent to it
up to the last window has arrived (its own count of arrivals from executed windows equals
the announced total); until then it waits, and the arrival that completes the count starts
its window. An event from the window being executed can arrive before its receiver executed
that window: it is counted apart (``early``) and joins the count when the receiver does.
There is no retry and no extra reduction: one reduction per window, and an LP waits only for
events it must have anyway. Before reporting, an LP waits the same way, so no event is in
flight when the counts are gathered. (The count vector grows with the number of LPs: fine
for the hundreds of LPs a small cluster runs; counting per PE would be the step beyond.)

With ``aggregate`` the events travel through a :class:`shoal.Aggregator` as packed records
of :data:`EVENT` (no pickling per event); the last LP of a PE to finish a window flushes
the PE's buffers (and the PEs on the way pass a flush on at once), so no window waits for
the flush period.
"""

from __future__ import annotations

import heapq
import math
import sys
import time
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

import shoal
from shoal.errors import UsageError

# one event on the wire when aggregated: its timestamp, its uid and the window it was sent in
# (the receiver is the aggregator's index)
EVENT = np.dtype([("ts", np.float64), ("uid", np.int64), ("window", np.int32)])
UID_SHIFT = 32  # uid = source LP << UID_SHIFT | the source's send number
BLOCK = 256  # draws a stream makes at a time
PROGRESS_EVERY = 1.0  # seconds between progress lines


@dataclass(frozen=True)
class Params:
    """A PHOLD run: ``lps`` LPs per PE, ``events`` initial events per LP (at ``Exp(mean_delay)``
    each), ``lookahead`` (> 0: the least delay of a new event, hence the window length),
    ``mean_delay`` of the exponential part of a delay, ``remote`` probability that an event
    goes to another PE, events with timestamps below ``end_time`` are executed, ``seed``."""

    lps: int = 8
    events: int = 16
    lookahead: float = 0.5
    mean_delay: float = 1.0
    remote: float = 0.5
    end_time: float = 50.0
    seed: int = 1

    def check(self) -> None:
        """Raise :class:`UsageError` for a run that cannot work, saying what to change."""
        for name in ("lps", "events"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if not self.lookahead > 0:
            raise UsageError(f"lookahead must be > 0 (got {self.lookahead}): YAWNS windows "
                             "are lookahead long, a window of length 0 never advances")
        if not (self.mean_delay >= 0 and math.isfinite(self.mean_delay)):
            raise UsageError(f"mean_delay must be a finite number >= 0 (got "
                             f"{self.mean_delay})")
        if not 0 <= self.remote <= 1:
            raise UsageError(f"remote must be a probability in [0, 1] (got {self.remote})")
        if not (self.end_time > 0 and math.isfinite(self.end_time)):
            raise UsageError(f"end_time must be a finite number > 0 (got {self.end_time})")
        if self.seed < 0:
            raise UsageError(f"seed must be >= 0 (got {self.seed})")


# ----------------------------------------------------------------- random streams
def initial_events(p: Params, lp: int) -> list[tuple[float, int]]:
    """LP ``lp``'s initial events as ``(timestamp, uid)``: ``events`` timestamps drawn from
    ``Exp(mean_delay)`` by the generator ``(seed, lp, 0)``, uids ``0 .. events - 1``."""
    u = np.random.default_rng((p.seed, lp, 0)).random(p.events)
    ts = -p.mean_delay * np.log1p(-u)
    base = lp << UID_SHIFT
    return [(t, base + k) for k, t in enumerate(ts.tolist())]


class Stream:
    """LP ``lp``'s draws for the events it executes, from the generator ``(seed, lp, 1)``:
    four uniforms per event (remote or not, which other PE, which LP of that PE, the delay),
    made :data:`BLOCK` events at a time (the generator fills rows in order, so the block size
    changes no value) and turned into destinations and delays with numpy."""

    __slots__ = ("delays", "dests", "k", "lp", "npes", "p", "rng")

    def __init__(self, p: Params, lp: int, npes: int):
        self.p, self.lp, self.npes = p, lp, npes
        self.rng = np.random.default_rng((p.seed, lp, 1))
        self.dests: list[int] = []
        self.delays: list[float] = []
        self.k = 0

    def _refill(self) -> None:
        p, npes = self.p, self.npes
        u = self.rng.random((BLOCK, 4))
        pe = self.lp // p.lps
        other = (pe + 1 + (u[:, 1] * (npes - 1)).astype(np.int64)) % npes
        to = np.where((u[:, 0] < p.remote) & (npes > 1), other, pe)
        self.dests = (to * p.lps + (u[:, 2] * p.lps).astype(np.int64)).tolist()
        self.delays = (p.lookahead - p.mean_delay * np.log1p(-u[:, 3])).tolist()
        self.k = 0

    def draw(self) -> tuple[int, float]:
        """The next event's destination LP and delay (``lookahead + Exp(mean_delay)``)."""
        k = self.k
        if k == len(self.dests):
            self._refill()
            k = 0
        self.k = k + 1
        return self.dests[k], self.delays[k]


# ----------------------------------------------------------------- results
@dataclass
class Result:
    """Per LP (numpy arrays indexed by LP): events ``committed`` (executed), timestamp of
    the ``last`` one (-inf if none), ``pending`` at the end, events ``sent`` and
    ``received`` (initial events not counted), ``disorder`` (executions earlier than the
    LP's previous one: 0 in a correct run), ``waited`` (windows the LP had to wait for
    events still in flight when the window opened; 0 in the serial run); and ``windows``
    executed, ``seconds`` of the run."""

    committed: np.ndarray
    last: np.ndarray
    pending: np.ndarray
    sent: np.ndarray
    received: np.ndarray
    disorder: np.ndarray
    waited: np.ndarray
    windows: int
    seconds: float

    PER_LP: ClassVar[tuple[str, ...]] = ("committed", "last", "pending", "sent", "received",
                                         "disorder")

    @property
    def total(self) -> int:
        return int(self.committed.sum())

    @property
    def rate(self) -> float:
        """Committed events per second."""
        return self.total / self.seconds if self.seconds > 0 else math.inf

    def conserved(self, p: Params) -> bool:
        """Event conservation: initial events + sends = committed + pending."""
        initial = p.events * len(self.committed)
        return initial + int(self.sent.sum()) == self.total + int(self.pending.sum())

    def differences(self, other: Result) -> list[str]:
        """What differs from ``other`` (per-LP fields and windows), empty if the runs
        agree exactly."""
        out = [name for name in self.PER_LP
               if not np.array_equal(getattr(self, name), getattr(other, name))]
        if self.windows != other.windows:
            out.append(f"windows ({self.windows} against {other.windows})")
        return out

    def arrays(self) -> dict[str, Any]:
        """Every field, for ``np.savez``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ----------------------------------------------------------------- the serial reference
def serial(p: Params, npes: int) -> Result:
    """PHOLD on ``npes`` PEs' worth of LPs, sequentially: one heap of every pending event
    ordered by ``(timestamp, LP, uid)``, so each LP executes its events in ``(timestamp,
    uid)`` order as the parallel run does. Windows are counted as YAWNS would open them:
    a new one whenever the earliest pending event lies at or after the current one's end."""
    p.check()
    t0 = time.perf_counter()
    n = npes * p.lps
    heap = [(ts, lp, uid) for lp in range(n) for ts, uid in initial_events(p, lp)]
    heapq.heapify(heap)
    streams = [Stream(p, lp, npes) for lp in range(n)]
    committed = np.zeros(n, np.int64)
    received = np.zeros(n, np.int64)
    disorder = np.zeros(n, np.int64)
    last = np.full(n, -math.inf)
    seq = [p.events] * n
    windows, end = 0, -math.inf
    while heap and heap[0][0] < p.end_time:
        ts, lp, _ = heapq.heappop(heap)
        if ts >= end:
            windows += 1
            end = min(ts + p.lookahead, p.end_time)
        if ts < last[lp]:
            disorder[lp] += 1
        last[lp] = ts
        committed[lp] += 1
        dest, delay = streams[lp].draw()
        heapq.heappush(heap, (ts + delay, dest, (lp << UID_SHIFT) + seq[lp]))
        seq[lp] += 1
        received[dest] += 1
    pending = np.bincount([lp for _, lp, _ in heap], minlength=n).astype(np.int64)
    return Result(committed, last, pending, committed.copy(), received, disorder,
                  np.zeros(n, np.int64), windows, time.perf_counter() - t0)


# ----------------------------------------------------------------- the parallel run
def _window_sum(a: tuple, b: tuple) -> tuple:
    """The window reduction: the earliest timestamp, events sent per destination LP in the
    window (None: none sent), events committed so far."""
    if a[1] is None:
        counts = b[1]
    elif b[1] is None:
        counts = a[1]
    else:
        counts = a[1] + b[1]
    return min(a[0], b[0]), counts, a[2] + b[2]


class LP(shoal.Chare):
    """One logical process: its pending events, its stream, its counts.

    ``windows`` counts the windows it executed; an event carries the number of the window it
    was sent in, so an arrival is either due (sent in a window this LP executed: counted in
    ``arrived``) or ``early`` (sent in the window this LP has not executed yet; it cannot be
    later, since that window's reduction waits for this LP). ``expect`` is the number of due
    events the window results announced."""

    # LPs of this PE that finished the current window, per array (aggregation only: the
    # last one flushes the PE's buffers)
    finished: ClassVar[dict[int, int]] = {}

    def __init__(self, p: Params, npes: int, done: Any, progress: bool):
        lp = self.thisIndex[0]
        self.p, self.done, self.progress = p, done, progress
        self.agg: Any = None
        self.lp, self.nlps = lp, npes * p.lps
        self.heap = initial_events(p, lp)
        heapq.heapify(self.heap)
        self.stream = Stream(p, lp, npes)
        self.base = lp << UID_SHIFT
        self.seq = p.events
        self.committed = self.disorder = self.windows = self.waited = 0
        self.arrived = self.early = self.expect = 0
        self.last = -math.inf
        self.start_at = math.nan  # the earliest pending timestamp of the next window
        self.waiting = False
        self.shown = time.perf_counter()

    def start(self, agg: Any) -> None:
        """Begin with the first window reduction; ``agg``: the :class:`shoal.Aggregator` of
        the events, or None to send them directly."""
        self.agg = agg
        self.contribute((self.heap[0][0], None, 0), _window_sum, self.thisProxy.window)

    def event(self, ts: float, uid: int, window: int) -> None:
        """An event sent directly (one message each) in window ``window`` of its sender."""
        heapq.heappush(self.heap, (ts, uid))
        self._arrival(window)

    def item(self, rec: tuple[float, int, int]) -> None:
        """An event through the aggregator (the fields of :data:`EVENT`)."""
        ts, uid, window = rec
        heapq.heappush(self.heap, (ts, uid))
        self._arrival(window)

    def _arrival(self, window: int) -> None:
        if window > self.windows:
            self.early += 1
            return
        self.arrived += 1
        if self.waiting and self.arrived == self.expect:
            self.waiting = False
            self._advance()

    def window(self, result: tuple) -> None:
        """The window reduction's result: the earliest pending timestamp anywhere and the
        events each LP is to receive; go on once this LP's have all arrived."""
        start, counts, committed = result
        if counts is not None:
            self.expect += int(counts[self.lp])
        self.start_at = start
        if self.progress and self.lp == 0:
            self._show(start, committed)
        if self.arrived == self.expect:
            self._advance()
        else:
            self.waiting = True
            self.waited += 1

    def _advance(self) -> None:
        """Execute the window that starts at ``start_at`` and send its events, then
        contribute to the next window's reduction; or, past the end time, report."""
        p = self.p
        if self.start_at >= p.end_time:  # report, in the order simulate() reads
            self.contribute((self.committed, self.last, len(self.heap), self.seq - p.events,
                             self.arrived + self.early, self.disorder, self.waited,
                             self.windows),
                            shoal.Reducer.gather, self.done)
            return
        self.windows += 1
        self.arrived += self.early
        self.early = 0
        new = self._execute(min(self.start_at + p.lookahead, p.end_time))
        w = self.windows
        agg = self.agg
        if agg is None:
            lps = self.thisProxy
            for dest, ts, uid in new:
                lps[dest].event(ts, uid, w)
        else:
            send = agg.send
            for dest, ts, uid in new:
                send(dest, (ts, uid, w))
            self._finish_window()
        nxt = self.heap[0][0] if self.heap else math.inf
        counts = None
        if new:
            nxt = min(nxt, min(e[1] for e in new))
            counts = np.bincount([e[0] for e in new], minlength=self.nlps)
        self.contribute((nxt, counts, self.committed), _window_sum, self.thisProxy.window)

    def _execute(self, end: float) -> list[tuple[int, float, int]]:
        """Execute every pending event before ``end`` in timestamp order; the new events as
        (destination, timestamp, uid)."""
        heap, draw = self.heap, self.stream.draw
        last, seq, base = self.last, self.seq, self.base
        new = []
        while heap and heap[0][0] < end:
            ts = heapq.heappop(heap)[0]
            if ts < last:
                self.disorder += 1
            last = ts
            dest, delay = draw()
            new.append((dest, ts + delay, base + seq))
            seq += 1
        self.committed += len(new)
        self.last, self.seq = last, seq
        return new

    def _finish_window(self) -> None:
        """With aggregation: the last LP of this PE to finish the window flushes (``lps``
        of them: after a balancer moved LPs, a flush may come early or late, and the flush
        period sends what is left)."""
        cid = self.thisProxy.cid
        k = self.finished.get(cid, 0) + 1
        if k == self.p.lps:
            self.agg.flush()
            k = 0
        self.finished[cid] = k

    def _show(self, start: float, committed: int) -> None:
        now = time.perf_counter()
        if now - self.shown >= PROGRESS_EVERY:
            self.shown = now
            print(f"phold: window {self.windows}, virtual time {start:.4g} of "
                  f"{self.p.end_time:g}, {committed} events committed", file=sys.stderr,
                  flush=True)


async def simulate(p: Params, aggregate: bool = False, buffer_items: int = 1024,
                   mesh: tuple[int, ...] | None = None, progress: bool = False) -> Result:
    """Run PHOLD under YAWNS (call from ``main`` on PE 0) and gather every LP's counts.
    ``aggregate``: events go through a :class:`shoal.Aggregator` with buffers of
    ``buffer_items`` over the virtual ``mesh`` of PEs (default: the aggregator's choice);
    ``progress``: a line on stderr at most every second."""
    p.check()
    npes = shoal.num_pes()
    done = shoal.future()
    lps = shoal.Array(LP, (npes * p.lps,), args=(p, npes, done, progress))
    agg = None
    if aggregate:
        agg = shoal.Aggregator(lps, "item", item_dtype=EVENT, buffer_items=buffer_items,
                               mesh=mesh)
    await shoal.quiescence()
    t0 = time.perf_counter()
    lps.start(agg)
    final = await done
    seconds = time.perf_counter() - t0
    names = (*Result.PER_LP, "waited", "windows")  # the order of an LP's report
    got = {name: np.array(c) for name, c in zip(names, zip(*final, strict=True), strict=True)}
    windows = int(got.pop("windows")[0])
    return Result(**got, windows=windows, seconds=seconds)
