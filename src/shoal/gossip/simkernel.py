"""The compiled event loop of the gossip simulator (numba).

:func:`run` takes four named structures: the state of the nodes (:class:`NodeState`, updated
in place), the run's parameters (:class:`Config`), when nodes die and when the vectors are
snapshot (:class:`Schedule`), and the arrays it fills (:class:`Measures`).

State per node ``i`` (row ``i`` of the N x N matrices):

- ``ver[i, j]``: the version of node ``j``'s record that ``i`` holds, -1 if none. Node ``j``
  creates version ``k`` at time ``k + phase[j]`` (it acts once per unit of time at its own
  phase), so the record's creation time is ``ver + phase[j]``: exact, 2 bytes per entry (4
  beyond 32767 units), and "newer" is "higher version".
- ``cand[i, :ccount[i]]``: every entry whose time key ``floor(creation time * SUB)`` is
  ``>= thr[i]``, the key of the oldest entry of ``i``'s last window. Creation times only grow
  (merges keep the newer record), so the entries of the next window are all in this list: the
  window costs O(window + arrivals) instead of a scan of the vector. If the list overflows,
  ``overflow[i]`` asks for one rescan of the row. Node indices in it are unsigned (2 bytes
  up to 65536 nodes), which also spares the compiled loops numpy's negative-index
  wrap-around.
- ``ssum[i]``, ``known[i]``: sum of creation times and count of known entries of live nodes
  other than ``i``, so the average age at any time is O(1).

Ticks and arrivals that involve disjoint sets of nodes commute, so the loop gathers runs of
consecutive such events (in time order, random draws made in that order, :func:`_gather`) and
executes each run in parallel (:func:`_execute`): the result is the sequential one, bit for
bit, whatever the thread count.

The structures (NamedTuples) go as far as the stages that run once per unit, run or sample:
:func:`_unit`, :func:`_gather`, :func:`_execute`, :func:`_sample`. What runs once per event
(:func:`_tick`, :func:`_window`, :func:`_merge`, the body of :func:`_gather`) takes the
arrays it touches: numba counts references to each array of each argument, atomically, at
every call that it does not inline, and a tuple passes all of its arrays (with the window's
helpers, that cost about 5% of a run); numba also loses the writes made in a ``prange`` body
through a tuple's field (numba/numba#5872), so :func:`_execute` unpacks them first.

A run has many short parallel regions (one per run of at most ``BATCH`` events), and GNU
OpenMP (numba's ``omp`` layer) spins its threads between regions: on a machine whose cores
are busy with other work, a spinning thread takes the core the one still working needs.
``shoal gossip simulate --nodes 64,128 --window 10%:30%:10% --units 60`` took 0.8 s alone
on this 2-core machine and 47.7 s beside two busy loops; with ``OMP_WAIT_POLICY=PASSIVE``
(waiting threads sleep), 1.0 and 1.1 s, and at 4,096 nodes 1.5-1.7 s either way alone. So
importing this module sets ``OMP_WAIT_POLICY=PASSIVE`` unless it is set (OpenMP reads it
when the first parallel region loads it).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
from numba import prange

from shoal.jit import njit

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # (see the module doc)

# counters
SENT, LOST, TO_DEAD, DELIVERED, RESCANS = range(5)
# kinds of the events of a run: a tick whose window is delivered now, a tick whose message is
# lost (or sent to a dead node), a tick whose window is queued, the arrival of a queued window
DELIVER, DROP, QUEUE, ARRIVE = range(4)
WAIT = -1  # not an event: the tick waits for the next run

SUB = 16  # phase bins per unit of time: the fine time key is floor(creation time * SUB)
NBIN = 64 * SUB  # age bins of the window selection; older entries share the last one
BATCH = 128  # most events in one run


class NodeState(NamedTuple):
    """Every node's state (module docstring), updated in place; N nodes, lists of ``cap``."""

    phase: np.ndarray  # (N,) float64, distinct: each node acts at u + phase in unit u
    pbin: np.ndarray  # (N,) uint8: floor(phase * SUB)
    order: np.ndarray  # (N,) int32: the nodes by increasing phase
    ver: np.ndarray  # (N, N) int16 (int32 beyond 32767 units), -1: unknown
    cand: np.ndarray  # (N, cap) uint16 (uint32 beyond 65536 nodes): candidate lists
    ccount: np.ndarray  # (N,) int32: lengths of the candidate lists
    overflow: np.ndarray  # (N,) bool: the candidate list overflowed, rescan the row
    thr: np.ndarray  # (N,) int64: time key of the oldest entry of the last window
    ssum: np.ndarray  # (N,) float64: sum of the known creation times of live others
    known: np.ndarray  # (N,) int64: count of the known entries of live others
    alive: np.ndarray  # (N,) bool


