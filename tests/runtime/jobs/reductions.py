"""Reductions into futures and into entry methods (run by test_reductions.py):
``python reductions.py NAME...``."""

import array
import math
from collections import namedtuple

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


Pair = namedtuple("Pair", "count total")


def contribution(i):
    """Element i's value for the element-wise reducers: a list, a tuple, an array.array,
    a named tuple and a nested list of tuples."""
    return [[i, -i, 2 * i + 1], (i % 3, i + 0.5), array.array("q", [i, i * i]),
            Pair(1, i), [(i, [i % 2, 1]), (3 - i, [i, i])]]


def brute(op, values):
    """The element-wise reduction of ``values`` (all of one shape), position by position."""
    first = values[0]
    if isinstance(first, (list, tuple, array.array)):
        parts = [brute(op, [v[k] for v in values]) for k in range(len(first))]
        if isinstance(first, array.array):
            return array.array(first.typecode, parts)
        if hasattr(first, "_fields"):
            return type(first)(*parts)
        return type(first)(parts)
    return op(values)


OPS = {"sum": sum, "product": math.prod, "max": max, "min": min}
LOGICAL = {"logical_and": all, "logical_or": any,
           "logical_xor": lambda vs: sum(map(bool, vs)) % 2 == 1}


class Seq(shoal.Chare):
    def run(self, futs):
        i = self.thisIndex[0]
        for name, fut in futs.items():
            if name in LOGICAL:
                value = [i % 2 == 0, i % 3 == 0, (i == 1, i > 100)]
            else:
                value = contribution(i)
            self.contribute(value, getattr(Reducer, name), fut)


class Barrier(shoal.Chare):
    def __init__(self):
        self.done = False

    async def run(self, fut, col):
        await shoal.sleep(0.002 * (self.thisIndex[0] % 3))  # some arrive later
        self.done = True
        self.contribute(None, None, fut)  # a barrier: the target gets None
        self.contribute(None, Reducer.nop, col.result)

    def state(self):
        return self.done


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


async def sequences():
    """sum, product, max and min combine Python lists, tuples (named ones too),
    array.array and nested sequences element-wise, and the logical reducers too: equal to
    the position-by-position reduction computed here."""
    n = 9
    arr = shoal.Array(Seq, n)
    names = [*OPS, *LOGICAL]
    futs = {name: shoal.future() for name in names}
    arr.run(futs)
    for name in names:
        got = await futs[name]
        if name in LOGICAL:
            values = [[i % 2 == 0, i % 3 == 0, (i == 1, i > 100)] for i in range(n)]
            want = brute(LOGICAL[name], values)
        else:
            want = brute(OPS[name], [contribution(i) for i in range(n)])
        assert got == want and type(got) is list, (name, got, want)
        assert [type(x) for x in got] == [type(x) for x in want], (name, got)


async def barrier():
    """contribute(None, None, target) and Reducer.nop are barriers: the target (a future,
    an entry method) gets None once every element has contributed."""
    fut = shoal.future()
    got = shoal.future()
    col = shoal.create(Collector, args=(got,), pe=shoal.num_pes() - 1)
    arr = shoal.Array(Barrier, 7)
    arr.run(fut, col)
    assert await fut is None
    assert await arr.state(ret=True) == [True] * 7  # nobody passed it early
    assert await got == ("method", None)


if __name__ == "__main__":
    main({"reducers": reducers, "to_entry_method": to_entry_method, "sequences": sequences,
          "barrier": barrier})
