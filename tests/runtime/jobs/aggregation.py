"""Aggregated items (run by test_aggregation.py): ``python aggregation.py NAME... [--mesh A,B]``.

Every scenario sends items from every PE and checks, against the multiset sent, that each
item ran exactly once at the element it was sent to."""

import sys
from collections import Counter

import numpy as np
from runner import main

import shoal
from shoal import Reducer

DT = np.dtype([("src", "<i4"), ("seq", "<i4"), ("x", "<f8")])  # 16 bytes
MESH = None
if "--mesh" in sys.argv:
    k = sys.argv.index("--mesh")
    MESH = tuple(int(s) for s in sys.argv[k + 1].split(","))
    del sys.argv[k:k + 2]


class Sink(shoal.Chare):
    """Records every item it receives, and sends items when asked."""

    def __init__(self):
        self.got = []

    def take(self, item):
        self.got.append((self.thisIndex, shoal.my_pe(), item))

    def blast(self, agg, n, nelems, flush):
        """Send ``n`` items to elements chosen from a generator seeded by this index."""
        rng = np.random.default_rng(self.thisIndex[0])
        for k, dest in enumerate(rng.integers(0, nelems, n).tolist()):
            agg.send(dest, (self.thisIndex[0], k, dest + k / 8))
        if flush:
            agg.flush()

    def hop(self, pe):
        self.migrate(pe)

    def report(self, fut):
        self.contribute(self.got, Reducer.gather, fut)


def expected(nelems, senders, n):
    """The multiset of (element, item) the blasts send."""
    out = Counter()
    for s in range(senders):
        rng = np.random.default_rng(s)
        for k, dest in enumerate(rng.integers(0, nelems, n).tolist()):
            out[(dest, (s, k, dest + k / 8))] += 1
    return out


async def received(arr):
    fut = shoal.future()
    arr.report(fut)
    got = Counter()
    for rows in await fut:
        for index, _pe, item in rows:
            got[(index[0], tuple(item))] += 1
    return got


async def exactly_once_dtype():
    """Every PE's elements send items of a 16-byte dtype to random elements; each item ran
    once, at its element, and arrived as a tuple."""
    p = shoal.num_pes()
    nelems, n = 8 * p, 300
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, buffer_items=64, mesh=MESH)
    for i in range(nelems):
        arr[i].blast(agg, n, nelems, False)
    await shoal.quiescence()
    got = await received(arr)
    assert got == expected(nelems, nelems, n), "items lost or duplicated"
    return sum(got.values())


if __name__ == "__main__":
    main({f.__name__: f for f in (exactly_once_dtype,)})
