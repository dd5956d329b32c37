"""Instrumentation: ``shoal.stats()`` on every PE (run by test_stats.py):
``python stats.py ring``."""

import time

from runner import main

import shoal
from shoal import Reducer


class Stats(shoal.Chare):
    def get(self, fut):
        self.contribute(shoal.stats(), Reducer.gather, fut)


class Busy(shoal.Chare):
    def work(self, k, seconds):
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            pass
        if k:
            self.thisProxy[(self.thisIndex[0] + 1) % 4].work(k - 1, seconds)


async def ring():
    """12 calls of 2 ms around a ring of 4 elements, 3 per element, 11 messages between
    them: the stats of every PE give each element's calls and wall time per entry method,
    the messages and bytes per (sender, receiver) pair (bytes > 0 between PEs), and the PE's
    idle time."""
    b = shoal.Array(Busy, 4)
    b[0].work(11, 0.002)
    await shoal.quiescence()
    fut = shoal.future()
    shoal.Group(Stats).get(fut)
    per_pe = await fut
    calls = {}
    wall = {}
    comm = {}
    for st in per_pe:
        assert st["idle"] > 0
        for key, methods in st["elements"].items():
            if key[0] == b.cid:
                calls[key[1]] = methods["work"][0]
                wall[key[1]] = methods["work"][1]
        for (src, dst), (msgs, nbytes) in st["comm"].items():
            if dst[0] == b.cid:
                comm[(src, dst[1])] = (msgs, nbytes)
    assert calls == {(i,): 3 for i in range(4)}, calls
    assert all(0.006 <= w < 0.5 for w in wall.values()), wall
    ring = {k: v for k, v in comm.items() if k[0][0] == b.cid}
    assert sum(m for m, _ in ring.values()) == 11
    assert all(k[1] == ((k[0][1][0] + 1) % 4,) for k in ring)
    pes = shoal.num_pes()
    crossing = [v for k, v in ring.items() if (k[0][1][0] * pes // 4) != (k[1][0] * pes // 4)]
    assert all(nbytes > 0 for _, nbytes in crossing) and crossing


class Waiter(shoal.Chare):
    async def work(self, seconds):
        await shoal.sleep(0.001)
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:  # after the await: still this call's work
            pass


async def after_await():
    """A coroutine entry method's time after an ``await`` counts for its element: one
    call, at least the 20 ms it spins once resumed."""
    w = shoal.Array(Waiter, 2)
    w.work(0.02)
    await shoal.quiescence()
    fut = shoal.future()
    shoal.Group(Stats).get(fut)
    per_pe = await fut
    seen = {key[1]: methods["work"] for st in per_pe for key, methods in st["elements"].items()
            if key[0] == w.cid}
    assert sorted(seen) == [(0,), (1,)], seen
    assert all(calls == 1 and wall >= 0.02 for calls, wall, _ in seen.values()), seen


if __name__ == "__main__":
    main({"ring": ring, "after_await": after_await})
