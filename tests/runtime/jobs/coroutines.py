"""Coroutine entry methods: channels, awaited calls, sleep, and a migration asked for while
one is suspended (run by test_coroutines.py and test_buffers.py):
``python coroutines.py NAME... [--shm BYTES]``."""

import time

import numpy as np
from runner import main

import shoal
from shoal import Reducer


class Ring(shoal.Chare):
    def __init__(self, n):
        self.n = n

    async def run(self, steps, fut):
        i = self.thisIndex[0]
        left = shoal.Channel(self, self.thisProxy[(i - 1) % self.n])
        right = shoal.Channel(self, self.thisProxy[(i + 1) % self.n])
        value = float(i)
        for step in range(steps):
            right.send(np.full(2000, value))  # out of band when remote
            left.send(value)
            from_left = await left.recv()
            from_right = await right.recv()
            assert from_left.shape == (2000,) and from_left[0] == (i - 1 - step) % self.n
            value = float(from_left[0])
            assert from_right == float((i + 1 - step) % self.n)
        self.contribute(value, Reducer.sum, fut)

    def twice(self, x):
        return 2 * x

    async def later(self, x):
        await shoal.sleep(0.004 * (self.n - self.thisIndex[0]))  # the last index ends first
        return x + self.thisIndex[0]

    async def nap(self, seconds, fut):
        await shoal.sleep(seconds)
        self.thisProxy[0].relay(fut)

    def relay(self, fut):
        fut.send("rested")

    async def ask(self, fut):
        other = self.thisProxy[(self.thisIndex[0] + 1) % self.n]
        total = 0
        for k in range(5):
            total += await other.twice(k, ret=True)
        self.contribute(total, Reducer.sum, fut)


def on_pe0(index, dims, npes):
    return 0


class Holder(shoal.Chare):
    """Asks to migrate while one of its coroutines is suspended."""

    def __init__(self):
        self.moves = 0

    async def hold(self, fut):
        value = await shoal.Channel(self, self.thisProxy[1]).recv()
        fut.send((value, shoal.my_pe()))

    def move(self, pe):
        self.migrate(pe)

    def where(self):
        return shoal.my_pe(), self.moves

    def release(self, value):
        shoal.Channel(self, self.thisProxy[0]).send(value)

    def on_migrated(self):
        self.moves += 1


async def channels():
    """Coroutines on a ring pass arrays (out of band between PEs) one way and numbers the
    other way through channels, 25 steps, each message in order."""
    n, steps = 6, 25
    ring = shoal.Array(Ring, n, args=(n,))
    fut = shoal.future()
    ring.run(steps, fut)
    # each value moved one place right per step: the sum is unchanged
    assert await fut == float(sum(range(n)))


async def awaits():
    """A coroutine awaits calls with ``ret=True`` to another element; a broadcast with
    ``ret=True`` to coroutines waits for every one to return and lists them in index order,
    though the last index ends first."""
    n = 6
    ring = shoal.Array(Ring, n, args=(n,))
    fut = shoal.future()
    ring.ask(fut)
    assert await fut == n * 2 * sum(range(5))
    assert await ring.later(100, ret=True) == [100 + i for i in range(n)]


async def sleeping():
    """``shoal.sleep`` waits at least its time; quiescence waits for a sleeping coroutine and
    for what it sends when it wakes."""
    n = 6
    ring = shoal.Array(Ring, n, args=(n,))
    t0 = time.perf_counter()
    await shoal.sleep(0.05)
    assert time.perf_counter() - t0 >= 0.05
    fut = shoal.future()
    ring[1].nap(0.2, fut)
    await shoal.quiescence()
    assert fut.done and await fut == "rested"


async def suspended_migration():
    """A migration asked for while a coroutine is suspended waits for it to return (a
    coroutine's frame cannot be pickled), then happens with messages still in order."""
    holders = shoal.Array(Holder, 2, map=on_pe0)
    fut = shoal.future()
    holders[0].hold(fut)
    last = shoal.num_pes() - 1
    holders[0].move(last)
    for _ in range(3):
        assert await holders[0].where(ret=True) == (0, 0)
    holders[1].release("go")
    assert await fut == ("go", 0)
    assert await holders[0].where(ret=True) == (last, 1)


SCENARIOS = {"channels": channels, "awaits": awaits, "sleeping": sleeping,
             "suspended_migration": suspended_migration}

if __name__ == "__main__":
    main(SCENARIOS)
