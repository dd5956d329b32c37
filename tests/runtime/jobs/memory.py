"""Memory bounds of the runtime (run by test_memory.py): ``python memory.py NAME...
[--shm BYTES] [--pool-bytes BYTES]``."""

import os
import tempfile
import time

import numpy as np
from runner import main

import shoal
from shoal.runtime.context import current

MIB = 1 << 20


def resident_mib(peak=False):
    """This process's resident memory in MiB, now or at its peak (VmHWM)."""
    key = "VmHWM:" if peak else "VmRSS:"
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {key}")


class Peer(shoal.Chare):
    def __init__(self):
        self.got = {}
        self.total = 0

    def take(self, arr, k):
        assert arr.nbytes == k and (arr == k % 251).all(), k
        self.total += 1

    def pool(self):
        pool = current().net.pool
        return pool.bytes, pool.limit, len(pool)

    def flood(self, to, n, size=0):
        """Send ``n`` numbered messages to each element of ``to``, round-robin, in this one
        entry method (``size``: bytes of an array in each, 0: none)."""
        arr = np.zeros(size, np.uint8) if size else None
        peers = [self.thisProxy[j] for j in to]
        for k in range(n):
            for p in peers:
                p.small(self.thisIndex[0], size, k, arr)

    def small(self, src, size, k, arr):
        assert (arr is None) == (size == 0) and (arr is None or arr.nbytes == size)
        last = self.got.get((src, size), -1)
        assert k == last + 1, f"{self.thisIndex}: message {k} from {src} after {last}"
        self.got[src, size] = k

    def busy(self, seconds):
        """Hold this PE (no receiving) for ``seconds`` of wall time."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def hold_until(self, flag, limit):
        """Hold this PE (no receiving) until file ``flag`` exists or ``limit`` seconds have
        passed; whether the flag came."""
        end = time.perf_counter() + limit
        while not os.path.exists(flag):
            if time.perf_counter() > end:
                return False
        return True

    def flood_then_signal(self, to, n, size, flag):
        """Send ``n`` messages to element ``to``, then have this PE's other element write
        file ``flag`` (a local message: it runs once this entry method has returned)."""
        self.flood([to], n, size)
        self.thisProxy[self.thisIndex[0] + 1].signal(flag)

    def signal(self, flag):
        with open(flag, "w"):
            pass

    def waits(self):
        """This PE's idle seconds (shoal.stats) and, of them, its waits for windows: all of
        it, and asleep."""
        rt = current()
        return rt.stats()["idle"], rt.net.flow.waited, rt.net.flow.slept

    def report(self):
        flow = getattr(current().net, "flow", None)  # (None: a runtime without windows)
        return (dict(self.got), resident_mib(), resident_mib(peak=True),
                0 if flow is None else flow.waits)


async def pool():
    """PE 0 sends 40 arrays of distinct sizes of 1-2 MiB by MPI to PE 1, which drops each:
    the buffers PE 1 keeps to receive into stay within its pool's bytes."""
    p = shoal.Array(Peer, 2)
    rng = np.random.default_rng(5)
    for n in rng.integers(MIB, 2 * MIB, 40):
        n = int(n)
        await p[1].take(np.full(n, n % 251, np.uint8), n, ret=True)
    kept, limit, buffers = await p[1].pool(ret=True)
    assert kept <= limit, (kept, limit)
    return [kept, limit, buffers]


async def mutual():
    """Two elements on two PEs send each other 200,000 numbered messages, each in one entry
    method: both finish, every message arrives once and in order; returns each PE's
    resident memory (MiB) at the start and its peak, and the windows each waited for."""
    p = shoal.Array(Peer, 2)
    before = [resident_mib(), (await p[1].report(ret=True))[1]]
    n = 200_000
    a, b = p[0].flood([1], n, 0, ret=True), p[1].flood([0], n, 0, ret=True)
    await a
    await b
    await shoal.quiescence()
    got = await p.report(ret=True)
    assert got[0][0] == {(1, 0): n - 1} and got[1][0] == {(0, 0): n - 1}, got
    return [before, [g[2] for g in got], [g[3] for g in got]]


