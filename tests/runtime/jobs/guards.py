"""Guarded entry methods (``@shoal.when``) and ``await self.wait(...)``, written the way a
user writes them (run by test_guards.py): ``python guards.py NAME...``."""

import random

from runner import main

import shoal
from shoal import Reducer


class Stage(shoal.Chare):
    """Takes the values of iterations in order, whatever order they arrive in."""

    def __init__(self):
        self.iter = 0
        self.seen = []

    @shoal.when("self.iter == iter")
    def recv(self, iter, value):
        self.seen.append((iter, value))
        self.iter += 1

    def log(self):
        return self.seen


async def ordered():
    """Messages for 10 iterations sent to each element in a shuffled order run in
    iteration order, each once, with their own values."""
    n, iters = 12, 10
    arr = shoal.Array(Stage, n)
    rng = random.Random(3)
    for i in range(n):
        order = list(range(iters))
        rng.shuffle(order)
        for it in order:
            arr[i].recv(it, it * 100 + i)
    await shoal.quiescence()
    logs = await arr.log(ret=True)
    for i, log in enumerate(logs):
        assert log == [(it, it * 100 + i) for it in range(iters)], (i, log)


class Gate(shoal.Chare):
    def __init__(self):
        self.threshold = 10
        self.ran = []
        self.count = 0

    @shoal.when("x + y > self.threshold")
    def take(self, x, y=5, *, tag="none"):
        self.ran.append((x, y, tag))

    def lower(self, t):
        self.threshold = t

    @shoal.when("self.count >= need")
    async def later(self, need):
        """A guarded coroutine entry method: runs once count has reached ``need``."""
        await shoal.sleep(0)
        return (need, self.count)

    def bump(self):
        self.count += 1

    async def until(self, n):
        """Waits for a condition on the chare's state inside a coroutine: resumes at
        once when it holds (the count is exactly ``n``, not more)."""
        await self.wait(f"self.count == {n}")
        return self.count

    def report(self):
        return self.ran


async def arguments():
    """A condition over positional, default and keyword-only arguments; messages whose
    condition holds run at once, the others when the state changes, in arrival order."""
    g = shoal.Array(Gate, 2)
    g[0].take(3)  # 3 + 5 > 10? no
    g[0].take(7)  # 12 > 10: runs
    g[0].take(1, y=2, tag="a")  # 3 > 10? no
    g[0].take(2, 9, tag="b")  # 11 > 10: runs
    await shoal.quiescence()
    assert await g[0].report(ret=True) == [(7, 5, "none"), (2, 9, "b")]
    g[0].lower(2)  # now 8 > 2 and 3 > 2: both held messages run, in arrival order
    await shoal.quiescence()
    assert await g[0].report(ret=True) == [(7, 5, "none"), (2, 9, "b"), (3, 5, "none"),
                                           (1, 2, "a")]


async def waits():
    """``await self.wait(...)`` resumes when the condition first holds; a guarded
    coroutine method called with ret=True answers once its condition held."""
    g = shoal.Array(Gate, 1)
    got = g[0].until(3, ret=True)
    later = g[0].later(2, ret=True)
    for _ in range(5):
        g[0].bump()
    assert await got == 3
    assert await later == (2, 5)
    assert await g[0].until(5, ret=True) == 5  # holds already: resumes at once


class Roamer(shoal.Chare):
    def __init__(self):
        self.phase = 0
        self.done = []

    @shoal.when("self.phase == p")
    def work(self, p, k):
        self.done.append((p, k, shoal.my_pe()))
        return k

    def go(self, p):
        self.phase = p

    def move(self, pe):
        self.migrate(pe)

    def held(self):
        return len(self._slot.held)

    def report(self):
        return self.done


async def migrating():
    """Elements move with messages held for a later phase; there the phase changes and
    each held message runs once, on the new PE."""
    n = 8
    p = shoal.num_pes()
    arr = shoal.Array(Roamer, n)
    for k in range(3):
        arr.work(1, k)  # broadcasts, held: phase is 0
    await shoal.quiescence()
    assert await arr.held(ret=True) == [3] * n
    for i in range(n):
        arr[i].move((i + 1) % p)
    await shoal.quiescence()
    assert await arr.held(ret=True) == [3] * n
    arr.go(1)
    await shoal.quiescence()
    reports = await arr.report(ret=True)
    for i, rep in enumerate(reports):
        assert [(ph, k) for ph, k, _ in rep] == [(1, 0), (1, 1), (1, 2)], (i, rep)
        assert {pe for _, _, pe in rep} == {(i + 1) % p}, (i, rep)
    return sum(len(r) for r in reports)


async def returns():
    """A broadcast and a section multicast with ret=True to a guarded method answer
    once the condition holds, with every element's value."""
    arr = shoal.Array(Roamer, 6)
    every = arr.work(2, 7, ret=True)
    some = arr[::2].work(2, 9, ret=True)
    await shoal.quiescence()
    assert not every.done and not some.done
    arr.go(2)
    assert await every == [7] * 6
    assert await some == [9] * 3


class Direct(shoal.Chare):
    def __init__(self):
        self.ready = False

    @shoal.when("self.ready")
    def guarded(self):
        return "ran"

    def call_it(self):
        try:
            self.guarded()
        except shoal.UsageError as exc:
            return str(exc)
        return "no error"


async def direct():
    """A guarded method called directly (not by a message) while its condition is false
    is an error in the caller, with a message that says why."""
    d = shoal.Array(Direct, 1)
    text = await d[0].call_it(ret=True)
    assert "condition 'self.ready' is false" in text, text


class Never(shoal.Chare):
    def __init__(self):
        self.flag = False

    @shoal.when("self.flag")
    def wait_for_flag(self, fut):
        fut.send(1)


async def never():
    """A condition that never comes true: main awaits a future nothing can resolve, so
    the job ends with "no work is pending" (it does not hang)."""
    n = shoal.Array(Never, 1)
    fut = shoal.future()
    n[0].wait_for_flag(fut)
    await fut


class Sum(shoal.Chare):
    def __init__(self):
        self.k = 0

    @shoal.when("self.k == k")
    def part(self, k, fut):
        self.k += 1
        self.contribute(k, Reducer.sum, fut)


async def with_reductions():
    """Reductions from guarded methods that run out of order complete with the values of
    their own iteration."""
    arr = shoal.Array(Sum, 5)
    futs = [shoal.future() for _ in range(4)]
    for k in reversed(range(4)):
        arr.part(k, futs[k])
    assert [await f for f in futs] == [5 * k for k in range(4)]


if __name__ == "__main__":
    main({"ordered": ordered, "arguments": arguments, "waits": waits,
          "migrating": migrating, "returns": returns, "direct": direct, "never": never,
          "with_reductions": with_reductions})
