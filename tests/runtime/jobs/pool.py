"""The task pool (``shoal.pool``), written the way a user writes it (run by
test_pool.py): ``python pool.py NAME... [--dir DIR]``."""

import gc
import sys
import time
from pathlib import Path

from runner import main

import shoal

WORK = Path(sys.argv[sys.argv.index("--dir") + 1]) if "--dir" in sys.argv else None
if WORK is not None:
    k = sys.argv.index("--dir")
    del sys.argv[k:k + 2]


def square(x):
    return x * x


def where(x):
    return (x, shoal.my_pe())


def add(a, b, c=0):
    return a + b + c


async def outer(n):
    """A task that uses the pool itself: the sum of the squares below ``n``."""
    squares = await shoal.pool.map(square, range(n), chunksize=3)
    inner = await shoal.pool.submit(add, n, 1000)
    return sum(squares) + inner


async def deep(level):
    """Nested three levels deep."""
    if level == 0:
        return 1
    parts = await shoal.pool.map(deep, [level - 1] * 3)
    return sum(parts)


def fails(x):
    if x == 5:
        raise ValueError(f"item {x} is bad")
    return x


def odd_fails(x):
    if x % 2:
        raise ValueError(f"item {x} is odd")
    return x


def unpicklable(x):
    return lambda: x


async def mapping():
    """map gives the results in the order of the items whatever the chunk size, and the
    work spreads over every PE."""
    items = list(range(101))
    for chunk in (1, 7, 200):
        assert await shoal.pool.map(square, items, chunksize=chunk) == [x * x for x in items]
    assert await shoal.pool.map(square, []) == []
    pes = {pe for _, pe in await shoal.pool.map(where, range(200), chunksize=2)}
    return sorted(pes)


async def submitting():
    """submit returns a future per call; awaited in any order each has its own result."""
    futs = [shoal.pool.submit(add, k, 2 * k, c=1) if k % 2 else shoal.pool.submit(add, k, 1)
            for k in range(20)]
    got = [await f for f in reversed(futs)]
    assert got == [3 * k + 1 if k % 2 else k + 1 for k in reversed(range(20))], got


async def nested():
    """Tasks that await the pool (twice nested, more outer tasks than PEs) complete: a
    task that waits lets its PE take other tasks."""
    got = await shoal.pool.map(outer, [5, 10, 20, 30, 40, 50, 60, 70])
    assert got == [sum(x * x for x in range(n)) + n + 1000 for n in [5, 10, 20, 30, 40, 50, 60,
                                                                       70]]
    assert await shoal.pool.map(deep, [3, 2]) == [27, 9]


async def errors():
    """A failing task raises its exception at the caller, with the remote traceback as its
    cause (as an entry method's does); so does a result that cannot be pickled; a lambda is
    refused at the call."""
    try:
        await shoal.pool.map(fails, range(10), chunksize=2)
    except ValueError as exc:
        assert str(exc) == "item 5 is bad", exc
        text = str(exc.__cause__)
    else:
        raise AssertionError("no error")
    assert "ValueError: item 5 is bad" in text and "in fails" in text, text
    assert "pool task" in text and "raised" in text, text
    try:
        await shoal.pool.submit(unpicklable, 3)
    except Exception as exc:
        assert "unpicklable" in str(exc.__cause__), str(exc.__cause__)
    else:
        raise AssertionError("no error")
    try:
        shoal.pool.map(lambda x: x, [1])
    except shoal.UsageError as exc:
        assert "cannot be pickled" in str(exc), str(exc)
    else:
        raise AssertionError("no error")
    assert await shoal.pool.map(square, [3]) == [9]  # the pool still works


async def many_failures():
    """A map whose chunks fail on several PEs raises once, in the caller, after every chunk
    has answered: the first failed chunk's exception, every failure attached; no failure
    is left unread, so nothing ends the job afterwards (before: the first failure was
    raised and the others, never read, ended the job when their futures were freed)."""
    try:
        await shoal.pool.map(odd_fails, range(12), chunksize=2)
    except ValueError as exc:
        assert str(exc) == "item 1 is odd", exc
        got = [(first, str(e)) for first, e in exc.pool_failures]
        assert got == [(k - 1, f"item {k} is odd") for k in (1, 3, 5, 7, 9, 11)], got
        assert all("in odd_fails" in str(e.__cause__) for _, e in exc.pool_failures)
        assert exc.__notes__ == [f"shoal.pool: the chunk from item {k - 1} raised too: "
                                 f"ValueError: item {k} is odd" for k in (3, 5, 7, 9, 11)]
    else:
        raise AssertionError("no error")
    try:
        await shoal.pool.submit(odd_fails, 3)
    except ValueError as exc:
        assert [str(e) for _, e in exc.pool_failures] == ["item 3 is odd"]
        assert not hasattr(exc, "__notes__")
    else:
        raise AssertionError("no error")
    gc.collect()  # (a failure nobody read would end the job when freed)
    await shoal.quiescence()
    assert await shoal.pool.map(odd_fails, [0, 2]) == [0, 2]  # the pool still works


def hold(path, n):
    """Occupy this PE (a long task) until ``n`` other tasks have each left a line in
    ``path``; gives up after 60 s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return ("hold", shoal.my_pe())
        time.sleep(0.001)
    raise RuntimeError(f"only {len(path.read_text().splitlines())} of {n} tasks ran while "
                       "this one held its PE")


def short(path, k):
    with path.open("a") as f:
        f.write(f"{k}\n")
    return ("short", shoal.my_pe())


async def dynamic():
    """A long task that holds its PE until 40 short tasks have run: it completes only
    because the other PEs take every short task (a static split would leave some of them
    behind it for ever)."""
    path = WORK / "lines"
    path.unlink(missing_ok=True)
    n = 40
    # the other PEs' requests for chunks after errors() may still be on their way: PE 0
    # takes a chunk only when every other PE has one, and would take the long one while a
    # request had not arrived (PE 0 cannot hand out chunks while it runs one: a documented
    # limit)
    await shoal.quiescence()
    first = shoal.pool.submit(hold, path, n)
    rest = [shoal.pool.submit(short, path, k) for k in range(n)]
    _, held = await first
    pes = [pe for _, pe in [await f for f in rest]]
    assert held not in pes, (held, pes)
    return len(set(pes))


class User(shoal.Chare):
    async def compute(self, n):
        return sum(await shoal.pool.map(square, range(n), chunksize=4))


async def from_chares():
    """Elements use the pool from their coroutine entry methods."""
    arr = shoal.Array(User, 6)
    assert await arr.compute(10, ret=True) == [285] * 6


if __name__ == "__main__":
    main({"mapping": mapping, "submitting": submitting, "nested": nested, "errors": errors,
          "dynamic": dynamic, "from_chares": from_chares, "many_failures": many_failures})
