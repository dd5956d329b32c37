"""The compiled event loop of the gossip simulator (numba).

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
consecutive such events (in time order, random draws made in that order) and executes each run
in parallel: the result is the sequential one, bit for bit, whatever the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# counters
SENT, LOST, TO_DEAD, DELIVERED, RESCANS = range(5)


@njit(cache=True, nogil=True)
def select_largest(keys, idx, n, w):
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
def _touch(row):
    """Stream a row into the cache before random accesses to it (the hardware prefetcher
    serves a sequential pass far faster than scattered misses). Returns ``0.0 * sum`` so that
    the caller can add it somewhere and the compiler cannot drop the loads."""
    acc = 0
    for j in range(0, row.shape[0], 32):
        acc += row[j]
    return 0.0 * acc


@njit(cache=True, nogil=True)
def _merge(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive, r, idx, vers, n):
    """Fig. 1, receive: keep each window entry that is newer than ``r``'s.

    Whether an entry is newer is a coin toss, so the loop has no branch on it (a mispredict
    per entry doubled its cost): versions are summed as integers and masked, and the phases
    of new entries are added apart (the only branch: ``r`` learns of a node for the first
    time, rare after the first few units). ``r``'s own entry is never replaced: no copy of
    it is newer than ``r``'s own."""
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
        crow[min(c, cap - 1)] = j
        c += newer & (nv * SUB + b >= t) & ((old < 0) | (old * SUB + b < t))
    ssum[r] += dsum + dver
    known[r] += dknown
    if c > cap:
        overflow[r] = True
        c = cap
    ccount[r] = c


SUB = 16  # phase bins per unit of time: the fine time key is floor(creation time * SUB)
NBIN = 64 * SUB  # age bins of the window selection; older entries share the last one


@njit(cache=True, nogil=True)
def _window(ver, phase, pbin, cand, ccount, overflow, thr, i, w, u, kbuf, ibuf, abuf):
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
    n_all = row.shape[0]
    rescan = overflow[i]
    if rescan:  # the list overflowed: gather the candidates from the whole row
        src = ibuf
        c = 0
        t = thr[i]
        for j in range(n_all):
            v = row[j]
            ibuf[c] = j
            c += (v >= 0) & (v * SUB + pbin[j] >= t)
        overflow[i] = False
    else:  # work in place on the list
        src = crow
        c = ccount[i]
        if 8 * c >= n_all:
            kbuf[0] += _touch(row)  # scratch: keeps the loads alive
    if c <= w:
        for e in range(c):
            crow[e] = src[e]
        ccount[i] = c
        return c, rescan
    top = u * SUB + SUB - 1  # the time key of age bin 0
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
    if edge == NBIN - 1:  # the window reaches entries older than the bins: exact select
        for e in range(c):
            kbuf[e] = row[src[e]] + phase[src[e]]
        select_largest(kbuf, src, c, w)
        lowest = kbuf[0]
        for e in range(1, w):
            lowest = min(lowest, kbuf[e])
        t = int(np.floor(lowest * SUB))
        for e in range(w):
            crow[e] = src[e]
        k = w
        for e in range(w, c):  # in place: k <= e
            crow[min(k, cap - 1)] = src[e]
            k += kbuf[e] >= t
        thr[i] = t
    else:
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
        thr[i] = top - edge
    if k > cap:  # only after a rescan: the candidates outgrew the list, rescan next time
        overflow[i] = True
        k = cap
    ccount[i] = k
    return w, rescan


@njit(cache=True, nogil=True)
def _tick(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive, i, u, w, r, deliver,
          kbuf, ibuf, abuf, vbuf):
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
def _kill(ver, phase, ssum, known, alive, d):
    alive[d] = False
    for i in range(ver.shape[0]):
        v = ver[i, d]
        if i != d and v >= 0:
            ssum[i] -= v + phase[d]
            known[i] -= 1


@njit(cache=True, parallel=True)
def _execute(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive, w, u, nops,
             op_kind, op_node, op_dst, op_slot, kbuf, ibuf, abuf, vbuf, rescans,
             q_dst, q_len, q_idx, q_ver):
    """Run ``nops`` mutually independent events in parallel. Kinds: 0 tick delivered now,
    1 tick whose message is lost, 2 tick queued in FIFO slot ``op_slot``, 3 arrival of
    FIFO slot ``op_slot``."""
    lanes = kbuf.shape[0]
    for lane in prange(lanes):
        for b in range(lane, nops, lanes):
            kind = op_kind[b]
            if kind == 3:
                k = op_slot[b]
                _merge(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive,
                       q_dst[k], q_idx[k], q_ver[k], q_len[k])
                continue
            m, rescan = _tick(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive,
                              op_node[b], u, w, op_dst[b], kind == 0, kbuf[lane],
                              ibuf[lane], abuf[lane], vbuf[lane])
            rescans[b] = rescan
            if kind == 2:
                k = op_slot[b]
                i = op_node[b]
                q_len[k] = m
                for e in range(m):
                    j = cand[i, e]
                    q_idx[k, e] = j
                    q_ver[k, e] = ver[i, j]


BATCH = 128


