"""Aggregated items (run by test_aggregation.py): ``python aggregation.py NAME... [--mesh A,B]``.

The scenarios send items from every PE and check, against the multiset sent, that each item
ran exactly once at the element it was sent to; each returns figures for the test."""

import sys
from collections import Counter

import numpy as np
from runner import main

import shoal
from shoal import Reducer
from shoal.runtime.vmesh import coords

DT = np.dtype([("src", "<i4"), ("seq", "<i4"), ("x", "<f8")])  # 16 bytes
MESH = None
if "--mesh" in sys.argv:
    k = sys.argv.index("--mesh")
    MESH = tuple(int(s) for s in sys.argv[k + 1].split(","))
    del sys.argv[k:k + 2]


def items_of(sender, n, nelems, seed=0):
    """The (destination element, item) pairs element ``sender`` sends in a blast."""
    rng = np.random.default_rng(1000 * seed + sender)
    return [(dest, (sender, k, dest + k / 8)) for k, dest in
            enumerate(rng.integers(0, nelems, n).tolist())]


def expected(nelems, n, seed=0, wrap=tuple):
    out = Counter()
    for s in range(nelems):
        for dest, item in items_of(s, n, nelems, seed):
            out[(dest, wrap(item))] += 1
    return out


class Sink(shoal.Chare):
    """Records every item it receives (with the PE it ran on), and sends items when asked."""

    def __init__(self):
        self.got = []

    def take(self, item):
        self.got.append((self.thisIndex[0], shoal.my_pe(), item))

    def blast(self, agg, n, nelems, flush=False, seed=0, wrap=None):
        self.agg = agg  # kept: it travels with the element when it moves
        for dest, item in items_of(self.thisIndex[0], n, nelems, seed):
            agg.send(dest, item if wrap is None else wrap(item))
        if flush:
            agg.flush()

    def again(self, n, nelems, seed):
        """A blast through the aggregator this element kept (after a move: unpickled here)."""
        self.blast(self.agg, n, nelems, True, seed)

    def hop(self, pe):
        self.migrate(pe)

    def where(self):
        return shoal.my_pe()

    def report(self, fut):
        self.contribute(self.got, Reducer.gather, fut)

    def count(self, fut):
        self.contribute(len(self.got), Reducer.sum, fut)

    async def later(self, item):
        pass


class Box:
    """A picklable item that is not a tuple."""

    def __init__(self, item):
        self.item = item

    def __eq__(self, other):
        return isinstance(other, Box) and self.item == other.item

    def __hash__(self):
        return hash(self.item)


class PerPE(shoal.Chare):
    """One per PE: the aggregator's statistics and flushes of this PE."""

    def __init__(self):
        self.got = []

    def take(self, item):
        self.got.append((self.thisIndex[0], item))

    def flush(self, agg, fut):
        agg.flush()
        self.contribute(0, Reducer.sum, fut)

    def stats(self, agg, fut):
        self.contribute([agg.stats()], Reducer.gather, fut)

    def report(self, fut):
        self.contribute(self.got, Reducer.gather, fut)

    def calls(self, fut):
        """Calls of ``take`` booked in this PE's statistics (the elements here now)."""
        calls = sum(methods["take"][0] for key, methods in shoal.stats()["elements"].items()
                    if "take" in methods and key[0] != self.thisProxy.cid)
        self.contribute(calls, Reducer.sum, fut)


async def received(arr, key=lambda item: tuple(item)):
    fut = shoal.future()
    arr.report(fut)
    got = Counter()
    for rows in await fut:
        for index, _pe, item in rows:
            got[(index, key(item))] += 1
    return got


async def stats_of(agg):
    group = shoal.Group(PerPE)
    fut = shoal.future()
    group.stats(agg, fut)
    return [s for rows in await fut for s in rows]


async def flush_everywhere(agg):
    group = shoal.Group(PerPE)
    fut = shoal.future()
    group.flush(agg, fut)
    await fut