class Config(NamedTuple):
    """The parameters of a run."""

    window: int  # W, entries per message
    units: int  # units of time to simulate
    warmup: int  # units before the measurements start
    samples: int  # measurements per unit, evenly spaced
    latency: float  # units of time from send to arrival (constant)
    loss: float  # probability that a message is lost
    bin_width: float  # of the age histogram, units of time
    seed: int  # of the draws of destinations and losses
    lanes: int  # parallel lanes of a run of events (threads)


class Schedule(NamedTuple):
    """When nodes die and when the vectors are snapshot."""

    death_node: np.ndarray  # (D,) int32
    death_time: np.ndarray  # (D,) float64, non-decreasing
    snapshot: np.ndarray  # (units,) bool: histogram the ages at the unit's first sample


class Measures(NamedTuple):
    """What a run measures (filled in place)."""

    hist: np.ndarray  # (nbins + 1,) int64: ages in bins of bin_width, the last for unknown
    max_age: np.ndarray  # (1,) float64: largest age seen at the snapshots
    unit_excl: np.ndarray  # (units,) float64: mean age per unit, own entry excluded
    unit_incl: np.ndarray  # (units,) float64: own entry included
    unit_known: np.ndarray  # (units,) float64: fraction of live others known
    dead_age: np.ndarray  # (units,) float64: mean age of the dead nodes' entries
    counters: np.ndarray  # (5,) int64: SENT, LOST, TO_DEAD, DELIVERED, RESCANS


class Lanes(NamedTuple):
    """Scratch rows of each parallel lane (row ``lane``)."""

    kbuf: np.ndarray  # (lanes, N) float64: selection keys
    ibuf: np.ndarray  # (lanes, N) like cand: node indices
    abuf: np.ndarray  # (lanes, N) uint16: age bins
    vbuf: np.ndarray  # (lanes, W) like ver: versions of a window


class Batch(NamedTuple):
    """A run of mutually independent events, event ``b`` at index ``b``."""

    kind: np.ndarray  # (BATCH,) int8: DELIVER, DROP, QUEUE or ARRIVE
    node: np.ndarray  # (BATCH,) int32: the node that ticks
    dst: np.ndarray  # (BATCH,) int32: the destination of its message
    slot: np.ndarray  # (BATCH,) int64: the queue slot (QUEUE, ARRIVE)
    rescan: np.ndarray  # (BATCH,) bool: the tick had to rescan its row


class Queue(NamedTuple):
    """Windows in flight (latency > 0), a FIFO ring of slots (latency is constant)."""

    time: np.ndarray  # (q,) float64: arrival time
    dst: np.ndarray  # (q,) int32: destination
    length: np.ndarray  # (q,) int32: window length
    idx: np.ndarray  # (q, W) like cand: the window's nodes
    vers: np.ndarray  # (q, W) like ver: their versions


class Work(NamedTuple):
    """The event loop's own arrays."""

    lanes: Lanes
    batch: Batch
    queue: Queue
    own: np.ndarray  # (N,) float64: creation time of each node's own newest record
    mark: np.ndarray  # (N,) int64: the last run that involves each node


class Cursor(NamedTuple):
    """Where the event loop stands between units."""

    head: int  # the queue's next arrival
    tail: int  # the queue's next free slot
    dp: int  # deaths done
    batch_id: int  # runs gathered so far


class Draw(NamedTuple):
    """The destination and loss drawn for the tick of ``order[tick]`` in the current unit
    (``tick`` -1: none yet). A tick postponed to the next run keeps its draws."""

    tick: int
    dst: int
    lost: bool


class Sums(NamedTuple):
    """The current unit's sums of the per-node measurements, over ``count`` of them."""

    excl: float
    incl: float
    known: float
    count: int


