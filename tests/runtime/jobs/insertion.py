"""Elements inserted and deleted while the program runs (run by test_insertion.py):
``python insertion.py NAME...``."""

from runner import main

import shoal
from shoal import Reducer


class Cell(shoal.Chare):
    def __init__(self, level):
        self.level = level

    def refine(self):
        i = self.thisIndex
        if self.level == 0:
            for k in range(2):
                self.thisProxy.insert((i[0], i[1] * 2 + k + 10), args=(1,))

    def value(self, fut):
        self.contribute(1, Reducer.sum, fut)

    def ping(self, fut):
        fut.send(self.thisIndex)

    def name(self):
        return self.thisIndex


async def ping(proxy):
    fut = shoal.future()
    proxy.ping(fut)
    return await fut


async def count(cells):
    fut = shoal.future()
    cells.value(fut)
    return await fut


def plant():
    """Four level-0 cells (i, 0), on PE i % npes."""
    cells = shoal.Array(Cell, ndims=2)
    for i in range(4):
        cells.insert((i, 0), args=(0,), pe=i % shoal.num_pes())
    return cells


async def grow(cells):
    """Each cell of :func:`plant` inserts two level-1 cells (i, 10), (i, 11) itself, then
    (0, 0) and (1, 10) are deleted: 10 cells."""
    cells.refine()
    await shoal.quiescence()
    cells.delete((0, 0))
    cells.delete((1, 10))
    await shoal.quiescence()


async def messages():
    """A message sent right behind an insertion reaches the new element (it may arrive
    before the insertion: the home keeps it); so does one to an element that another
    element inserted."""
    cells = plant()
    assert await ping(cells[(3, 0)]) == (3, 0)
    await grow(cells)
    assert await ping(cells[(2, 11)]) == (2, 11)


async def counts():
    """Reductions count the elements inserted, by the main program and by elements, and
    not those deleted."""
    cells = plant()
    await ping(cells[(3, 0)])  # as in messages: a message right behind the insertions
    assert await count(cells) == 4
    cells.refine()
    await shoal.quiescence()
    assert await count(cells) == 12
    cells.delete((0, 0))
    cells.delete((1, 10))
    await shoal.quiescence()
    assert await count(cells) == 10


async def racing_broadcast():
    """A broadcast with ``ret=True`` right behind an insertion and two deletions: the
    inserted element answers; a deleted one answers if the broadcast reached it first (the
    deletion may go through the element's home), and is not waited for otherwise."""
    cells = plant()
    await grow(cells)
    cells.insert((9, 9), args=(0,), pe=1)
    cells.delete((3, 0))
    cells.delete((1, 0))
    names = await cells.name(ret=True)
    rest = [(2, 0), (0, 10), (0, 11), (1, 11), (2, 10), (2, 11), (3, 10), (3, 11), (9, 9)]
    assert names == sorted(names) and len(set(names)) == len(names), names
    assert set(names) - {(3, 0), (1, 0)} == set(rest), names
    assert await cells.name(ret=True) == sorted(rest)


class Joiner(shoal.Chare):
    """Round r: every element contributes 1; in round 1 each element inserts a new one
    (on a given PE or at its home), whose constructor contributes to that same round."""

    def __init__(self, futs, first=None):
        self.futs = futs
        if first is not None:
            self.contribute(1, Reducer.sum, futs[first])
            self.contribute(1, Reducer.sum, futs[first + 1])

    def round(self, r, place):
        i = self.thisIndex[0]
        if r == 1:
            pe = (i % shoal.num_pes()) if place else None
            self.thisProxy.insert(100 + i, args=(self.futs, 1), pe=pe)
        self.contribute(1, Reducer.sum, self.futs[r])
        if r < 2:
            self.thisProxy[self.thisIndex].round(r + 1, place)


async def constructor_contributes():
    sums = []
    for place in (False, True):
        futs = [shoal.future() for _ in range(3)]
        arr = shoal.Array(Joiner, 4, args=(futs,))
        arr.round(0, place)
        sums.append([await f for f in futs])
    assert sums == [[4, 8, 8], [4, 8, 8]], sums  # new members count from their round on
    return sums