@njit(cache=True)
def run(ver, phase, pbin, order, cand, ccount, overflow, thr, ssum, known, alive,
        w, units, warmup, samples, latency, loss, death_node, death_time,
        snapshot, hist, bin_width, max_age, unit_excl, unit_incl, unit_known, dead_age,
        counters, seed, lanes):
    """Simulate ``units`` units of time of the Fig. 1 algorithm in event order.

    Events within a unit: ticks of the nodes at ``u + phase`` (in ``order``), arrivals of
    windows sent ``latency`` units earlier (FIFO: latency is constant), ``samples`` uniformly
    spaced measurements, deaths at ``death_time``. Fills the per-unit arrays and ``hist``.
    """
    np.random.seed(seed)
    n = ver.shape[0]
    kbuf = np.empty((lanes, n), np.float64)
    ibuf = np.empty((lanes, n), cand.dtype)
    abuf = np.empty((lanes, n), np.uint16)
    vbuf = np.empty((lanes, w), ver.dtype)
    own = np.full(n, -1.0)  # creation time of each node's own newest record
    mark = np.full(n, -1, np.int64)
    op_kind = np.empty(BATCH, np.int8)
    op_node = np.empty(BATCH, np.int32)
    op_dst = np.empty(BATCH, np.int32)
    op_slot = np.empty(BATCH, np.int64)
    rescans = np.zeros(BATCH, np.bool_)
    delayed = latency > 0.0
    q = n * (int(latency) + 2) + BATCH if delayed else 1
    q_time = np.empty(q, np.float64)
    q_dst = np.empty(q, np.int32)
    q_len = np.empty(q, np.int32)
    q_idx = np.empty((q, w if delayed else 1), cand.dtype)
    q_ver = np.empty((q, w if delayed else 1), ver.dtype)
    head = 0
    tail = 0
    dp = 0
    nd = death_node.shape[0]
    nbins = hist.shape[0] - 1
    inf = np.inf
    batch_id = 0
    pend_ti = -1
    pend_r = 0
    pend_lost = False
    for u in range(units):
        ti = 0
        si = 0
        pend_ti = -1
        t_end = u + 1.0
        acc_excl = 0.0
        acc_incl = 0.0
        acc_known = 0.0
        acc_n = 0
        while True:
            t_tick = u + phase[order[ti]] if ti < n else inf
            t_samp = u + (si + 0.5) / samples if si < samples else inf
            t_arr = q_time[head] if head != tail else inf
            t = min(t_tick, t_samp, t_arr)
            if t >= t_end:
                break
            if dp < nd and death_time[dp] <= t:
                _kill(ver, phase, ssum, known, alive, death_node[dp])
                dp += 1
                continue
            if t_samp == t and t_tick > t and t_arr > t:
                si += 1
                if u < warmup:
                    continue
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
                if si == 1 and snapshot[u]:
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
                if si == 1 and dp > 0:
                    tot = 0.0
                    cnt = 0
                    for e in range(dp):
                        d = death_node[e]
                        for i in range(n):
                            if alive[i] and ver[i, d] >= 0:
                                tot += t - ver[i, d] - phase[d]
                                cnt += 1
                    dead_age[u] = tot / cnt if cnt > 0 else np.nan
                continue
            # gather a run of independent ticks and arrivals, in time order
            batch_id += 1
            nops = 0
            horizon = t + latency if delayed else inf
            t_stop = t_samp
            if dp < nd and death_time[dp] < t_stop:
                t_stop = death_time[dp]
            t_stop = min(t_stop, t_end, horizon)
            arr = head
            while nops < BATCH:
                t_tick = u + phase[order[ti]] if ti < n else inf
                t_arr = q_time[arr] if arr != tail else inf
                if nops > 0 and min(t_tick, t_arr) >= t_stop:
                    break
                if t_arr <= t_tick:
                    r = q_dst[arr]
                    if not alive[r]:
                        counters[TO_DEAD] += 1
                        arr = (arr + 1) % q
                        continue
                    if mark[r] == batch_id:
                        break
                    mark[r] = batch_id
                    counters[DELIVERED] += 1
                    op_kind[nops] = 3
                    op_slot[nops] = arr
                    arr = (arr + 1) % q
                    nops += 1
                    continue
                i = order[ti]
                if not alive[i]:
                    ti += 1
                    continue
                if mark[i] == batch_id:
                    break
                if pend_ti != ti:  # draw once per tick, in event order
                    pend_ti = ti
                    pend_r = np.random.randint(0, n - 1)
                    if pend_r >= i:
                        pend_r += 1
                    pend_lost = loss > 0.0 and np.random.random() < loss
                r = pend_r
                lost = pend_lost
                kind = 1
                if not lost and delayed:
                    kind = 2
                elif not lost and alive[r]:
                    if mark[r] == batch_id:
                        break  # the tick waits for the next run, with the same draws
                    kind = 0
                mark[i] = batch_id
                if kind == 0:
                    mark[r] = batch_id
                counters[SENT] += 1
                if lost:
                    counters[LOST] += 1
                elif kind == 1:
                    counters[TO_DEAD] += 1
                elif kind == 0:
                    counters[DELIVERED] += 1
                op_kind[nops] = kind
                op_node[nops] = i
                op_dst[nops] = r
                if kind == 2:
                    if (tail + 1) % q == head:
                        raise RuntimeError("message queue full: latency too large")
                    op_slot[nops] = tail
                    q_time[tail] = u + phase[i] + latency
                    q_dst[tail] = r
                    tail = (tail + 1) % q
                ti += 1
                nops += 1
            head = arr
            _execute(ver, phase, pbin, cand, ccount, overflow, thr, ssum, known, alive, w, u,
                     nops, op_kind, op_node, op_dst, op_slot, kbuf, ibuf, abuf, vbuf, rescans,
                     q_dst, q_len, q_idx, q_ver)
            for b in range(nops):
                if op_kind[b] != 3:
                    own[op_node[b]] = u + phase[op_node[b]]
                    if rescans[b]:
                        counters[RESCANS] += 1
                        rescans[b] = False
        if acc_n > 0:
            unit_excl[u] = acc_excl / acc_n
            unit_incl[u] = acc_incl / acc_n
            unit_known[u] = acc_known / acc_n