@njit(cache=True, nogil=True)
def select_largest(keys: np.ndarray, idx: np.ndarray, n: int, w: int) -> None:
    """Reorder ``keys[:n]`` and ``idx[:n]`` so that the ``w`` largest keys come first
    (Hoare quickselect, expected O(n)); keys must be distinct."""
    lo, hi, target = 0, n - 1, w - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        a, b, c = keys[lo], keys[mid], keys[hi]
        if a < b:
            pivot = b if b < c else (c if a < c else a)
        else:
            pivot = a if a < c else (c if b < c else b)
        i, j = lo, hi
        while i <= j:
            while keys[i] > pivot:
                i += 1
            while keys[j] < pivot:
                j -= 1
            if i <= j:
                keys[i], keys[j] = keys[j], keys[i]
                idx[i], idx[j] = idx[j], idx[i]
                i += 1
                j -= 1
        if target <= j:
            hi = j
        elif target >= i:
            lo = i
        else:
            break


@njit(cache=True, nogil=True)
def _touch(row: np.ndarray) -> float:
    """Stream a row into the cache before random accesses to it (the hardware prefetcher
    serves a sequential pass far faster than scattered misses). Returns ``0.0 * sum`` so that
    the caller can add it somewhere and the compiler cannot drop the loads."""
    acc = 0
    for j in range(0, row.shape[0], 32):
        acc += row[j]
    return 0.0 * acc


@njit(cache=True, nogil=True)
def _merge(ver: np.ndarray, phase: np.ndarray, pbin: np.ndarray, cand: np.ndarray,
           ccount: np.ndarray, overflow: np.ndarray, thr: np.ndarray, ssum: np.ndarray,
           known: np.ndarray, alive: np.ndarray, r: int, idx: np.ndarray, vers: np.ndarray,
           n: int) -> None:
    """Fig. 1, receive: keep each window entry that is newer than ``r``'s.

    Whether an entry is newer is a coin toss, so the loop has no branch on it (a mispredict
    per entry doubled its cost): versions are summed as integers and masked, and the phases
    of new entries are added apart (a branch: ``r`` learns of a node for the first time,
    rare after the first few units). Every entry is written to the list's next slot, and
    counted if it is a new candidate; a full list takes no more writes (the other branch,
    rarely taken), so that it keeps its entries and a count past it flags the overflow.
    ``r``'s own entry is never replaced: no copy of it is newer than ``r``'s own."""
    row = ver[r]
    crow = cand[r]
    cap = crow.shape[0]
    dsum = _touch(row) if 8 * n >= row.shape[0] else 0.0
    t = thr[r]
    c = ccount[r]
    dver = 0
    dknown = 0
    for e in range(n):
        j = idx[e]
        v = vers[e]
        old = row[j]
        nv = max(v, old)
        row[j] = nv
        newer = v > old
        live = newer & alive[j]
        dver += (nv - old) * live
        if old < 0:  # first news of j: also count its phase (old = -1 added 1 too many)
            if live:
                dknown += 1
                dsum += phase[j] - 1.0
        b = pbin[j]
        if c < cap:
            crow[c] = j
        c += newer & (nv * SUB + b >= t) & ((old < 0) | (old * SUB + b < t))
    ssum[r] += dsum + dver
    known[r] += dknown
    if c > cap:
        overflow[r] = True
        c = cap
    ccount[r] = c


@njit(cache=True, nogil=True, inline="always")
def _rescan(row: np.ndarray, pbin: np.ndarray, t: int, ibuf: np.ndarray) -> int:
    """Gather into ``ibuf`` the candidates of a whole row (after an overflow): the known
    entries whose time key is at least ``t``; return their count."""
    c = 0
    for j in range(row.shape[0]):
        v = row[j]
        ibuf[c] = j
        c += (v >= 0) & (v * SUB + pbin[j] >= t)
    return c


