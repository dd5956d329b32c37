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


class Table(shoal.Chare):
    def lookup(self, i):
        return 10 * i


class Built(shoal.Chare):
    """A chare whose constructor awaits: a sleep, a call to another chare, an allreduce and
    a channel (the runtime's own messages reach it while its messages wait); element 0
    asks to move in it."""

    async def __init__(self, n, table):
        self.log = ["init"]
        i = self.thisIndex[0]
        await shoal.sleep(0.01 * (i % 3))
        self.base = await table[0].lookup(i, ret=True)
        self.total = await self.allreduce(i, Reducer.sum)
        right = shoal.Channel(self, self.thisProxy[(i + 1) % n])
        left = shoal.Channel(self, self.thisProxy[(i - 1) % n])
        right.send(i)
        self.left = await left.recv()
        if i == 0:
            self.migrate(shoal.num_pes() - 1)
        self.log.append("built")

    def hit(self, tag):
        self.log.append(tag)
        return self.base

    def item(self, k):
        self.log.append(("item", k))

    def state(self):
        return self.log, self.base, self.total, self.left, shoal.my_pe()


class Lone(shoal.Chare):
    async def __init__(self, x):
        await shoal.sleep(0.01)
        self.x = x

    def get(self):
        return self.x


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


async def async_constructor():
    """``async def __init__`` runs as the element's coroutine: every message sent to it
    before it has returned (calls, a broadcast, ``ret=True`` and ``awaitable=True`` calls,
    aggregated items) waits and then runs, after it, in order; inside it the chare awaits
    calls, sleeps, an allreduce and a channel; a migration it asked for happens once it has
    returned; a single chare's runs the same way. (Before: the coroutine was dropped with a
    RuntimeWarning and the messages ran on a chare that had no attributes.)"""
    n = 6
    table = shoal.Array(Table, 1)
    arr = shoal.Array(Built, n, args=(n, table))
    agg = shoal.Aggregator(arr, "item")
    for i in range(n):
        agg.send(i, i)
    agg.flush()
    arr.hit("b")
    for i in range(n):
        arr[i].hit("m1")
        arr[i].hit("m2")
    assert await arr[3].hit("r", ret=True) == 30
    assert await arr.hit("all", awaitable=True) is None
    await shoal.quiescence()
    states = await arr.state(ret=True)
    for i, (log, base, total, left, pe) in enumerate(states):
        assert log[:2] == ["init", "built"], (i, log)
        rest = log[2:]
        assert rest.index("m1") < rest.index("m2"), (i, log)
        want = ["b", "m1", "m2", "all", ("item", i)] + (["r"] if i == 3 else [])
        assert sorted(map(str, rest)) == sorted(map(str, want)), (i, log)
        assert (base, total, left) == (10 * i, sum(range(n)), (i - 1) % n)
        if i == 0:
            assert pe == shoal.num_pes() - 1, pe
    lone = shoal.create(Lone, args=(5,), pe=shoal.num_pes() - 1)
    assert await lone.get(ret=True) == 5


SCENARIOS = {"channels": channels, "awaits": awaits, "sleeping": sleeping,
             "suspended_migration": suspended_migration, "async_constructor": async_constructor}

if __name__ == "__main__":
    main(SCENARIOS)