async def exactly_once_dtype():
    """Every element sends items of a 16-byte dtype to random elements; each item ran once,
    at its element, and arrived as a tuple of Python scalars."""
    p = shoal.num_pes()
    nelems, n = 8 * p, 300
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, buffer_items=64, mesh=MESH)
    for i in range(nelems):
        arr[i].blast(agg, n, nelems)
    await shoal.quiescence()
    fut = shoal.future()
    arr.report(fut)
    rows = [r for part in await fut for r in part]
    assert all(type(item) is tuple and type(item[2]) is float for _, _, item in rows)
    got = Counter((index, item) for index, _, item in rows)
    assert got == expected(nelems, n), "items lost or duplicated"
    stats = await stats_of(agg)
    mesh = stats[0]["mesh"]
    assert all(s["buffers"] == sum(d - 1 for d in mesh) + 1 for s in stats), stats
    # minimal routes: an item enters one buffer per coordinate its PEs differ in (at least 1)
    def hops(a, b):
        return max(1, sum(x != y for x, y in zip(coords(a, mesh), coords(b, mesh), strict=True)))

    route = sum(hops(s // 8, d // 8) for s in range(nelems) for d, _ in items_of(s, n, nelems))
    entered = sum(s["items"] for s in stats)
    assert entered == route, (entered, route)
    return {"items": sum(got.values()), "mesh": list(mesh), "entered": entered,
            "messages": sum(s["messages"] for s in stats)}


async def exactly_once_pickled():
    """Items that are arbitrary objects, pickled in batches, to an array and to a group."""
    p = shoal.num_pes()
    nelems, n = 6 * p, 200
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", buffer_items=50, mesh=MESH)
    for i in range(nelems):
        arr[i].blast(agg, n, nelems, wrap=Box)
    group = shoal.Group(PerPE)
    gagg = shoal.Aggregator(group, "take", buffer_items=7, mesh=MESH)
    sent = Counter()
    for k in range(500):
        dest = (k * 7) % p
        gagg.send(dest, {"k": k, "s": "x" * (k % 5)})
        sent[(dest, k)] += 1
    await shoal.quiescence()
    got = await received(arr, key=lambda box: box.item)
    assert got == expected(nelems, n), "items lost or duplicated"
    fut = shoal.future()
    group.report(fut)
    ggot = Counter((pe, d["k"]) for rows in await fut for pe, d in rows)
    assert ggot == sent, "group items lost or duplicated"
    return {"items": sum(got.values()) + sum(ggot.values())}


async def migration():
    """Items buffered while their elements migrate, then sent: every one arrives at its
    element's old PE and is forwarded, once; then items flow while elements keep moving."""
    p = shoal.num_pes()
    nelems, n = 4 * p, 100
    arr = shoal.Array(Sink, nelems)
    # buffers hold every item until the explicit flush: 4 * 100 items per PE
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, buffer_items=10_000, flush_period=60.0,
                           mesh=MESH)
    for fut in [arr[i].blast(agg, n, nelems, ret=True) for i in range(nelems)]:
        await fut  # every item is buffered, for the PE its element is on, before any moves
    for i in range(nelems):
        arr[i].hop((i * p // nelems + 1) % p)  # block map: from its home to the next PE
    assert [await arr[i].where(ret=True) for i in range(nelems)] == [
        (i * p // nelems + 1) % p for i in range(nelems)]
    await flush_everywhere(agg)
    await shoal.quiescence()
    forwarded = sum(s["forwarded"] for s in await stats_of(agg))
    assert forwarded == nelems * n, (forwarded, nelems * n)  # every element had moved
    for i in range(nelems):
        arr[i].again(n, nelems, 9)
    # now items flow while elements move about, with small buffers and flushes
    flow = shoal.Aggregator(arr, "take", item_dtype=DT, buffer_items=16, mesh=MESH)
    rng = np.random.default_rng(7)
    for seed in range(1, 6):
        for i in range(nelems):
            arr[i].blast(flow, n, nelems, flush=seed % 2 == 0, seed=seed)
            if rng.random() < 0.5:
                arr[int(rng.integers(nelems))].hop(int(rng.integers(p)))
    await shoal.quiescence()
    want = expected(nelems, n)
    for seed in (*range(1, 6), 9):
        want.update(expected(nelems, n, seed))
    got = await received(arr)
    assert got == want, "items lost or duplicated under migration"
    moved = sum(s["forwarded"] for s in await stats_of(flow))
    return {"items": sum(got.values()), "forwarded_first": forwarded, "forwarded_flow": moved}


async def quiescence_waits():
    """charm#1658: items sit in buffers (no flush, a long flush period); quiescence must
    not be detected until the timer has sent them and they have run."""
    p = shoal.num_pes()
    nelems, n = 4 * p, 50
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, flush_period=1.0, mesh=MESH)
    for i in range(nelems):
        arr[i].blast(agg, n, nelems)
    await shoal.quiescence()
    fut = shoal.future()
    arr.count(fut)
    got = await fut
    assert got == nelems * n, f"quiescence with {nelems * n - got} items still buffered"
    return {"items": got}


async def timer_flush():
    """No flush and no quiescence: the flush period alone delivers every item."""
    p = shoal.num_pes()
    nelems, n = 4 * p, 50
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, flush_period=0.05, mesh=MESH)
    for i in range(nelems):
        arr[i].blast(agg, n, nelems)
    got = 0
    for _ in range(400):  # up to 40 s on a loaded machine; about 0.1 s is expected
        await shoal.sleep(0.1)
        fut = shoal.future()
        arr.count(fut)
        got = await fut
        if got == nelems * n:
            break
    assert got == nelems * n, f"{nelems * n - got} items never left their buffers"
    stats = await stats_of(agg)
    assert sum(s["items"] for s in stats) >= nelems * n
    return {"items": got}


async def booked():
    """Every delivered item is a call of its element in the runtime's statistics (which the
    load balancer reads), also with --cpu-stats, where each call is booked alone."""
    p = shoal.num_pes()
    nelems, n = 4 * p, 100
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, buffer_items=32, mesh=MESH)
    for i in range(nelems):
        arr[i].blast(agg, n, nelems, flush=True)
    await shoal.quiescence()
    fut = shoal.future()
    shoal.Group(PerPE).calls(fut)
    calls = await fut
    assert calls == nelems * n, (calls, nelems * n)
    return {"calls": calls}


def refused(fn):
    try:
        fn()
    except shoal.UsageError as exc:
        return str(exc)
    raise AssertionError(f"{fn} was accepted")


async def bad_input():
    """Mistakes are UsageErrors that say what is wrong; a refused item is dropped alone and
    the others still arrive."""
    arr = shoal.Array(Sink, 4)
    msgs = {
        "method": refused(lambda: shoal.Aggregator(arr, "tkae")),
        "async": refused(lambda: shoal.Aggregator(arr, "later")),
        "dtype": refused(lambda: shoal.Aggregator(arr, "take", item_dtype="not a dtype")),
        "object_dtype": refused(lambda: shoal.Aggregator(arr, "take", item_dtype=object)),
        "mesh": refused(lambda: shoal.Aggregator(arr, "take", mesh=(3, 5))),
        "proxy": refused(lambda: shoal.Aggregator(arr[0], "take")),
        "buffer": refused(lambda: shoal.Aggregator(arr, "take", buffer_items=0)),
        "period": refused(lambda: shoal.Aggregator(arr, "take", flush_period=0)),
    }
    agg = shoal.Aggregator(arr, "take", item_dtype=DT)
    msgs["fields"] = refused(lambda: agg.send(1, (1, 2)))
    msgs["index"] = refused(lambda: agg.send(9, (1, 2, 3.0)))
    msgs["index_type"] = refused(lambda: agg.send([1], (1, 2, 3.0)))
    agg.send(1, (1, 2, 3.0))
    agg.send(2, ("one", 2, 3.0))
    agg.send(2, (4, 5, 6.0))
    msgs["value"] = refused(agg.flush)
    pickled = shoal.Aggregator(arr, "take")
    pickled.send(3, "fine")
    pickled.send(3, lambda: 0)
    msgs["pickle"] = refused(pickled.flush)
    await shoal.quiescence()  # the refused items do not hold it up
    got = await received(arr, key=lambda item: item)
    assert got == Counter({(1, (1, 2, 3.0)): 1, (2, (4, 5, 6.0)): 1, (3, "fine"): 1}), got
    return msgs


def _measured():
    return [d["value"] for d in shoal.control_history()["decisions"]
            if d["decision"] == "measured" and d["point"] == "agg_buffer"]


async def tuned():
    """Under ``--tune agg_buffer``: iterations of blasts ended by quiescence, main calling
    ``shoal.iteration()`` after each, until the controller has measured two buffer sizes
    (a loaded machine grows its windows: at most 400 iterations); every PE's aggregator has
    the size in force at the end, and every item ran once."""
    p = shoal.num_pes()
    nelems, n = 4 * p, 200
    arr = shoal.Array(Sink, nelems)
    agg = shoal.Aggregator(arr, "take", item_dtype=DT, mesh=MESH)
    iters = 0
    while len(set(_measured())) < 2 and iters < 400:
        for i in range(nelems):
            arr[i].blast(agg, n, nelems, False, iters)
        await shoal.quiescence()
        await shoal.iteration()
        iters += 1
    await shoal.quiescence()  # (the last size the controller set has reached every PE)
    got = await received(arr)
    want = Counter()
    for it in range(iters):
        want.update(expected(nelems, n, it))
    assert got == want, "items lost or duplicated"
    history = shoal.control_history()
    final = history["points"]["agg_buffer"]
    assert {s["buffer_items"] for s in await stats_of(agg)} == {final}
    measured = _measured()
    values = [row["agg_buffer"] for row in history["iterations"]]
    return {"final": final, "measured": measured, "values": values,
            "items": sum(got.values()), "iterations": iters}


if __name__ == "__main__":
    main({f.__name__: f for f in (exactly_once_dtype, exactly_once_pickled, migration,
                                  quiescence_waits, timer_flush, booked, bad_input, tuned)})