@njit(cache=True, nogil=True, inline="always")
def _edge_bin(row: np.ndarray, pbin: np.ndarray, src: np.ndarray, c: int, w: int, top: int,
              abuf: np.ndarray) -> int:
    """Put the age bin of each candidate ``src[:c]`` in ``abuf`` (bin ``a`` holds the time
    key ``top - a``, the last bin everything older) and return the bin that holds the
    ``w``-th youngest: the window's edge."""
    counts = np.zeros(NBIN, np.int32)
    for e in range(c):
        j = src[e]
        a = min(top - (row[j] * SUB + pbin[j]), NBIN - 1)
        abuf[e] = a
        counts[a] += 1
    edge = 0
    younger = 0
    while younger + counts[edge] < w:
        younger += counts[edge]
        edge += 1
    return edge


@njit(cache=True, nogil=True, inline="always")
def _keep_exact(row: np.ndarray, phase: np.ndarray, pbin: np.ndarray, crow: np.ndarray,
                src: np.ndarray, c: int, w: int, kbuf: np.ndarray) -> tuple[int, int]:
    """The window reaches entries older than the bins: select the ``w`` youngest of
    ``src[:c]`` by exact creation time into ``crow[:w]``, then the rest of the list (the
    others of the oldest's time key); return the list's length (more than ``crow`` holds: it
    overflowed) and its threshold, that key. Keys are integers ``ver * SUB + pbin``, as the
    merges compute them, so that the merges find in the list the entries it should hold."""
    cap = crow.shape[0]
    for e in range(c):
        kbuf[e] = row[src[e]] + phase[src[e]]
    select_largest(kbuf, src, c, w)
    oldest = 0
    for e in range(1, w):
        if kbuf[e] < kbuf[oldest]:
            oldest = e
    t = row[src[oldest]] * SUB + pbin[src[oldest]]
    for e in range(w):
        crow[e] = src[e]
    k = w
    for e in range(w, c):  # in place: k <= e; a full list keeps its entries (see _merge)
        j = src[e]
        if k < cap:
            crow[k] = j
        k += row[j] * SUB + pbin[j] >= t
    return k, t


@njit(cache=True, nogil=True, inline="always")
def _keep_binned(phase: np.ndarray, crow: np.ndarray, src: np.ndarray, c: int, w: int,
                 edge: int, kbuf: np.ndarray, ibuf: np.ndarray, abuf: np.ndarray) -> int:
    """Put the candidates ``src[:c]`` younger than the ``edge`` bin first in ``crow``, then
    the edge bin's, its window part (selected by exact phase) first; return the list's length
    (more than ``crow`` holds: it overflowed)."""
    cap = crow.shape[0]
    # in place (k, nb <= e): entries younger than the edge bin to the front of the list,
    # the edge bin to ibuf, then its window part (selected by exact phase) and the rest
    k = 0
    nb = 0
    for e in range(c):
        j = src[e]
        a = abuf[e]
        crow[k] = j
        k += a < edge
        ibuf[nb] = j
        nb += a == edge
    for e in range(nb):
        kbuf[e] = phase[ibuf[e]]
    select_largest(kbuf, ibuf, nb, w - k)
    for e in range(nb):
        crow[min(k, cap - 1)] = ibuf[e]
        k += 1
    return k


@njit(cache=True, nogil=True)
def _window(ver: np.ndarray, phase: np.ndarray, pbin: np.ndarray, cand: np.ndarray,
            ccount: np.ndarray, overflow: np.ndarray, thr: np.ndarray, i: int, w: int, u: int,
            kbuf: np.ndarray, ibuf: np.ndarray, abuf: np.ndarray) -> tuple[int, bool]:
    """Fig. 1, send: leave the ``w`` youngest entries of ``i`` (own included) in
    ``cand[i, :w]``, the rest of the candidate list after them; return the window's length
    and whether the row had to be rescanned.

    A radix select on creation time ``version + phase``: count the candidates per bin of
    1/SUB unit of age (``pbin[j] = floor(phase[j] * SUB)`` is exact and one byte, so the
    pass never touches the phases), keep the younger bins whole, and select by exact phase
    only inside the bin that straddles the window's edge (a few dozen entries). That bin's
    time key becomes the threshold ``thr[i]``: the list keeps every entry whose key is at
    least that, the window's part first.
    """
    row = ver[i]
    crow = cand[i]
    cap = crow.shape[0]
    rescan = overflow[i]
    if rescan:  # the list overflowed: gather the candidates from the whole row
        src = ibuf
        c = _rescan(row, pbin, thr[i], ibuf)
        overflow[i] = False
    else:  # work in place on the list
        src = crow
        c = ccount[i]
        if 8 * c >= row.shape[0]:
            kbuf[0] += _touch(row)  # scratch: keeps the loads alive
    if c <= w:
        for e in range(c):
            crow[e] = src[e]
        ccount[i] = c
        return c, rescan
    top = u * SUB + SUB - 1  # the time key of age bin 0
    edge = _edge_bin(row, pbin, src, c, w, top, abuf)
    if edge == NBIN - 1:  # the window reaches entries older than the bins: exact select
        k, t = _keep_exact(row, phase, pbin, crow, src, c, w, kbuf)
        thr[i] = t
    else:
        k = _keep_binned(phase, crow, src, c, w, edge, kbuf, ibuf, abuf)
        thr[i] = top - edge
    if k > cap:  # only after a rescan: the candidates outgrew the list, rescan next time
        overflow[i] = True
        k = cap
    ccount[i] = k
    return w, rescan


