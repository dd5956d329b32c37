"""Sections of arrays and groups, written the way a user writes them (run by
test_sections.py): ``python sections.py NAME...``."""

import marshal
import pickletools
import random

import numpy as np
from runner import main

import shoal
from shoal import Reducer
from shoal.runtime.context import current
from shoal.runtime.protocol import KINDS
from shoal.runtime.wire import transport


def grid(dims, key):
    """The element indices numpy selects from the grid of an array's indices."""
    ix = np.indices(dims)
    picked = np.stack([a[key] for a in ix], axis=-1).reshape(-1, len(dims))
    return sorted({tuple(int(v) for v in row) for row in picked})


class Cell(shoal.Chare):
    def __init__(self):
        self.got = []  # the tags of the multicasts and broadcasts this element ran

    def mark(self, tag):
        self.got.append(tag)
        return (self.thisIndex, shoal.my_pe())

    def tags(self):
        return self.got

    def add(self, section, tag, target):
        """Contribute a value known from the index to a reduction over ``section``."""
        self.got.append(tag)
        i = self.thisIndex
        self.contribute(float(sum((k + 1) * v for k, v in enumerate(i))), Reducer.sum, target,
                        section=section)

    def collect(self, section, target):
        self.contribute(self.thisIndex, Reducer.gather, target, section=section)

    def result(self, value):
        self.got.append(("result", value))

    async def mean(self, section, fut):
        """An allreduce over the section, in every member."""
        total = await self.allreduce(1.0 + self.thisIndex[0], Reducer.sum, section=section)
        self.contribute(total, Reducer.max, fut, section=section)


def weight(index):
    return float(sum((k + 1) * v for k, v in enumerate(index)))


async def slices():
    """Slices of a 2-D array select what numpy selects from the index grid; a multicast
    reaches exactly those elements, once each (ret=True: their values in index order); an
    explicit list and a 1-D slice of another array do the same."""
    dims = (6, 5)
    arr = shoal.Array(Cell, dims)
    keys = [np.s_[0:4, ::2], np.s_[1, :], np.s_[..., -1], np.s_[::-2, 1:4], np.s_[5:1:-1],
            np.s_[-3:, -2]]
    expect = {}
    for tag, key in enumerate(keys):
        sec = arr[key]
        members = grid(dims, key)
        assert len(sec) == len(members), (key, len(sec), len(members))
        values = await sec.mark(tag, ret=True)
        assert [index for index, _ in values] == members, (key, values)
        for index in members:
            expect.setdefault(index, []).append(tag)
    picked = [(5, 4), (0, 0), (2, 3), (0, 0)]
    sec = arr.section(picked)
    assert len(sec) == 3
    values = await sec.mark("list", ret=True)
    assert [index for index, _ in values] == sorted(set(picked))
    for index in sorted(set(picked)):
        expect.setdefault(index, []).append("list")
    got = await arr.tags(ret=True)
    for k, index in enumerate(np.ndindex(*dims)):
        assert got[k] == expect.get(index, []), (index, got[k], expect.get(index))
    line = shoal.Array(Cell, 20)
    values = await line[3:17:3].mark("line", ret=True)
    assert [i for (i,), _ in values] == list(range(3, 17, 3))
    return len(keys)


async def reductions():
    """A reduction over a section (target a future, a gather in index order, a section
    method as the target, an allreduce inside a coroutine) against the sums by hand."""
    dims = (8, 6)
    arr = shoal.Array(Cell, dims)
    key = np.s_[1:7, ::2]
    sec = arr[key]
    members = grid(dims, key)
    want = sum(weight(i) for i in members)
    for rnd in range(3):
        fut = shoal.future()
        sec.add(sec, rnd, fut)
        assert await fut == want
    fut = shoal.future()
    sec.collect(sec, fut)
    assert await fut == members
    sec.add(sec, "to-method", sec.result)  # the result is multicast back to the section
    await shoal.quiescence()
    got = await sec.tags(ret=True)
    assert all(g[-1] == ("result", want) for g in got), got
    done = shoal.future()
    sec.mean(sec, done)
    assert await done == sum(1.0 + i[0] for i in members)
    return want


class Member(shoal.Chare):
    def __init__(self):
        self.seen = []

    def hello(self, tag):
        self.seen.append(tag)
        return shoal.my_pe()

    def part(self, section, fut):
        self.contribute([shoal.my_pe()], Reducer.gather, fut, section=section)


