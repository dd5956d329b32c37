"""Point-to-point messages, broadcasts and calls with ``ret=True`` (run by test_messaging.py):
``python messaging.py NAME...``."""

import enum
import random

import numpy as np
from runner import main

import shoal
from shoal import Reducer
from shoal.runtime.context import current


class Receiver(shoal.Chare):
    def __init__(self):
        self.seen = {}
        self.bcasts = []

    def take(self, sender, k):
        assert self.seen.get(sender, -1) == k - 1, (sender, k, self.seen.get(sender))
        self.seen[sender] = k

    def send_to(self, other, n):
        for k in range(n):
            self.thisProxy[other].take(self.thisIndex[0], k)

    def note(self, x):
        self.bcasts.append(x)

    def square(self, x):
        return x * x

    def times_index(self, x):
        return x * self.thisIndex[0]

    def report(self, fut):
        self.contribute((sorted(self.seen.items()), self.bcasts), Reducer.gather, fut)


async def reports(recv):
    await shoal.quiescence()
    done = shoal.future()
    recv.report(done)
    return await done


async def order():
    """Messages from the main program to each element, and from each element to the next on
    another PE, arrive in the order they were sent (checked on arrival), all of them."""
    recv = shoal.Array(Receiver, 3, map="round_robin")
    n = 600
    for k in range(n):
        recv[k % 3].take(-1, k // 3)
    for i in range(3):
        recv[i].send_to((i + 1) % 3, n // 3)
    for i, (seen, bcasts) in enumerate(await reports(recv)):
        assert seen == sorted([(-1, n // 3 - 1), ((i - 1) % 3, n // 3 - 1)]), (i, seen)
        assert bcasts == [], bcasts


async def broadcasts():
    """Broadcasts reach every element once each, in the order they were sent, amid
    point-to-point messages to the same elements."""
    recv = shoal.Array(Receiver, 3, map="round_robin")
    n = 600
    for k in range(n):
        recv[k % 3].take(-1, k // 3)
        if k % 120 == 0:
            recv.note(k // 120)
    got = await reports(recv)
    assert len(got) == 3
    for seen, bcasts in got:
        assert seen == [(-1, n // 3 - 1)], seen
        assert bcasts == [0, 1, 2, 3, 4], bcasts


async def call_ret():
    """A call with ``ret=True`` to one element gives a future of the method's return value."""
    recv = shoal.Array(Receiver, 3, map="round_robin")
    futs = [recv[i].square(i + 2, ret=True) for i in range(3)]
    assert [await f for f in futs] == [4, 9, 16]


async def broadcast_ret():
    """A broadcast with ``ret=True`` gives a future of every element's return value, in index
    order (the elements are on different PEs)."""
    recv = shoal.Array(Receiver, 3, map="round_robin")
    assert await recv.square(3, ret=True) == [9, 9, 9]
    assert await recv.times_index(5, ret=True) == [0, 5, 10]


class Counter(shoal.Chare):
    def __init__(self):
        self.count = 0

    def hit(self, k):
        self.count += 1

    def total(self, fut):
        self.contribute(self.count, Reducer.sum, fut)

    def move(self):
        self.migrate((shoal.my_pe() + 1) % shoal.num_pes())


async def exactly_once():
    """Messages to elements that keep migrating (one at a time, and all at once by a
    broadcast) are each delivered exactly once."""
    n = 16
    c = shoal.Array(Counter, n)
    rng = random.Random(3)
    sent = 0
    for step in range(40):
        for _ in range(50):
            c[rng.randrange(n)].hit(sent)
            sent += 1
        c[rng.randrange(n)].move()
        if step % 10 == 0:
            c.move()
    await shoal.quiescence()
    fut = shoal.future()
    c.total(fut)
    assert await fut == sent, sent
    return sent


class Kinds(shoal.Chare):
    """Entry methods of every kind the runtime calls: plain ones of 0 to 4 arguments, with
    keywords, a static and a class method, one an instance attribute shadows."""

    def __init__(self):
        self.calls = []
        self.shadowed = "an attribute"  # (of the instance, not the class's method)

    def none(self):
        return "none"

    def one(self, a):
        return a

    def two(self, a, b):
        return a + b

    def four(self, a, b, c, d):
        return [a, b, c, d]

    def keywords(self, a, b=1, *, c=2):
        return (a, b, c)

    @staticmethod
    def static(a, b):
        return ("static", a, b)

    @classmethod
    def klass(cls, a):
        return (cls.__name__, a)

    def shadowed(self, a):
        return ("method", a)


async def method_kinds():
    """Every kind of entry method gets its arguments, called twice (the first call finds
    the method, the second uses what the first found), on this PE and on others; an entry
    method is the class's, whatever attribute of that name an instance has."""
    k = shoal.Array(Kinds, 3, map="round_robin")
    for _ in range(2):
        for i in range(3):
            e = k[i]
            assert await e.none(ret=True) == "none"
            assert await e.one(5, ret=True) == 5
            assert await e.two(2, 3, ret=True) == 5
            assert await e.four(1, 2, 3, 4, ret=True) == [1, 2, 3, 4]
            assert await e.keywords(1, ret=True) == (1, 1, 2)
            assert await e.keywords(1, c=5, ret=True) == (1, 1, 5)
            assert await e.keywords(a=7, b=8, ret=True) == (7, 8, 2)
            assert await e.static(1, 2, ret=True) == ("static", 1, 2)
            assert await e.klass(4, ret=True) == ("Kinds", 4)
            assert await e.shadowed(1, ret=True) == ("method", 1)


class Color(enum.IntEnum):
    RED = 1


def shape(x):
    """The types of ``x``, nested as its tuples are."""
    return tuple(shape(y) for y in x) if type(x) is tuple else type(x).__name__


class Echo(shoal.Chare):
    def __init__(self):
        self.seen = []

    def kinds(self, *args):
        """The arguments' types, and whether the first two are one object."""
        return shape(args), len(args) > 1 and args[0] is args[1]

    def record(self, *args):
        self.seen.append(self.kinds(*args))

    def recorded(self):
        return self.seen


async def plain_values():
    """Arguments of every type arrive equal and of the same types, whether they travel by
    marshal (plain values) or by pickle (anything else), in a call with a future and in one
    without (a CALL): numpy scalars, int subclasses and shared lists are not turned into
    their plain look-alikes."""
    e = shoal.Array(Echo, 2, map="round_robin")
    shared = [1, 2]
    cases = [
        ((1, 2.5, "s", b"b", None, True, 2**100, -7), False),
        ((2**31, -2**31 - 1, 2**62, -2**63, 1e308, "\ud800", "é"), False),  # (ints 'l', a
        # lone surrogate: each way of marshal's: the direct one's, its fallback, Python's)
        ((b"x" * 5000, "y" * 70000), False),  # (beyond EAGER, beyond the posted receive)
        (((1, (2, ("x", None))), (3.0,)), False),
        ((np.float64(1.5), np.int64(3), Color.RED, 1), False),
        ((shared, shared), True),
        (({"a": 1}, [1, 2.0], {1, 2}, 1 + 2j), False),
        (((((((1,),),),),),), False),  # (deeper than marshal's depth: by pickle)
    ]
    for i in range(2):
        for args, same in cases:
            assert await e[i].kinds(*args, ret=True) == (shape(args), same), (i, args)
            e[i].record(*args)
        assert await e[i].recorded(ret=True) == [(shape(a), s) for a, s in cases], i
    return type(current().net._direct).__name__  # (the direct way's Link, where built)


if __name__ == "__main__":
    main({"order": order, "broadcasts": broadcasts, "call_ret": call_ret,
          "broadcast_ret": broadcast_ret, "exactly_once": exactly_once,
          "method_kinds": method_kinds, "plain_values": plain_values})