@njit(cache=True, nogil=True)
def _tick(ver: np.ndarray, phase: np.ndarray, pbin: np.ndarray, cand: np.ndarray,
          ccount: np.ndarray, overflow: np.ndarray, thr: np.ndarray, ssum: np.ndarray,
          known: np.ndarray, alive: np.ndarray, i: int, u: int, w: int, r: int, deliver: bool,
          kbuf: np.ndarray, ibuf: np.ndarray, abuf: np.ndarray,
          vbuf: np.ndarray) -> tuple[int, bool]:
    """One action of node ``i`` at unit ``u`` (Fig. 1): renew its own record, select its
    window, and merge it into ``r`` if ``deliver``. Returns (window length, rescanned)."""
    if ver[i, i] < 0:
        c = ccount[i]
        if c < cand.shape[1]:
            cand[i, c] = i
            ccount[i] = c + 1
        else:
            overflow[i] = True
    ver[i, i] = u
    m, rescan = _window(ver, phase, pbin, cand, ccount, overflow, thr, i, w, u, kbuf, ibuf, abuf)
    if deliver:
        for e in range(m):
            vbuf[e] = ver[i, cand[i, e]]
        _merge(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive, r, cand[i],
               vbuf, m)
    return m, rescan


@njit(cache=True, nogil=True)
def _post(ver: np.ndarray, cand: np.ndarray, q_len: np.ndarray, q_idx: np.ndarray,
          q_vers: np.ndarray, k: int, i: int, m: int) -> None:
    """Copy the window of ``i`` (the first ``m`` entries of its list) into queue slot ``k``."""
    q_len[k] = m
    for e in range(m):
        j = cand[i, e]
        q_idx[k, e] = j
        q_vers[k, e] = ver[i, j]


@njit(cache=True, nogil=True)
def _kill(s: NodeState, d: int) -> None:
    """Node ``d`` fails: the others stop counting its entry in their average age."""
    ver = s.ver
    s.alive[d] = False
    for i in range(ver.shape[0]):
        v = ver[i, d]
        if i != d and v >= 0:
            s.ssum[i] -= v + s.phase[d]
            s.known[i] -= 1


@njit(cache=True, parallel=True)
def _execute(s: NodeState, lanes: Lanes, batch: Batch, nops: int, queue: Queue, w: int,
             u: int) -> None:
    """Run the ``nops`` mutually independent events of ``batch`` in parallel, lane ``l``
    taking events ``l``, ``l + lanes``, ... (kinds: DELIVER, DROP, QUEUE: a tick whose window
    goes to queue slot ``slot``; ARRIVE: the arrival of queue slot ``slot``)."""
    # the loop body reaches arrays through locals or callees only (numba/numba#5872)
    ver, phase, pbin, cand, ccount = s.ver, s.phase, s.pbin, s.cand, s.ccount
    overflow, thr, ssum, known, alive = s.overflow, s.thr, s.ssum, s.known, s.alive
    kbuf, ibuf, abuf, vbuf = lanes.kbuf, lanes.ibuf, lanes.abuf, lanes.vbuf
    kinds, nodes, dsts, slots = batch.kind, batch.node, batch.dst, batch.slot
    rescans = batch.rescan
    q_dst, q_len, q_idx, q_vers = queue.dst, queue.length, queue.idx, queue.vers
    nlanes = kbuf.shape[0]
    for lane in prange(nlanes):
        for b in range(lane, nops, nlanes):
            kind = kinds[b]
            if kind == ARRIVE:
                k = slots[b]
                _merge(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive,
                       q_dst[k], q_idx[k], q_vers[k], q_len[k])
                continue
            m, rescan = _tick(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known,
                              alive, nodes[b], u, w, dsts[b], kind == DELIVER, kbuf[lane],
                              ibuf[lane], abuf[lane], vbuf[lane])
            rescans[b] = rescan
            if kind == QUEUE:
                _post(ver, cand, q_len, q_idx, q_vers, slots[b], nodes[b], m)


