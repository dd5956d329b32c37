"""Broadcasts while elements migrate (run by test_broadcasts.py): ``python broadcasts.py
NAME... [--shm BYTES] [--history N]``. ``--history``: the broadcasts a PE keeps beyond
what departed elements need, lowered on every PE (windows of flow control keep PEs within
about 128 broadcasts of each other on small trees: more than the default 256 apart needs a
deeper tree)."""

import random
import sys
import time

from runner import main

import shoal
from shoal import Reducer
from shoal.runtime.collectives import broadcast
from shoal.runtime.context import current


class Hopper(shoal.Chare):
    def __init__(self, seed):
        self.seen = []
        self.moves = 0
        self.rng = random.Random(seed * 1000 + self.thisIndex[0])

    def step(self, k, p):
        """Broadcast number ``k``: checked against the last one run; with probability
        ``p``, move to a random PE."""
        assert k == len(self.seen) + 1, (self.thisIndex, k, self.seen[-3:])
        self.seen.append(k)
        if self.rng.random() < p:
            pe = self.rng.randrange(shoal.num_pes())
            self.moves += pe != shoal.my_pe()
            self.migrate(pe)

    def report(self, fut):
        self.contribute((self.thisIndex[0], len(self.seen), self.seen == list(
            range(1, len(self.seen) + 1)), self.moves), Reducer.gather, fut)


async def many():
    """300 broadcasts in a loop to 32 elements that move to a random PE after 20% of them:
    every element runs every broadcast once, in order. Returns the moves made and the
    replays sent."""
    n, count = 32, 300
    arr = shoal.Array(Hopper, n, args=(3,))
    for k in range(1, count + 1):
        arr.step(k, 0.2)
    await shoal.quiescence()
    fut = shoal.future()
    arr.report(fut)
    got = sorted(await fut)
    assert [(i, c, ok) for i, c, ok, _ in got] == [(i, count, True) for i in range(n)], got
    replays = await shoal.Group(Replays).count(ret=True)
    assert all(not pins for _, pins in replays), replays  # every pin was released
    return [sum(m for *_, m in got), sum(r for r, _ in replays)]


class Slow(shoal.Chare):
    def __init__(self):
        self.seen = []

    def step(self, k):
        """Broadcast ``k``; off PE 0 the first one is long (other PEs fall 300 broadcasts
        behind PE 0) and ends with a move to PE 0."""
        assert k == len(self.seen) + 1, (self.thisIndex, k, self.seen[-3:])
        self.seen.append(k)
        if k == 1 and shoal.my_pe() != 0:
            t = time.perf_counter() + 0.05
            while time.perf_counter() < t:
                pass
            self.migrate(0)

    def report(self):
        return shoal.my_pe(), self.seen == list(range(1, len(self.seen) + 1)), len(self.seen)


class Replays(shoal.Chare):
    def count(self):
        return current().broadcasts.replays, dict(current().broadcasts.pins)


async def behind():
    """Elements leave PEs that are 300 broadcasts behind PE 0 for PE 0, which has forgotten
    the ones they lack: the PEs they left replay them. Returns the replays sent."""
    n, count = 16, 300
    arr = shoal.Array(Slow, n)
    for k in range(1, count + 1):
        arr.step(k)
    await shoal.quiescence()
    assert await arr.report(ret=True) == [(0, True, count)] * n
    replays = await shoal.Group(Replays).count(ret=True)
    assert all(not pins for _, pins in replays), replays  # every pin was released
    return [r for r, _ in replays]


if __name__ == "__main__":
    if "--history" in sys.argv:
        k = sys.argv.index("--history")
        broadcast.HISTORY = int(sys.argv[k + 1])
        del sys.argv[k:k + 2]
    main({"many": many, "behind": behind})