class Asker(shoal.Chare):
    async def ask(self, index):
        return await self.thisProxy[index].where(ret=True)

    def where(self):
        return self.thisIndex, shoal.my_pe()


async def outside_the_shape():
    """An element inserted outside a dense array's shape may be named on every PE (other
    indices outside the shape are refused at the caller until then: test_errors.py)."""
    arr = shoal.Array(Asker, 3)
    arr.insert(7, pe=shoal.num_pes() - 1)
    assert await arr[7].where(ret=True) == ((7,), shoal.num_pes() - 1)
    await shoal.quiescence()  # the news reached every PE
    got = [await arr[i].ask(7, ret=True) for i in range(3)]
    assert got == [((7,), shoal.num_pes() - 1)] * 3, got


def by_sum(index, dims, npes):
    """A user map: for an array filled by insertion ``dims`` is None."""
    assert dims is None or len(dims) == 2
    return (index[0] + index[1]) % npes


async def mapped():
    """An array filled by insertion places its elements by its map (not by a hash), those
    inserted by main and by elements; a dense array's map places elements inserted
    outside its shape too."""
    cells = shoal.Array(Asker, ndims=2, map=by_sum)
    for i in range(3):
        for j in range(3):
            cells.insert((i, j))
    want = {(i, j): (i + j) % shoal.num_pes() for i in range(3) for j in range(3)}
    got = {}
    for ix in want:
        got[ix] = (await cells[ix].where(ret=True))[1]
    assert got == want, got
    dense = shoal.Array(Asker, (2, 2), map=by_sum)
    dense.insert((5, 6))
    assert await dense[5, 6].where(ret=True) == ((5, 6), 11 % shoal.num_pes())
    return sorted(got.values())


def by_first(index, dims, npes):
    """The home of ``(i, j)`` is PE ``i % npes``."""
    return index[0] % npes


class Pal(shoal.Chare):
    """Logs what it is sent; a new one greets ``greet``, which answers it."""

    def __init__(self, greet=None):
        self.got = []
        if greet is not None:
            self.thisProxy[greet].hello(self.thisIndex)

    def hello(self, who):
        self.got.append(who)
        self.thisProxy[who].answer(self.thisIndex)

    def answer(self, who):
        self.got.append(who)

    def send(self, to, n):
        for k in range(n):
            self.thisProxy[to].take(k)

    def take(self, k):
        self.got.append(k)

    def log(self):
        return self.got


async def reinserted():
    """An index deleted and inserted again (as adaptive mesh refinement does to a block
    that refines, then coarsens back): its new element gets the messages sent to it once
    it exists, in order, from elements that had written to the old one, and its own
    messages reach them; the element's home is neither its PE nor theirs. Each round puts
    it on another PE (or at its home)."""
    npes = shoal.num_pes()
    arr = shoal.Array(Pal, ndims=2, map=by_first)
    arr.insert((0, 0), pe=0)
    arr.insert((2, 0), pe=1 % npes)
    for rnd in range(6):
        arr[(0, 0)].send((2, 0), 3)
        arr[(2, 0)].send((0, 0), 2)
        await shoal.quiescence()
        log = await arr[(2, 0)].log(ret=True)
        assert log[-3:] == [0, 1, 2], (rnd, log)
        arr.delete((2, 0))
        await shoal.quiescence()
        pe = (None, 0, 1 % npes, (2 % npes))[rnd % 4]
        arr.insert((2, 0), args=((0, 0),), pe=pe)  # greets (0, 0), which answers
        await shoal.quiescence()
        log = await arr[(2, 0)].log(ret=True)
        assert log == [(0, 0)], (rnd, log)
    first = await arr[(0, 0)].log(ret=True)
    assert first == [0, 1, (2, 0)] * 6, first


if __name__ == "__main__":
    main({"messages": messages, "counts": counts, "racing_broadcast": racing_broadcast,
          "constructor_contributes": constructor_contributes,
          "outside_the_shape": outside_the_shape, "mapped": mapped,
          "reinserted": reinserted})