@njit(cache=True, nogil=True)
def _draw(tick: int, i: int, n: int, loss: float) -> Draw:
    """Draw the destination of the message of ``i`` (uniform over the others) and whether it
    is lost."""
    r = np.random.randint(0, n - 1)
    if r >= i:
        r += 1
    lost = loss > 0.0 and np.random.random() < loss
    return Draw(tick, r, lost)


@njit(cache=True, nogil=True)
def _kind(lost: bool, delayed: bool, dst_alive: bool, dst_busy: bool) -> int:
    """What becomes of a tick's message: DROP (lost, or sent to a dead node), QUEUE (latency),
    DELIVER now, or WAIT if it would be delivered now to a node that the run already
    involves (the tick waits for the next run, with the same draws)."""
    if lost:
        return DROP
    if delayed:
        return QUEUE
    if not dst_alive:
        return DROP
    return WAIT if dst_busy else DELIVER


@njit(cache=True, nogil=True)
def _check_room(head: int, tail: int, q: int) -> None:
    """Raise if the message queue has no free slot."""
    if (tail + 1) % q == head:
        raise RuntimeError("message queue full: latency too large")


@njit(cache=True, nogil=True)
def _gather(s: NodeState, cfg: Config, counters: np.ndarray, work: Work, u: int,
            t_stop: float, batch_id: int, ti: int, head: int, tail: int,
            draw: Draw) -> tuple[int, int, int, int, Draw]:
    """Gather run ``batch_id``: the ticks (from ``order[ti]``) and arrivals (from queue slot
    ``head``) of unit ``u`` in time order, up to ``BATCH`` of them, until one involves a node
    that the run already does. Ticks of dead nodes are skipped, arrivals at dead nodes
    dropped. Every event but the first, taken or skipped, lies before ``t_stop`` (the first
    may share a sample's time; an event after skipped ones may lie past a sample, a death or
    the end of the unit, which come first), so the loop also ends when the unit has no event
    left (both times infinite). Returns the number of events (0 if all were skipped) and the
    new ``ti``, ``head``, ``tail`` and draws. The loop calls no function on arrays (module
    docstring)."""
    n = s.ver.shape[0]
    phase, order, alive, mark = s.phase, s.order, s.alive, work.mark
    kinds, nodes, dsts, slots = work.batch.kind, work.batch.node, work.batch.dst, work.batch.slot
    q_time, q_dst = work.queue.time, work.queue.dst
    q = q_time.shape[0]
    delayed = cfg.latency > 0.0
    inf = np.inf
    nops = 0
    first = ti
    arr = head
    while nops < BATCH:
        t_tick = u + phase[order[ti]] if ti < n else inf
        t_arr = q_time[arr] if arr != tail else inf
        if (ti != first or arr != head) and min(t_tick, t_arr) >= t_stop:
            break
        if t_arr <= t_tick:  # an arrival
            r = q_dst[arr]
            if alive[r] and mark[r] == batch_id:
                break  # the arrival waits for the next run
            if alive[r]:
                mark[r] = batch_id
                kinds[nops] = ARRIVE
                slots[nops] = arr
                nops += 1
            counters[DELIVERED if alive[r] else TO_DEAD] += 1
            arr = (arr + 1) % q
            continue
        i = order[ti]
        if alive[i]:  # a tick
            if mark[i] == batch_id:
                break
            # draw once per tick, in event order
            draw = draw if draw.tick == ti else _draw(ti, i, n, cfg.loss)
            r = draw.dst
            kind = _kind(draw.lost, delayed, alive[r], mark[r] == batch_id)
            if kind == WAIT:
                break
            mark[i] = batch_id
            mark[r] = batch_id if kind == DELIVER else mark[r]
            counters[SENT] += 1
            # LOST, TO_DEAD or DELIVERED; nothing yet for a queued message
            counters[LOST if draw.lost else (TO_DEAD if kind == DROP else DELIVERED)] += (
                kind != QUEUE)
            kinds[nops] = kind
            nodes[nops] = i
            dsts[nops] = r
            if kind == QUEUE:
                _check_room(head, tail, q)
                slots[nops] = tail
                q_time[tail] = u + phase[i] + cfg.latency
                q_dst[tail] = r
                tail = (tail + 1) % q
            nops += 1
        ti += 1
    return nops, ti, arr, tail, draw


