"""Per-PE state and set-up code (run by test_perpe.py): ``python perpe.py NAME...``."""

import os

import runner
from runner import main

import shoal
from shoal.runtime.context import current

SCALE = None  # set on every PE by shoal.broadcast_globals


def pe_info(base):
    return base + shoal.my_pe(), os.getpid()


async def pe_later(x):
    await shoal.sleep(0.001)
    return x * shoal.my_pe()


def fail_on_one():
    if shoal.my_pe() == 1:
        raise OSError("no scratch directory on PE 1")
    return "ready"


def read_globals():
    return SCALE, getattr(runner, "TAG", None)


def collections():
    return len(current().colls)


class Reader(shoal.Chare):
    def scaled(self, x):
        return SCALE["factor"] * x, shoal.my_pe()


class Single(shoal.Chare):
    def __init__(self, tag):
        self.tag = tag

    def where(self):
        return self.tag, shoal.my_pe(), self.thisIndex

    def me(self):
        return self.thisProxy == self.thisElement

    def spawn(self, n):
        return [shoal.create(Single, args=(k,)) for k in range(n)]

    async def own_index(self):
        """charm4py's spelling of its own proxy, ``self.thisProxy[self.thisIndex]``, used
        to call itself; the errors of other indices."""
        me = self.thisProxy[self.thisIndex]
        assert me == self.thisElement and me == self.thisProxy
        tag = (await me.where(ret=True))[0]
        errors = []
        for bad in (0, (0, 0, 99), self.thisIndex[:2]):
            try:
                self.thisProxy[bad]
            except shoal.UsageError as exc:
                errors.append(str(exc))
        return tag, errors


async def run_on_all():
    """A function (plain or async) runs once on every PE: the results in PE order; an
    exception on one PE is raised at the caller."""
    got = await shoal.run_on_all(pe_info, 100)
    pes = shoal.num_pes()
    assert [g[0] for g in got] == [100 + p for p in range(pes)]
    assert len({g[1] for g in got}) == pes  # one process each
    assert await shoal.run_on_all(pe_later, 3) == [3 * p for p in range(pes)]
    try:
        await shoal.run_on_all(fail_on_one)
        raise AssertionError("not raised")
    except OSError as exc:
        assert str(exc) == "no scratch directory on PE 1"


async def globals_everywhere():
    """broadcast_globals sets module globals on every PE (the caller's module, or one
    named); chares anywhere read them."""
    await shoal.broadcast_globals(SCALE={"factor": 2.5})
    await shoal.broadcast_globals("runner", TAG="v1")
    pes = shoal.num_pes()
    assert await shoal.run_on_all(read_globals) == [({"factor": 2.5}, "v1")] * pes
    readers = shoal.Array(Reader, 2 * pes)
    got = await readers.scaled(4, ret=True)
    assert [g[0] for g in got] == [10.0] * (2 * pes)
    assert {g[1] for g in got} == set(range(pes))


async def create_spread():
    """shoal.create without pe places single chares round robin from the creating PE, at
    one message each (no collection per chare on any PE); a single chare's thisProxy is
    its own proxy."""
    pes = shoal.num_pes()
    first = shoal.create(Single, args=(-1,))
    assert (await first.where(ret=True))[1] == 0
    before = await shoal.run_on_all(collections)
    singles = [shoal.create(Single, args=(k,)) for k in range(3 * pes)]
    where = [await s.where(ret=True) for s in singles]
    assert [w[:2] for w in where] == [(k, (k + 1) % pes) for k in range(3 * pes)], where
    assert await singles[0].me(ret=True)
    spawner = shoal.create(Single, args=(0,), pe=1)
    more = await spawner.spawn(pes, ret=True)  # made by a chare on PE 1
    placed = [(await s.where(ret=True))[1] for s in more]
    assert placed == [(1 + k) % pes for k in range(pes)], placed
    after = await shoal.run_on_all(collections)
    # one new collection everywhere at most: the singles array of the spawning PE
    assert all(a - b <= 1 for a, b in zip(after, before, strict=True)), (before, after)
    return placed


async def own_index():
    """``self.thisProxy[self.thisIndex]`` in a single chare names itself (before: a
    TypeError, since its thisProxy is its own element proxy); any other index, and an index
    on an array element's proxy, is a UsageError that says what to write."""
    one = shoal.create(Single, args=(7,), pe=shoal.num_pes() - 1)
    tag, errors = await one.own_index(ret=True)
    assert tag == 7
    assert len(errors) == 3 and all("its only index is its own" in e for e in errors), errors
    arr = shoal.Array(Reader, 2)
    try:
        arr[1][1]
    except shoal.UsageError as exc:
        assert "cannot be indexed: index the proxy of its array or group" in str(exc), exc
    else:
        raise AssertionError("no error")


if __name__ == "__main__":
    main({"run_on_all": run_on_all, "globals_everywhere": globals_everywhere,
          "create_spread": create_spread, "own_index": own_index})