async def groups():
    """A section of a group is a subset of PEs: a multicast runs on those members only,
    each on its own PE, and a reduction over them sees each once."""
    p = shoal.num_pes()
    g = shoal.Group(Member)
    odd = g[1::2]
    ends = g.section([0, p - 1])
    assert await odd.hello("odd", ret=True) == list(range(1, p, 2))
    assert await ends.hello("ends", ret=True) == [0, p - 1]
    fut = shoal.future()
    odd.part(odd, fut)
    assert await fut == [[pe] for pe in range(1, p, 2)]
    seen = await g.hello("all", ret=True)
    assert seen == list(range(p))


class Tally(shoal.Chare):
    def __init__(self):
        self.count = {}

    def hit(self, name, k):
        last = self.count.get(name, -1)
        assert k == last + 1, (self.thisIndex, name, k, last)  # once each, in order
        self.count[name] = k

    def vote(self, section, name, fut):
        self.contribute({name: 1}, merge, fut, section=section)

    def counts(self):
        return self.count


def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


async def overlapping():
    """Two overlapping sections multicast and reduce at the same time: every member of
    each gets each multicast once and in order, and both reductions count their own
    members."""
    arr = shoal.Array(Tally, 40)
    a = arr[0:30]
    b = arr[10:40:2]
    for k in range(20):
        a.hit("a", k)
        b.hit("b", k)
    fa, fb = shoal.future(), shoal.future()
    a.vote(a, "a", fa)
    b.vote(b, "b", fb)
    assert await fa == {"a": 30}
    assert await fb == {"b": 15}
    counts = await arr.counts(ret=True)
    for i, c in enumerate(counts):
        want = {}
        if i < 30:
            want["a"] = 19
        if i >= 10 and i % 2 == 0:
            want["b"] = 19
        assert c == want, (i, c, want)


class Rover(shoal.Chare):
    def __init__(self, seed):
        self.rng = random.Random(seed * 100 + self.thisIndex[0])
        self.runs = []
        self.moves = 0

    def step(self, section, rnd, fut):
        self.runs.append(rnd)
        self.contribute(self.thisIndex[0] * 10 + rnd, Reducer.sum, fut, section=section)
        self.wander()

    def nudge(self, rnd):
        self.runs.append(("nudge", rnd))
        self.wander()

    def wander(self):
        pe = self.rng.randrange(shoal.num_pes())
        if pe != shoal.my_pe():
            self.moves += 1
        self.migrate(pe)

    def state(self):
        return (self.runs, self.moves)


async def migrating():
    """Members of a section migrate at random after every multicast, while the next
    multicasts and reductions are under way: each member runs each multicast exactly once
    and in order, and every reduction completes with the exact sum."""
    n = 32
    arr = shoal.Array(Rover, n, args=(5,))
    sec = arr[1:n:3]
    members = list(range(1, n, 3))
    rounds = 25
    futs = []
    for rnd in range(rounds):
        fut = shoal.future()
        sec.step(sec, rnd, fut)
        sec.nudge(rnd)
        futs.append(fut)
    for rnd, fut in enumerate(futs):
        assert await fut == sum(i * 10 + rnd for i in members), rnd
    states = await arr.state(ret=True)
    moves = 0
    for i, (runs, m) in enumerate(states):
        want = [x for r in range(rounds) for x in (r, ("nudge", r))] if i in members else []
        assert runs == want, (i, runs)
        moves += m
    return moves


async def from_elements():
    """A section made inside an entry method on another PE (its root there) and used by
    another element: multicasts and reductions go through that root."""
    arr = shoal.Array(Maker, 12)
    fut = shoal.future()
    arr[11].make(fut)
    assert await fut == sum(range(0, 12, 2))


class Maker(shoal.Chare):
    def make(self, fut):
        sec = self.thisProxy[::2]  # rooted on this PE
        self.thisProxy[5].use(sec, fut)

    def use(self, sec, fut):
        sec.give(sec, fut)

    def give(self, sec, fut):
        self.contribute(self.thisIndex[0], Reducer.sum, fut, section=sec)