@njit(cache=True, nogil=True)
def _settle(s: NodeState, batch: Batch, nops: int, own: np.ndarray, counters: np.ndarray,
            u: int) -> None:
    """After a run: note the creation time of each ticking node's new record and count the
    rescans."""
    for b in range(nops):
        if batch.kind[b] != ARRIVE:
            own[batch.node[b]] = u + s.phase[batch.node[b]]
            if batch.rescan[b]:
                counters[RESCANS] += 1
                batch.rescan[b] = False


@njit(cache=True, nogil=True)
def _measure(s: NodeState, own: np.ndarray, t: float, acc: Sums) -> Sums:
    """Add the average age at time ``t`` of each live node's vector (own entry excluded and
    included) and the fraction of the live others it knows to ``acc``."""
    alive = s.alive
    known = s.known
    ssum = s.ssum
    n = alive.shape[0]
    acc_excl, acc_incl, acc_known, acc_n = acc
    live = 0
    for j in range(n):
        if alive[j]:
            live += 1
    for i in range(n):
        if not alive[i] or known[i] == 0 or own[i] < 0:
            continue
        acc_excl += t - ssum[i] / known[i]
        acc_incl += t - (ssum[i] + own[i]) / (known[i] + 1)
        acc_known += known[i] / max(live - 1, 1)
        acc_n += 1
    return Sums(acc_excl, acc_incl, acc_known, acc_n)


@njit(cache=True, nogil=True)
def _snapshot(s: NodeState, out: Measures, bin_width: float, t: float) -> None:
    """Histogram the ages at time ``t`` of every live node's entries of live others."""
    ver = s.ver
    alive = s.alive
    phase = s.phase
    hist = out.hist
    max_age = out.max_age
    n = ver.shape[0]
    nbins = hist.shape[0] - 1
    for i in range(n):
        if not alive[i]:
            continue
        for j in range(n):
            if j == i or not alive[j]:
                continue
            v = ver[i, j]
            if v < 0:
                hist[nbins] += 1
                continue
            age = t - v - phase[j]
            if age > max_age[0]:
                max_age[0] = age
            b = int(age / bin_width)
            hist[min(b, nbins - 1)] += 1


@njit(cache=True, nogil=True)
def _dead_age(s: NodeState, death_node: np.ndarray, dp: int, t: float) -> float:
    """The mean age at time ``t`` of the entries of the first ``dp`` dead nodes that live
    nodes hold (nan if none)."""
    ver = s.ver
    alive = s.alive
    phase = s.phase
    n = ver.shape[0]
    tot = 0.0
    cnt = 0
    for e in range(dp):
        d = death_node[e]
        for i in range(n):
            if alive[i] and ver[i, d] >= 0:
                tot += t - ver[i, d] - phase[d]
                cnt += 1
    return tot / cnt if cnt > 0 else np.nan


@njit(cache=True, nogil=True)
def _sample(s: NodeState, cfg: Config, sched: Schedule, out: Measures, own: np.ndarray,
            u: int, si: int, t: float, dp: int, acc: Sums) -> Sums:
    """Sample ``si`` (from 1) of unit ``u``, at time ``t``: add to the unit's sums; the first
    of the unit also snapshots the ages if scheduled and measures the dead nodes' entries."""
    acc = _measure(s, own, t, acc)
    if si == 1 and sched.snapshot[u]:
        _snapshot(s, out, cfg.bin_width, t)
    if si == 1 and dp > 0:
        out.dead_age[u] = _dead_age(s, sched.death_node, dp, t)
    return acc