async def ring():
    """Each of 2 elements per PE sends 20,000 messages to each element of the next PE, and
    64 with a 1 MiB array (so that PEs wait for windows of bytes too), all in one entry
    method: a cycle of PEs that wait for each other. Everything arrives in order."""
    npes = shoal.num_pes()
    p = shoal.Array(Peer, 2 * npes)  # block map: elements 2q and 2q + 1 on PE q
    n = 2 * npes
    futs = [p[i].flood([(2 * (i // 2) + 2 + j) % n for j in range(2)], 20_000, ret=True)
            for i in range(n)]
    futs += [p[i].flood([(i + 2) % n], 64, MIB, ret=True) for i in range(n)]
    for f in futs:
        await f
    await shoal.quiescence()
    got = await p.report(ret=True)
    for i, (senders, *_) in enumerate(got):
        prev = [(2 * (i // 2) - 2 + j) % n for j in range(2)]
        assert senders == {**{(j, 0): 20_000 - 1 for j in prev},
                           ((i - 2) % n, MIB): 64 - 1}, (i, senders)
    return [g[3] for g in got]


class Mover(shoal.Chare):
    def __init__(self):
        self.got = 0
        self.arrivals = 0

    def go(self, pe):
        self.migrate(pe)

    def take(self, k):
        assert k == self.got, (self.thisIndex, k, self.got)
        self.got += 1

    def on_migrated(self):
        self.arrivals += 1

    def where(self):
        return shoal.my_pe(), self.got, self.arrivals


class Counter(shoal.Chare):
    """One per PE: counts the calls of its PE's migrate_many."""

    def wrap(self):
        migration = current().migration
        plain = migration.migrate_many
        self.calls = 0

        def counted(moves, step=0):
            self.calls += 1
            return plain(moves, step)

        migration.migrate_many = counted

    def calls_made(self):
        return self.calls


def on_pe0(index, dims, npes):
    return 0


async def single_migrates():
    """2000 elements on PE 0 each call ``self.migrate(1)`` in one broadcast, while main
    sends each of them 3 numbered messages: they move in one batch (one migrate_many on PE
    0, not one per element), every message arrives in order, on_migrated runs once each."""
    n = 2000
    counter = shoal.Group(Counter)
    await counter.wrap(ret=True)
    m = shoal.Array(Mover, n, map=on_pe0)
    m.go(1)
    for k in range(3):
        for i in range(n):
            m[i].take(k)
    await shoal.quiescence()
    assert await m.where(ret=True) == [(1, 3, 1)] * n
    calls = await counter.calls_made(ret=True)
    return calls


def first_alone(index, dims, npes):
    """Element 0 on PE 0, the others on PE 1."""
    return min(index[0], 1)


async def backlog():
    """PE 0 is held until PE 1 writes a flag file, which PE 1 does in the entry method after
    one that sends PE 0 more than two windows of messages: the sender goes on with its work
    while its windows are full (before: its send waited for PE 0 to receive, and PE 0
    waited for the flag: both waited until the hold's limit). Everything arrives in order."""
    p = shoal.Array(Peer, 3, map=first_alone)
    flag = os.path.join(tempfile.mkdtemp(), "flag")
    n = 300  # (two windows: 128 messages; the backlog takes 1,024)
    held = p[0].hold_until(flag, 20.0, ret=True)
    sent = p[1].flood_then_signal(0, n, 6000, flag, ret=True)
    came = await held
    await sent
    await shoal.quiescence()
    got = (await p[0].report(ret=True))[0]
    assert got == {(1, 6000): n - 1}, got
    return [came]


async def blocked():
    """PE 1 floods PE 0 while PE 0 is held for 1 s: PE 1 waits for windows, and its wait
    is idle time (asleep), not time another process held its core (the balancer's
    background: it took the PE that waits on a busy one for a slow one)."""
    p = shoal.Array(Peer, 2)
    idle0 = (await p[1].waits(ret=True))[0]
    # envelopes of 6 KB: over MPI_Send's 4 KB, they go by MPI_Isend, and the windows hold
    # the sender back (a smaller one blocks in MPICH's MPI_Send once its cells are full)
    flood = p[1].flood([0], 50_000, 6000, ret=True)  # (a few seconds of sending)
    await shoal.sleep(0.1)  # PE 1 floods, PE 0 receives
    held = p[0].busy(1.0, ret=True)  # then holds (a call from main to its PE runs at once)
    await held
    await flood
    await shoal.quiescence()
    idle1, waited, slept = await p[1].waits(ret=True)
    return [idle1 - idle0, waited, slept]


if __name__ == "__main__":
    main({"pool": pool, "mutual": mutual, "ring": ring, "single_migrates": single_migrates,
          "blocked": blocked, "backlog": backlog})