async def sparse():
    """Sections of an array filled by insertion name every axis with explicit bounds; an
    element inserted after the section was made receives the multicasts that waited."""
    arr = shoal.Array(Cell, ndims=2)
    for i in range(4):
        for j in range(3):
            if (i, j) != (3, 2):
                arr.insert((i, j))
    sec = arr[1:4, 1:3]
    assert len(sec) == 6
    fut = sec.mark("early", ret=True)
    arr.insert((3, 2))
    values = await fut
    assert [index for index, _ in values] == [(i, j) for i in (1, 2, 3) for j in (1, 2)]


class Waiter(shoal.Chare):
    def __init__(self):
        self.done = []

    async def settle(self, tag):
        await shoal.sleep(0.01 * (self.thisIndex[0] % 3))  # members end at different times
        self.done.append(tag)

    def check(self, bad):
        if self.thisIndex[0] in bad:
            raise ValueError(f"element {self.thisIndex[0]} is bad")

    def log(self):
        return self.done


async def awaitable():
    """``awaitable=True`` on a section's multicast gives a future that resolves to None once
    every member has run the method, coroutines to their end, as on an array; an exception
    of a member is raised there (the lowest index's, the others named), with ``ret=True``
    too. (Before: the call returned None and gave each member ``awaitable=True`` as an
    argument, a TypeError in every one of them.)"""
    arr = shoal.Array(Waiter, 12)
    sec = arr[1:12:2]
    assert await sec.settle("a", awaitable=True) is None
    got = await arr.log(ret=True)
    assert got == [["a"] if i % 2 else [] for i in range(12)], got
    for how in ({"awaitable": True}, {"ret": True}):
        try:
            await sec.check([9, 3, 5], **how)
        except ValueError as exc:
            assert str(exc) == "element 3 is bad", exc
            text = str(exc.__cause__)
            assert "2 other element(s) of the multicast raised too: [5], [9]" in text, text
        else:
            raise AssertionError(f"{how}: no error")
    assert await sec.check([], ret=True) == [None] * 6
    assert await sec.check([], awaitable=True) is None


async def caller_sends_little():
    """A multicast from main to a section of 64 elements spread over every PE: the caller
    (the section's root, PE 0) sends one envelope per child of the section's tree, not one
    per element. Returns the kinds of the envelopes PE 0 sent meanwhile, by name."""
    rt = current()
    arr = shoal.Array(Cell, 64)
    sec = arr[0:64]
    await sec.mark("warm", ret=True)
    sent = []
    net = rt.net
    bsend, issend = net._bsend, net._issend  # (what sends each small envelope: MPI's calls)
    direct, net._dsend = net._dsend, None  # (its plain ones too, by mpi4py meanwhile)

    def kind(data, tag):  # the envelope's first field (by marshal, or read from the pickle)
        if tag == transport.PLAIN:
            return marshal.loads(data)[0]
        return next(arg for op, arg, _ in pickletools.genops(data) if op.name.startswith("BININT"))

    def counting(mpi_send):
        def send(data, dest, tag):
            sent.append(KINDS[kind(data, tag)].name)
            return mpi_send(data, dest, tag)
        return send

    net._bsend, net._issend = counting(bsend), counting(issend)
    values = await sec.mark("count", ret=True)
    net._bsend, net._issend, net._dsend = bsend, issend, direct
    assert len(values) == 64
    return {kind: sent.count(kind) for kind in sorted(set(sent))}


class Side(shoal.Chare):
    """The entry methods the collections of a combined section share (their classes
    differ: Left, Right)."""

    base = 0

    def __init__(self):
        self.got = []
        self.rng = random.Random(self.base + self.thisIndex[0])

    def mark(self, tag):
        self.got.append(tag)
        return (type(self).__name__, self.thisIndex[0])

    def add(self, sec, fut):
        self.contribute(self.base + self.thisIndex[0], Reducer.sum, fut, section=sec)

    def gather_in(self, sec, fut):
        self.contribute(type(self).__name__[0], Reducer.gather, fut, section=sec)

    async def mean(self, sec, fut):
        total = await self.allreduce(1, Reducer.sum, section=sec)
        self.contribute(total, Reducer.max, fut, section=sec)

    def step(self, sec, rnd, fut):
        self.got.append(rnd)
        self.contribute(self.base + rnd, Reducer.sum, fut, section=sec)
        if self.migratable:  # (array elements: group members never move)
            self.migrate(self.rng.randrange(shoal.num_pes()))

    def check(self, bad):
        if (type(self).__name__, self.thisIndex[0]) in bad:
            raise ValueError(f"{type(self).__name__} {self.thisIndex[0]} is bad")
        return self.thisIndex[0]

    def tags(self):
        return self.got


