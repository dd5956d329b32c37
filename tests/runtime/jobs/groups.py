"""Groups (one member per PE) and message priorities (run by test_groups.py):
``python groups.py NAME...``."""

from runner import main

import shoal
from shoal import Reducer


class PerPE(shoal.Chare):
    def __init__(self):
        self.order = []

    def whoami(self, fut):
        self.contribute((self.thisIndex[0], shoal.my_pe()), Reducer.gather, fut)

    def burst(self, fut):
        me = self.thisProxy[self.thisIndex]
        for p in (5, -3, 0, 2, -3, 0):
            me.record(p, prio=p)
        me.finish(fut, prio=10)

    def record(self, p):
        self.order.append(p)

    def pe(self):
        return shoal.my_pe()

    def finish(self, fut):
        self.contribute(self.order, Reducer.gather, fut)


async def one_per_pe():
    """Group member ``p`` lives on PE ``p``, for every PE; a broadcast with ``ret=True``
    answers in PE order."""
    g = shoal.Group(PerPE)
    fut = shoal.future()
    g.whoami(fut)
    pairs = await fut
    assert sorted(pairs) == [(p, p) for p in range(shoal.num_pes())], pairs
    assert await g.pe(ret=True) == list(range(shoal.num_pes()))


async def priorities():
    """Messages waiting for an element run lowest priority value first."""
    g = shoal.Group(PerPE)
    fut = shoal.future()
    g.burst(fut)
    orders = await fut
    assert len(orders) == shoal.num_pes()
    for order in orders:
        assert order == [-3, -3, 0, 0, 2, 5], order


if __name__ == "__main__":
    main({"one_per_pe": one_per_pe, "priorities": priorities})
