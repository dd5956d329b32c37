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


class Some(shoal.Chare):
    """A member of a group on some PEs (charm4py's tests/sections/constrained_groups.py)."""

    def __init__(self, x):
        assert x == 4862
        self.calls = 0

    def where(self):
        self.calls += 1
        return (self.thisIndex[0], shoal.my_pe())

    async def total(self):
        return await self.allreduce(self.thisIndex[0], Reducer.sum)

    def sum_in(self, sec, fut):
        self.contribute(10 * self.thisIndex[0] + 1, Reducer.sum, fut, section=sec)

    def ask(self, group, pe):
        return group[pe].where(ret=True)  # a proxy that travelled keeps the members

    async def relay(self, group, pe):
        return await group[pe].where(ret=True)

    def fail_on(self, pe):
        if shoal.my_pe() == pe:
            raise ValueError(f"member {pe} fails")
        return self.thisIndex[0]


async def on_some_pes():
    """Group(cls, pes=[...]): members on those PEs only, indexed by PE; broadcasts
    (ret=True, awaitable=True), reductions, allreduce and sections count the members only;
    every other PE's index is refused where it is written."""
    from shoal.errors import UsageError

    n = shoal.num_pes()
    pes = [p for p in range(n) if p % 2 == 0] + ([n - 1] if n % 2 == 0 else [])
    g = shoal.Group(Some, pes=list(reversed(pes)), args=(4862,))
    assert await g.where(ret=True) == [(p, p) for p in pes]
    await g.where(awaitable=True)
    fut = shoal.future()
    g.sum_in(g[:], fut)  # a section of every member
    assert await fut == sum(10 * p + 1 for p in pes)
    assert await g.total(ret=True) == [sum(pes)] * len(pes)
    sec = g[1:]  # the members on PEs 1 and above
    assert len(sec) == len(pes) - 1
    assert await sec.where(ret=True) == [(p, p) for p in pes[1:]]
    fut = shoal.future()
    sec.sum_in(sec, fut)
    assert await fut == sum(10 * p + 1 for p in pes[1:])
    assert await g[pes[-1]].relay(g, pes[0], ret=True) == (pes[0], pes[0])
    # the list form of a broadcast with failures, over the members only
    out = await g.fail_on(pes[-1], ret=True, return_exceptions=True)
    assert out[:-1] == pes[:-1] and isinstance(out[-1], ValueError), out
    # charm4py's spelling
    h = shoal.Group(Some, onPEs=[n - 1], args=(4862,))
    assert await h.where(ret=True) == [(n - 1, n - 1)]
    for bad, said in [(lambda: g[1], "no member on PE 1"),
                      (lambda: g.section([0, 1]), "no member on PE 1"),
                      (lambda: h[0:n - 1], "selects no member"),
                      (lambda: shoal.Group(Some, pes=[]), r"pes=\[\] names no PE"),
                      (lambda: shoal.Group(Some, pes=[0, n]), f"in \\[0, {n}\\)"),
                      (lambda: shoal.Group(Some, pes=[0, 0]), "more than once"),
                      (lambda: shoal.Group(Some, pes=3), "list of PE numbers"),
                      (lambda: shoal.Group(Some, pes=[0], onPEs=[0]), "not both")]:
        try:
            bad()
        except UsageError as exc:
            import re
            assert re.search(said, str(exc)), (said, str(exc))
        else:
            raise AssertionError(f"accepted: {said}")
    await shoal.destroy(h)
    return len(pes)


if __name__ == "__main__":
    main({"one_per_pe": one_per_pe, "priorities": priorities, "on_some_pes": on_some_pes})