class Left(Side):
    base = 1000

    def only_left(self):
        pass


class Right(Side):
    base = 100


class Ground(Side):  # a group's class
    base = 10


async def combined():
    """shoal.combine (charm4py's charm.combine): one section over a section of an array, a
    whole array of another class and a group, with the array given twice (counted once).
    Element 0 of each collection is its own member. Multicasts reach each member once, in
    order, while the array elements migrate; ret=True lists the values collection by
    collection in the order given; reductions, gathers and allreduce span every member."""
    p = shoal.num_pes()
    a = shoal.Array(Left, 8)
    b = shoal.Array(Right, 6)
    g = shoal.Group(Ground)
    sec = shoal.combine(a[::2], b, g, b[0:2])
    members = ([("Left", i) for i in range(0, 8, 2)] + [("Right", i) for i in range(6)]
               + [("Ground", q) for q in range(p)])
    assert len(sec) == len(members)
    assert await sec.mark("m", ret=True) == members
    assert await sec.mark("w", awaitable=True) is None
    fut = shoal.future()
    sec.add(sec, fut)
    want = (sum(1000 + i for i in range(0, 8, 2)) + sum(100 + i for i in range(6))
            + sum(10 + q for q in range(p)))
    assert await fut == want
    fut = shoal.future()
    sec.gather_in(sec, fut)
    assert await fut == [name[0] for name, _ in members]
    fut = shoal.future()
    sec.mean(sec, fut)
    assert await fut == len(members)
    rounds = 8
    futs = []
    for rnd in range(rounds):  # the array elements wander while these are under way
        futs.append(shoal.future())
        sec.step(sec, rnd, futs[-1])
    for rnd, f in enumerate(futs):
        assert await f == (4 * (1000 + rnd) + 6 * (100 + rnd) + p * (10 + rnd)), rnd
    every = ["m", "w", *range(rounds)]
    assert await a.tags(ret=True) == [every if i % 2 == 0 else [] for i in range(8)]
    assert await b.tags(ret=True) == [every] * 6
    assert await g.tags(ret=True) == [every] * p
    await _combined_failures(sec, members, a, b)
    return len(sec)


async def _combined_failures(sec, members, a, b):
    """A combined section's failures: in their places with return_exceptions=True, else
    the first failing member's in the list's order; bad calls refused."""
    from shoal.errors import UsageError

    p = shoal.num_pes()
    bad = [("Right", 4), ("Left", 2)]
    out = await sec.check(bad, ret=True, return_exceptions=True)
    assert len(out) == len(members)
    for (name, i), v in zip(members, out, strict=True):  # failures in their places
        if (name, i) in bad:
            assert type(v) is ValueError and str(v) == f"{name} {i} is bad", v
            assert "raised:" in str(v.__cause__)  # the remote traceback came along
        else:
            assert v == i, out
    try:
        await sec.check([("Ground", p - 1), ("Right", 1)], ret=True)
    except ValueError as exc:  # the first failing member in the list's order
        assert str(exc) == "Right 1 is bad", exc
    else:
        raise AssertionError("no error")
    try:
        sec.only_left()
    except AttributeError as exc:
        assert "Right, Ground have no entry method 'only_left'" in str(exc), exc
    else:
        raise AssertionError("only_left")
    for bad, said in [(lambda: shoal.combine(), "at least one"),
                      (lambda: shoal.combine(a, b[1]), "not one element"),
                      (lambda: shoal.combine(shoal.Array(Left, ndims=1)), "filled by insertion"),
                      (lambda: shoal.combine(a, 3), "not 3")]:
        try:
            bad()
        except UsageError as exc:
            assert said in str(exc), (said, str(exc))
        else:
            raise AssertionError(f"accepted: {said}")


if __name__ == "__main__":
    main({"slices": slices, "reductions": reductions, "groups": groups,
          "overlapping": overlapping, "migrating": migrating, "from_elements": from_elements,
          "sparse": sparse, "caller_sends_little": caller_sends_little,
          "awaitable": awaitable, "combined": combined})
