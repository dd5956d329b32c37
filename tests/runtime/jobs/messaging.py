"""Point-to-point messages, broadcasts and calls with ``ret=True`` (run by test_messaging.py):
``python messaging.py NAME...``."""

import random

from runner import main

import shoal
from shoal import Reducer


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


if __name__ == "__main__":
    main({"order": order, "broadcasts": broadcasts, "call_ret": call_ret,
          "broadcast_ret": broadcast_ret, "exactly_once": exactly_once})