@njit(cache=True, nogil=True)
def _unit(s: NodeState, cfg: Config, sched: Schedule, out: Measures, work: Work, u: int,
          cur: Cursor) -> Cursor:
    """Unit ``u``: the ticks of the nodes at ``u + phase`` (in ``order``), the arrivals of
    windows sent ``latency`` units earlier, ``samples`` evenly spaced measurements (from
    unit ``warmup`` on) and the deaths, in time order; then the unit's mean ages."""
    n = s.ver.shape[0]
    queue = work.queue
    death_time = sched.death_time
    nd = death_time.shape[0]
    inf = np.inf
    delayed = cfg.latency > 0.0
    head, tail, dp, batch_id = cur
    ti = 0
    si = 0
    draw = Draw(-1, 0, False)
    acc = Sums(0.0, 0.0, 0.0, 0)
    t_end = u + 1.0
    while True:
        t_tick = u + s.phase[s.order[ti]] if ti < n else inf
        t_samp = u + (si + 0.5) / cfg.samples if si < cfg.samples else inf
        t_arr = queue.time[head] if head != tail else inf
        t = min(t_tick, t_samp, t_arr)
        if t >= t_end:
            break
        if dp < nd and death_time[dp] <= t:
            _kill(s, sched.death_node[dp])
            dp += 1
            continue
        if t_samp == t and t_tick > t and t_arr > t:
            si += 1
            if u >= cfg.warmup:
                acc = _sample(s, cfg, sched, out, work.own, u, si, t, dp, acc)
            continue
        # gather a run of independent ticks and arrivals, in time order, and execute it
        batch_id += 1
        horizon = t + cfg.latency if delayed else inf
        t_stop = death_time[dp] if dp < nd and death_time[dp] < t_samp else t_samp
        t_stop = min(t_stop, t_end, horizon)
        nops, ti, head, tail, draw = _gather(s, cfg, out.counters, work, u, t_stop, batch_id,
                                             ti, head, tail, draw)
        _execute(s, work.lanes, work.batch, nops, queue, cfg.window, u)
        _settle(s, work.batch, nops, work.own, out.counters, u)
    if acc.count > 0:
        out.unit_excl[u] = acc.excl / acc.count
        out.unit_incl[u] = acc.incl / acc.count
        out.unit_known[u] = acc.known / acc.count
    return Cursor(head, tail, dp, batch_id)


@njit(cache=True, nogil=True)
def _work(s: NodeState, cfg: Config) -> Work:
    """Allocate the event loop's arrays."""
    n = s.ver.shape[0]
    w = cfg.window
    lanes = cfg.lanes
    delayed = cfg.latency > 0.0
    q = n * (int(cfg.latency) + 2) + BATCH if delayed else 1
    qw = w if delayed else 1
    return Work(
        Lanes(np.empty((lanes, n), np.float64), np.empty((lanes, n), s.cand.dtype),
              np.empty((lanes, n), np.uint16), np.empty((lanes, w), s.ver.dtype)),
        Batch(np.empty(BATCH, np.int8), np.empty(BATCH, np.int32), np.empty(BATCH, np.int32),
              np.empty(BATCH, np.int64), np.zeros(BATCH, np.bool_)),
        Queue(np.empty(q, np.float64), np.empty(q, np.int32), np.empty(q, np.int32),
              np.empty((q, qw), s.cand.dtype), np.empty((q, qw), s.ver.dtype)),
        np.full(n, -1.0), np.full(n, -1, np.int64))


@njit(cache=True)
def run(state: NodeState, cfg: Config, sched: Schedule, out: Measures) -> None:
    """Simulate ``cfg.units`` units of time of the Fig. 1 algorithm in event order, from
    ``state`` (updated in place), and fill ``out``.

    Events within a unit: ticks of the nodes at ``u + phase`` (in ``order``), arrivals of
    windows sent ``latency`` units earlier (FIFO: latency is constant), ``samples`` uniformly
    spaced measurements, deaths at ``death_time``.
    """
    np.random.seed(cfg.seed)
    work = _work(state, cfg)
    cur = Cursor(0, 0, 0, 0)
    for u in range(cfg.units):
        cur = _unit(state, cfg, sched, out, work, u, cur)
