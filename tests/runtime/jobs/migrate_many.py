"""Batch migration (``migrate_many``, the load balancer's tool) under traffic, run by
test_migrate_many.py: ``python migrate_many.py batch [--shm BYTES]``. Every check is an
assert inside the job; the scenario returns (moves, arrivals, deferred requests)."""

import random

import numpy as np
from runner import main

import shoal
from shoal import Reducer
from shoal.runtime.context import current

N, ROUNDS, FAN = 48, 12, 6


class Walker(shoal.Chare):
    def __init__(self):
        self.out = {}  # receiver -> messages sent to it
        self.got = {}  # sender -> messages received from it
        self.bcasts = 0
        self.arrivals = 0
        self.rng = random.Random(self.thisIndex[0])

    def tick(self, r, fut):
        for _ in range(FAN):
            j = self.rng.randrange(N)
            k = self.out[j] = self.out.get(j, 0) + 1
            big = np.full(9000, float(k)) if k % 3 == 0 else None  # out of band
            self.thisProxy[j].take(self.thisIndex[0], k, big)
        self.contribute(FAN, Reducer.sum, fut)

    def take(self, src, k, big):
        last = self.got.get(src, 0)
        assert k == last + 1, f"{self.thisIndex}: message {k} from {src} after {last}"
        assert big is None or (big.shape == (9000,) and (big == k).all()), (k, big)
        self.got[src] = k

    def poke(self, src, k):
        self.take(src, k, None)

    def count(self):
        self.bcasts += 1

    async def hold(self, fut):
        self.gate = shoal.future()
        fut.send(shoal.my_pe())
        await self.gate  # suspended: a batch that names it must wait for it
        del self.gate

    def release(self):
        self.gate.send(None)

    def on_migrated(self):
        self.arrivals += 1

    def report(self, fut):
        self.contribute((self.thisIndex[0], shoal.my_pe(), self.out, self.got, self.bcasts,
                         self.arrivals), Reducer.gather, fut)


class Mover(shoal.Chare):
    """One per PE: queues messages for its elements, then moves about half of them in one
    migrate_many call (the queued messages travel with them)."""

    def __init__(self):
        self.rng = random.Random(1000 + shoal.my_pe())
        self.moved = 0

    def shuffle(self, arr, fut):
        rt = current()
        local = sorted(rt.colls[arr.cid].local.values(), key=lambda s: s.index)
        for slot in local:  # queued behind this call: they must migrate with the element
            obj = slot.obj
            for _ in range(3):
                k = obj.out[obj.thisIndex[0]] = obj.out.get(obj.thisIndex[0], 0) + 1
                arr[slot.index].poke(obj.thisIndex[0], k)
        assert len(rt.queue) >= 3 * len(local)
        moves = [(s, self.rng.randrange(shoal.num_pes())) for s in local
                 if self.rng.random() < 0.5]
        held = [(s.index[0], pe) for s, pe in moves if s.active]
        self.moved += sum(1 for s, pe in moves if pe != shoal.my_pe() and not s.active)
        rt.migration.migrate_many(moves)
        for s, pe in moves:
            if pe != shoal.my_pe():
                assert (s.coll.local.get(s.index) is s) == bool(s.active), s.index
        self.contribute(held, Reducer.gather, fut)

    def census(self, arr, fut):
        self.contribute((shoal.my_pe(), len(current().colls[arr.cid].local), self.moved),
                        Reducer.gather, fut)


async def batch():
    arr = shoal.Array(Walker, N)
    movers = shoal.Group(Mover)
    fut = shoal.future()
    arr[5].hold(fut)  # element 5 waits on a future from now on
    held_at = await fut
    sums = []
    deferred = []
    for r in range(ROUNDS):
        fut = shoal.future()
        arr.tick(r, fut)
        sums.append(fut)
        arr.count()
        moved = shoal.future()
        movers.shuffle(arr, moved)
        deferred += [x for part in await moved for x in part]
    assert [await f for f in sums] == [N * FAN] * ROUNDS
    arr[5].release()
    await shoal.quiescence()
    fut = shoal.future()
    arr.report(fut)
    reports = await fut
    sent = {}
    for i, _pe, out, _got, _b, _a in reports:
        for j, k in out.items():
            sent[(i, j)] = k
    got = {(src, i): k for i, _pe, _out, g, _b, _a in reports for src, k in g.items()}
    assert got == sent  # every message arrived exactly once (in order: checked on arrival)
    assert all(b == ROUNDS for *_, b, _a in reports)  # broadcasts replayed after moves
    fut = shoal.future()
    movers.census(arr, fut)
    census = await fut
    assert sum(n for _, n, _ in census) == N
    moves = sum(m for *_, m in census)
    arrivals = sum(a for *_, a in reports)
    # element 5 was named while suspended: it moved (to the last PE named) when its
    # coroutine returned, and never before
    last = [pe for i, pe in deferred if i == 5]
    want5 = last[-1] if last else held_at
    assert next(pe for i, pe, *_ in reports if i == 5) == want5, (last, held_at)
    assert arrivals == moves + (want5 != held_at) and moves > N
    # forwarding and caches still find every element after the moves
    for i in range(N):
        arr[i].poke(-1, 1)
    await shoal.quiescence()
    return moves, arrivals, len(deferred)


if __name__ == "__main__":
    main({"batch": batch})
