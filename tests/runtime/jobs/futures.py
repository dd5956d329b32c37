"""Futures as a charm4py user reaches for them (run by test_futures.py):
``python futures.py NAME...``: ``shoal.iwait``, ``shoal.future(n)``, ``awaitable=True``."""

from runner import main

import shoal


class Teller(shoal.Chare):
    def __init__(self):
        self.ran = 0

    def tell(self, fut, value):
        fut.send(value)

    def tell_twice(self, fut):
        fut.send((self.thisIndex[0], "a"))
        fut.send((self.thisIndex[0], "b"))

    def fail(self):
        raise RuntimeError(f"teller {self.thisIndex[0]} failed")

    async def slow(self):
        await shoal.sleep(0.003 * (self.thisIndex[0] % 3))
        self.ran += 1

    def count(self):
        return self.ran


async def iwait_order():
    """iwait yields each future as it completes: main resolves the next only after it got
    the previous one, in an order unlike the list's; futures already complete come
    first; a future that carries an exception is yielded and raises when awaited."""
    t = shoal.Array(Teller, 5)
    futs = [shoal.future() for _ in range(5)]
    done = shoal.future()
    t[2].tell(done, "early")
    assert await done == "early"
    order = [3, 0, 4, 1, 2]
    t[order[0]].tell(futs[order[0]], order[0] * 10)
    got = []
    async for fut in shoal.iwait([done, *futs]):
        if fut is done:
            got.append("done")
            continue
        got.append(futs.index(fut))
        assert await fut == got[-1] * 10
        if len(got) < 6:
            nxt = order[len(got) - 1]
            t[nxt].tell(futs[nxt], nxt * 10)
    assert got == ["done", *order], got
    failing = [t[1].fail(ret=True), t[3].count(ret=True)]
    seen = []
    async for fut in shoal.iwait(failing):
        try:
            seen.append(await fut)
        except RuntimeError as exc:
            seen.append(str(exc))
    assert sorted(seen, key=str) == [0, "teller 1 failed"], seen
    return got[1:]


async def future_of_n():
    """shoal.future(n) resolves after n values, to the list of them in arrival order."""
    t = shoal.Array(Teller, 4)
    fut = shoal.future(8)
    t.tell_twice(fut)
    values = await fut
    assert sorted(values) == [(i, s) for i in range(4) for s in "ab"], values
    for i in range(4):  # each sender's two values in the order it sent them
        assert values.index((i, "a")) < values.index((i, "b"))
    one = shoal.future(1)
    t[0].tell(one, "x")
    assert await one == ["x"]


async def awaitable_broadcast():
    """awaitable=True resolves (to None) once every element has run the broadcast,
    coroutines to their end."""
    t = shoal.Array(Teller, 7)
    for k in range(1, 4):
        assert await t.slow(awaitable=True) is None
        assert await t.count(ret=True) == [k] * 7


class Star(shoal.Chare):
    """Element 0 is a hub with a channel to every other element (a spoke)."""

    async def hub(self, order, result):
        n = len(order)
        chans = [shoal.Channel(self, self.thisProxy[k]) for k in range(1, n + 1)]
        self.acked = shoal.future()
        self.thisProxy[order[0]].spoke(True)
        await self.acked  # spoke order[0]'s value is in its channel's buffer now
        got = []
        async for ch in shoal.iwait([*chans]):
            k = chans.index(ch) + 1
            got.append(k)
            assert await ch.recv() == k * 100  # at once: iwait said it was there
            if len(got) < n:
                self.thisProxy[order[len(got)]].spoke(False)
        result.send(got)

    def spoke(self, ack):
        shoal.Channel(self, self.thisProxy[0]).send(self.thisIndex[0] * 100)
        if ack:
            self.thisProxy[0].ack()  # (after the value: same sender, same order)

    def ack(self):
        self.acked.send(None)


async def iwait_channels():
    """iwait over channels (charm4py's iwait(channels)): a channel comes when a value is
    there to receive, the one whose value was there first, then in arrival order; the
    hub releases the next spoke only after it got the previous one's value."""
    order = [4, 2, 5, 1, 3]
    star = shoal.Array(Star, len(order) + 1)
    result = shoal.future()
    star[0].hub(order, result)
    return await result


if __name__ == "__main__":
    main({"iwait_order": iwait_order, "future_of_n": future_of_n,
          "awaitable_broadcast": awaitable_broadcast, "iwait_channels": iwait_channels})
