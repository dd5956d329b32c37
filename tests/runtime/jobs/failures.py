"""Exceptions that reach the caller, as a user meets them (run by test_failures.py):
``python failures.py NAME...``."""

from runner import main

import shoal
from shoal.runtime.failure import RemoteTraceback


class OddError(Exception):
    """An exception that pickles but does not unpickle (its __init__ takes two args)."""

    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


class Worker(shoal.Chare):
    def divide(self, x):
        return 12 / x

    async def later(self, x):
        await shoal.sleep(0.001)
        return {"k": 1}[x]

    def check(self, bad):
        if self.thisIndex[0] in bad:
            raise ValueError(f"element {self.thisIndex[0]} is bad")
        return self.thisIndex[0]

    async def relay(self, x):
        """Awaits another element's failing call: the exception reaches this coroutine,
        which handles it."""
        try:
            return await self.thisProxy[0].divide(x, ret=True)
        except ZeroDivisionError as exc:
            return f"handled {exc}"

    async def forward(self, x):
        """Awaits another element's failing call and lets it propagate to its own
        caller."""
        return await self.thisProxy[0].divide(x, ret=True)

    def odd(self):
        raise OddError(1, 2)


async def element_call():
    """ret=True on one element: the exception is raised where the future is awaited, its
    remote traceback attached; the element goes on serving."""
    w = shoal.Array(Worker, 4)
    last = shoal.num_pes() - 1
    try:
        await w[3].divide(0, ret=True)
        raise AssertionError("not raised")
    except ZeroDivisionError as exc:
        cause = exc.__cause__
        assert isinstance(cause, RemoteTraceback), cause
        text = str(cause)
        assert text.startswith(f"PE {last}, Worker[3].divide raised:"), text
        assert "return 12 / x" in text and "ZeroDivisionError: division by zero" in text
    assert await w[3].divide(4, ret=True) == 3.0


async def coroutine_call():
    """The same for an ``async def`` entry method that raises after an await."""
    w = shoal.Array(Worker, 4)
    try:
        await w[2].later("missing", ret=True)
        raise AssertionError("not raised")
    except KeyError as exc:
        assert "Worker[2].later raised" in str(exc.__cause__)
    assert await w[2].later("k", ret=True) == 1


async def broadcast_ret():
    """A broadcast with ret=True raises the exception of the lowest failing index from the
    awaited result and names the others; without failures it gives the list."""
    w = shoal.Array(Worker, 6)
    try:
        await w.check({4, 1, 5}, ret=True)
        raise AssertionError("not raised")
    except ValueError as exc:
        assert str(exc) == "element 1 is bad"
        assert "2 other element(s) of the broadcast raised too: [4], [5]" in str(exc.__cause__)
    assert await w.check(set(), ret=True) == list(range(6))


async def broadcast_list():
    """ret=True, return_exceptions=True (charm4py's behaviour, asyncio.gather's keyword):
    the list in index order with each failing element's exception in its place, its
    remote traceback as __cause__; nothing is raised and the job goes on. Without ret=True,
    or on one element, the keyword is refused where it is written."""
    from shoal.errors import UsageError

    w = shoal.Array(Worker, 6)
    out = await w.check({4, 1}, ret=True, return_exceptions=True)
    assert [type(v).__name__ for v in out] == ["int", "ValueError", "int", "int",
                                               "ValueError", "int"], out
    assert out[0] == 0 and out[5] == 5 and str(out[4]) == "element 4 is bad", out
    assert "Worker[4].check raised" in str(out[4].__cause__), out[4].__cause__
    out = await w.later("missing", ret=True, return_exceptions=True)  # coroutines too
    assert len(out) == 6 and all(isinstance(v, KeyError) for v in out), out
    assert await w.check(set(), ret=True, return_exceptions=True) == list(range(6))
    for call, said in [(lambda: w.check({1}, return_exceptions=True), "goes with ret=True"),
                       (lambda: w.check({1}, awaitable=True, return_exceptions=True),
                        "goes with ret=True"),
                       (lambda: w[1].check({1}, ret=True, return_exceptions=True),
                        "a call to one element raises")]:
        try:
            call()
        except UsageError as exc:
            assert said in str(exc), exc
        else:
            raise AssertionError(f"accepted: {said}")


async def broadcast_awaitable():
    """awaitable=True: the same when waiting only for completion."""
    w = shoal.Array(Worker, 5)
    try:
        await w.check({3}, awaitable=True)
        raise AssertionError("not raised")
    except ValueError as exc:
        assert str(exc) == "element 3 is bad"
    assert await w.check(set(), awaitable=True) is None


async def nested():
    """An element that awaits a failing call handles it itself, or lets it propagate to
    its own caller (with the inner remote traceback)."""
    w = shoal.Array(Worker, 4)
    assert await w[3].relay(0, ret=True) == "handled division by zero"
    try:
        await w[3].forward(0, ret=True)
        raise AssertionError("not raised")
    except ZeroDivisionError as exc:
        text = str(exc.__cause__)
        assert "Worker[3].forward raised" in text and "Worker[0].divide raised" in text, text


async def unpicklable():
    """An exception that cannot travel as it is arrives as shoal.RemoteError with its type
    and message."""
    w = shoal.Array(Worker, 2)
    try:
        await w[1].odd(ret=True)
        raise AssertionError("not raised")
    except shoal.RemoteError as exc:
        assert str(exc) == "OddError: 1 and 2"
        assert "Worker[1].odd raised" in str(exc.__cause__)


if __name__ == "__main__":
    main({"element_call": element_call, "coroutine_call": coroutine_call,
          "broadcast_ret": broadcast_ret, "broadcast_awaitable": broadcast_awaitable,
          "nested": nested, "unpicklable": unpicklable, "broadcast_list": broadcast_list})
