"""Reductions into futures and into entry methods (run by test_reductions.py):
``python reductions.py NAME...``."""

import numpy as np
from runner import main

import shoal
from shoal import Reducer


def user_max_abs(a, b):
    return a if abs(a) >= abs(b) else b


class Contrib(shoal.Chare):
    def run(self, targets):
        i = self.thisIndex[0]
        self.contribute(i + 1, Reducer.sum, targets[0])
        self.contribute(i + 1, Reducer.product, targets[1])
        self.contribute(np.array([i, -i, 2 * i], dtype=np.float64), Reducer.max, targets[2])
        self.contribute(np.full(3, i), Reducer.min, targets[3])
        self.contribute(i >= 0, Reducer.logical_and, targets[4])
        self.contribute(i == 3, Reducer.logical_or, targets[5])
        self.contribute(i * 10, Reducer.gather, targets[6])
        self.contribute(np.arange(1000) * i, Reducer.sum, targets[7])
        self.contribute(i - 5, user_max_abs, targets[8])


class Contrib2(shoal.Chare):
    def run(self, target):
        i, j = self.thisIndex
        self.contribute(i * 4 + j, Reducer.sum, target)


class Collector(shoal.Chare):
    def __init__(self, fut):
        self.fut = fut

    def result(self, value):
        self.fut.send(("method", value))


async def reducers():
    """Every built-in reducer (on numbers, booleans and arrays; gather in index order) and a
    user function combine the contributions of every element, each into its future."""
    n = 7
    arr = shoal.Array(Contrib, (n,))
    futs = [shoal.future() for _ in range(9)]
    arr.run(futs)
    got = [await f for f in futs]
    assert got[0] == n * (n + 1) // 2
    assert got[1] == 5040
    assert np.array_equal(got[2], [n - 1, 0, 2 * (n - 1)])
    assert np.array_equal(got[3], [0, 0, 0])
    assert got[4] is True and got[5] is True
    assert got[6] == [10 * i for i in range(n)]
    assert np.array_equal(got[7], np.arange(1000) * (n * (n - 1) // 2))
    assert got[8] == -5


async def to_entry_method():
    """A reduction over a 2-D array delivered to an entry method of a chare on another PE."""
    fut = shoal.future()
    col = shoal.create(Collector, args=(fut,), pe=shoal.num_pes() - 1)
    grid = shoal.Array(Contrib2, (3, 4))
    grid.run(col.result)
    assert await fut == ("method", sum(i * 4 + j for i in range(3) for j in range(4)))


if __name__ == "__main__":
    main({"reducers": reducers, "to_entry_method": to_entry_method})
