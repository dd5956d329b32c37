"""Runtime scenarios run under mpiexec by test_runtime_mpi.py: ``python rt_job.py NAME``.
``python rt_job.py NAME SHM_BYTES`` sets the shared memory per PE (0: buffers by MPI only).
Each scenario checks its own results (a failed assert aborts the job with the PE and the
traceback) and PE 0 prints ``OK NAME`` plus the figures the test compares."""

import pickle
import random
import sys
import time

import numpy as np

import shoal
from shoal import Reducer
from shoal.runtime.wire import transport


def user_max_abs(a, b):
    return a if abs(a) >= abs(b) else b


# ---------------------------------------------------------------- ordering, broadcast, futures
class Receiver(shoal.Chare):
    def __init__(self):
        self.seen = {}
        self.bcasts = []

    def take(self, sender, k):
        assert self.seen.get(sender, -1) == k - 1, (sender, k, self.seen.get(sender))
        self.seen[sender] = k

    def note(self, x):
        self.bcasts.append(x)

    def square(self, x):
        return x * x

    def report(self, fut):
        self.contribute((sorted(self.seen.items()), self.bcasts), Reducer.gather, fut)


async def order():
    recv = shoal.Array(Receiver, 3, map="round_robin")
    n = 600
    for k in range(n):
        recv[k % 3].take(-1, k // 3)
    for x in range(5):
        recv.note(x)
    futs = [recv[i].square(i + 2, ret=True) for i in range(3)]
    assert [await f for f in futs] == [4, 9, 16]
    assert await recv.square(3, ret=True) == [9, 9, 9]  # every element's value, index order
    await shoal.quiescence()
    done = shoal.future()
    recv.report(done)
    reports = await done
    for seen, bcasts in reports:
        assert seen == [(-1, n // 3 - 1)], seen
        assert bcasts == [0, 1, 2, 3, 4], bcasts
    print("OK order", n)


# ---------------------------------------------------------------- reductions
class Contrib(shoal.Chare):
    def run(self, targets):
        i = self.thisIndex[0]
        self.contribute(i + 1, Reducer.sum, targets[0])
        self.contribute(i + 1, Reducer.product, targets[1])
        self.contribute(np.array([i, -i, 2 * i], dtype=np.float64), Reducer.max, targets[2])
        self.contribute(np.full(3, i), Reducer.min, targets[3])
        self.contribute(i >= 0, Reducer.logical_and, targets[4])
        self.contribute(i == 3, Reducer.logical_or, targets[5])
        self.contribute(i * 10, Reducer.gather, targets[6])
        self.contribute(np.arange(1000) * i, Reducer.sum, targets[7])
        self.contribute(i - 5, user_max_abs, targets[8])


class Collector(shoal.Chare):
    def __init__(self, fut):
        self.fut = fut

    def result(self, value):
        self.fut.send(("method", value))


async def reductions():
    n = 7
    arr = shoal.Array(Contrib, (n,))
    futs = [shoal.future() for _ in range(9)]
    arr.run(futs)
    got = [await f for f in futs]
    assert got[0] == n * (n + 1) // 2
    assert got[1] == 5040
    assert np.array_equal(got[2], [n - 1, 0, 2 * (n - 1)])
    assert np.array_equal(got[3], [0, 0, 0])
    assert got[4] is True and got[5] is True
    assert got[6] == [10 * i for i in range(n)]
    assert np.array_equal(got[7], np.arange(1000) * (n * (n - 1) // 2))
    assert got[8] == -5
    # reduction delivered to an entry method, over a 2-D array
    fut = shoal.future()
    col = shoal.create(Collector, args=(fut,), pe=shoal.num_pes() - 1)
    grid = shoal.Array(Contrib2, (3, 4))
    grid.run(col.result)
    assert await fut == ("method", sum(i * 4 + j for i in range(3) for j in range(4)))
    print("OK reductions")


class Contrib2(shoal.Chare):
    def run(self, target):
        i, j = self.thisIndex
        self.contribute(i * 4 + j, Reducer.sum, target)


# ---------------------------------------------------------------- groups and priorities
class PerPE(shoal.Chare):
    def __init__(self):
        self.order = []

    def whoami(self, fut):
        self.contribute([(self.thisIndex[0], shoal.my_pe())], Reducer.sum, fut)

    def burst(self, fut):
        me = self.thisProxy[self.thisIndex]
        for p in (5, -3, 0, 2, -3, 0):
            me.record(p, prio=p)
        me.finish(fut, prio=10)

    def record(self, p):
        self.order.append(p)

    def pe(self):
        return shoal.my_pe()

    def finish(self, fut):
        self.contribute([self.order], Reducer.sum, fut)


async def groups():
    g = shoal.Group(PerPE)
    fut = shoal.future()
    g.whoami(fut)
    pairs = await fut
    assert sorted(pairs) == [(p, p) for p in range(shoal.num_pes())], pairs
    assert await g.pe(ret=True) == list(range(shoal.num_pes()))
    fut = shoal.future()
    g.burst(fut)
    for order in await fut:
        assert order == [-3, -3, 0, 0, 2, 5], order
    print("OK groups")


# ---------------------------------------------------------------- coroutines and channels
class Ring(shoal.Chare):
    def __init__(self, n):
        self.n = n

    async def run(self, steps, fut):
        i = self.thisIndex[0]
        left = shoal.Channel(self, self.thisProxy[(i - 1) % self.n])
        right = shoal.Channel(self, self.thisProxy[(i + 1) % self.n])
        value = float(i)
        for step in range(steps):
            right.send(np.full(2000, value))  # out of band when remote
            left.send(value)
            from_left = await left.recv()
            from_right = await right.recv()
            assert from_left.shape == (2000,) and from_left[0] == (i - 1 - step) % self.n
            value = float(from_left[0])
            assert from_right == float((i + 1 - step) % self.n)
        self.contribute(value, Reducer.sum, fut)

    def twice(self, x):
        return 2 * x

    async def later(self, x):
        await shoal.sleep(0.004 * (self.n - self.thisIndex[0]))  # the last index ends first
        return x + self.thisIndex[0]

    async def nap(self, seconds, fut):
        await shoal.sleep(seconds)
        self.thisProxy[0].relay(fut)

    def relay(self, fut):
        fut.send("rested")

    async def ask(self, fut):
        other = self.thisProxy[(self.thisIndex[0] + 1) % self.n]
        total = 0
        for k in range(5):
            total += await other.twice(k, ret=True)
        self.contribute(total, Reducer.sum, fut)


def on_pe0(index, dims, npes):
    return 0


class Holder(shoal.Chare):
    """Asks to migrate while one of its coroutines is suspended."""

    def __init__(self):
        self.moves = 0

    async def hold(self, fut):
        value = await shoal.Channel(self, self.thisProxy[1]).recv()
        fut.send((value, shoal.my_pe()))

    def move(self, pe):
        self.migrate(pe)

    def where(self):
        return shoal.my_pe(), self.moves

    def release(self, value):
        shoal.Channel(self, self.thisProxy[0]).send(value)

    def on_migrated(self):
        self.moves += 1


async def coroutines():
    n, steps = 6, 25
    ring = shoal.Array(Ring, n, args=(n,))
    fut = shoal.future()
    ring.run(steps, fut)
    # each value moved one place right per step: the sum is unchanged
    assert await fut == float(sum(range(n)))
    fut = shoal.future()
    ring.ask(fut)
    assert await fut == n * 2 * sum(range(5))
    # a broadcast to coroutines: the future waits for every one to return
    assert await ring.later(100, ret=True) == [100 + i for i in range(n)]
    t0 = time.perf_counter()
    await shoal.sleep(0.05)
    assert time.perf_counter() - t0 >= 0.05
    # quiescence waits for a sleeping coroutine and for what it sends when it wakes
    fut = shoal.future()
    ring[1].nap(0.2, fut)
    await shoal.quiescence()
    assert fut.done and await fut == "rested"
    # a migration asked for while a coroutine is suspended waits for it to return (a
    # coroutine's frame cannot be pickled), then happens with messages still in order
    holders = shoal.Array(Holder, 2, map=on_pe0)
    fut = shoal.future()
    holders[0].hold(fut)
    last = shoal.num_pes() - 1
    holders[0].move(last)
    for _ in range(3):
        assert await holders[0].where(ret=True) == (0, 0)
    holders[1].release("go")
    assert await fut == ("go", 0)
    assert await holders[0].where(ret=True) == (last, 1)
    print("OK coroutines")


# ---------------------------------------------------------------- insertion and deletion
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


async def amr():
    cells = shoal.Array(Cell, ndims=2)
    for i in range(4):
        cells.insert((i, 0), args=(0,), pe=i % shoal.num_pes())
    fut = shoal.future()
    cells[(3, 0)].ping(fut)  # may arrive before the insertion: the home keeps it
    assert await fut == (3, 0)
    fut = shoal.future()
    cells.value(fut)
    assert await fut == 4
    cells.refine()
    await shoal.quiescence()
    fut = shoal.future()
    cells.value(fut)
    assert await fut == 12
    cells.delete((0, 0))
    cells.delete((1, 10))
    await shoal.quiescence()
    fut = shoal.future()
    cells.value(fut)
    assert await fut == 10
    fut = shoal.future()
    cells[(2, 11)].ping(fut)
    assert await fut == (2, 11)
    # a broadcast with ret=True right behind an insertion and two deletions: the inserted
    # element answers; a deleted one answers if the broadcast reached it first (the
    # deletion may go through the element's home), and is not waited for otherwise
    cells.insert((9, 9), args=(0,), pe=1)
    cells.delete((3, 0))
    cells.delete((1, 0))
    names = await cells.name(ret=True)
    rest = [(2, 0), (0, 10), (0, 11), (1, 11), (2, 10), (2, 11), (3, 10), (3, 11), (9, 9)]
    assert names == sorted(names) and len(set(names)) == len(names), names
    assert set(names) - {(3, 0), (1, 0)} == set(rest), names
    assert await cells.name(ret=True) == sorted(rest)
    print("OK amr")


# ---------------------------------------------------------------- migration under traffic
SIZES = {0: 9000, 4: 1100}  # doubles in the arrays of every 8th and every 8th + 4th message


class Walker(shoal.Chare):
    def __init__(self, n, rounds, seed):
        self.n = n
        self.rounds = rounds
        self.rng = random.Random(seed * 1000 + self.thisIndex[0])
        self.got = {}
        self.sent = 0
        self.moves = 0
        self.arrivals = 0
        self.bcasts = 0

    def tick(self, r):
        for _ in range(8):
            j = self.rng.randrange(self.n)
            self.sent += 1
            # every 4th message carries an array that travels out of band (and may be
            # forwarded to an element that moved): 8.8 KB by MPI, 72 KB through the shared
            # segments of the sender and of each PE that forwards it
            big = (np.full(SIZES[self.sent % 8], float(self.sent)) if self.sent % 4 == 0
                   else None)
            self.thisProxy[j].recv(self.thisIndex[0], self.sent, big)
        if self.rng.random() < 0.3:
            pe = self.rng.randrange(shoal.num_pes())
            if pe != shoal.my_pe():
                self.moves += 1
            self.migrate(pe)
        if r + 1 < self.rounds:
            self.thisProxy[self.thisIndex].tick(r + 1)

    def recv(self, src, k, big):
        assert (big is None) == (k % 4 != 0)
        assert big is None or (big.shape == (SIZES[k % 8],) and (big == k).all()), (k, big)
        last = self.got.get(src, 0)
        assert k > last, f"{self.thisIndex}: message {k} from {src} after {last}"
        self.got[src] = k

    def count(self):
        self.bcasts += 1

    def on_migrated(self):
        self.arrivals += 1

    def report(self, fut):
        self.contribute(np.array([self.sent, self.moves, self.bcasts, self.arrivals]),
                        Reducer.sum, fut)

    def senders(self, fut):
        self.contribute([(self.thisIndex[0], sorted(self.got.items()))], Reducer.sum, fut)


async def migration():
    n, rounds = 24, 30
    w = shoal.Array(Walker, n, args=(n, rounds, 7))
    w.tick(0)
    for _ in range(3):
        w.count()
    await shoal.quiescence()
    fut = shoal.future()
    w.report(fut)
    sent, moves, bcasts, arrivals = await fut
    assert sent == n * rounds * 8
    assert bcasts == 3 * n
    assert arrivals == moves  # on_migrated ran once per move, with the state intact
    fut = shoal.future()
    w.senders(fut)
    # every sender's messages arrived in order (checked on arrival); the last number each
    # receiver saw from a sender equals the number of that sender's messages sent up to it
    per = await fut
    last = {}
    for _, got in per:
        for src, k in got:
            last[src] = max(last.get(src, 0), k)
    assert all(last[i] == rounds * 8 for i in range(n) if i in last)
    print("OK migration", int(sent), int(moves))


class Counter(shoal.Chare):
    def __init__(self):
        self.count = 0

    def hit(self, k):
        self.count += 1

    def total(self, fut):
        self.contribute(self.count, Reducer.sum, fut)

    def move(self):
        self.migrate((shoal.my_pe() + 1) % shoal.num_pes())


async def exact_counts():
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
    print("OK exact", sent)


# ---------------------------------------------------------------- instrumentation
class Stats(shoal.Chare):
    def get(self, fut):
        self.contribute([shoal.stats()], Reducer.sum, fut)


class Busy(shoal.Chare):
    def work(self, k, seconds):
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            pass
        if k:
            self.thisProxy[(self.thisIndex[0] + 1) % 4].work(k - 1, seconds)


async def stats():
    b = shoal.Array(Busy, 4)
    b[0].work(11, 0.002)  # 12 calls around the ring, 3 per element, 11 messages between them
    await shoal.quiescence()
    fut = shoal.future()
    shoal.Group(Stats).get(fut)
    per_pe = await fut
    calls = {}
    wall = {}
    comm = {}
    for st in per_pe:
        assert st["idle"] > 0
        for key, methods in st["elements"].items():
            if key[0] == b.cid:
                calls[key[1]] = methods["work"][0]
                wall[key[1]] = methods["work"][1]
        for (src, dst), (msgs, nbytes) in st["comm"].items():
            if dst[0] == b.cid:
                comm[(src, dst[1])] = (msgs, nbytes)
    assert calls == {(i,): 3 for i in range(4)}, calls
    assert all(0.006 <= w < 0.5 for w in wall.values()), wall
    ring = {k: v for k, v in comm.items() if k[0][0] == b.cid}
    assert sum(m for m, _ in ring.values()) == 11
    assert all(k[1] == ((k[0][1][0] + 1) % 4,) for k in ring)
    pes = shoal.num_pes()
    crossing = [v for k, v in ring.items() if (k[0][1][0] * pes // 4) != (k[1][0] * pes // 4)]
    assert all(nbytes > 0 for _, nbytes in crossing) and crossing
    print("OK stats")


# ---------------------------------------------------------------- shared-memory buffers
MB = 1 << 20


class Holder2(shoal.Chare):
    """Bounces arrays, keeps them on request, moves with what it keeps."""

    def __init__(self):
        self.kept = []

    def bounce(self, arr, hops, fut):
        arr += 1.0  # the receiver owns what it got: writable
        if hops == 1:
            fut.send(arr)
        else:
            self.thisProxy[1 - self.thisIndex[0]].bounce(arr, hops - 1, fut)

    def keep(self, k, a, b=None):
        assert a[0] == k and a[-1] == k, (k, a[0], a[-1])
        self.kept.append(a)
        if b is not None:
            assert (b == -k).all()
            self.kept.append(b)

    def total(self):
        return float(sum(a.sum() for a in self.kept))

    def drop(self):
        self.kept = []

    def move(self, pe):
        self.migrate(pe)

    def look(self, arr):
        assert arr.shape == (MB // 8,)


class ShmStats(shoal.Chare):
    def shared(self):
        st = shoal.stats()
        return st["bytes_shared"], st["bytes_sent"]


async def shared():
    """Run with a 4 MiB segment per PE (``rt_job.py shared 4194304``) on 2 PEs."""
    h = shoal.Array(Holder2, 2, map="round_robin")
    count = shoal.Group(ShmStats)
    before = await count.shared(ret=True)
    fut = shoal.future()
    h[0].bounce(np.zeros(MB // 8), 60, fut)  # 1 MiB, 60 hops, 4 MiB of segment per PE
    out = await fut
    assert out.shape == (MB // 8,) and (out == 60.0).all()
    after = await count.shared(ret=True)
    moved = [a[0] - b[0] for a, b in zip(after, before, strict=True)]
    assert moved == [30 * MB, 30 * MB], moved  # every hop (and the result) went by shm
    # kept arrays fill the receiver's view of the sender's segment: the rest goes by MPI
    for k in range(1, 9):
        h[1].keep(k, np.full(MB // 8, float(k)), -np.full(300_000 // 8, float(k)) if k == 5
                  else None)
    expected = sum(k * MB / 8 for k in range(1, 9)) - 5 * 300_000 / 8
    assert await h[1].total(ret=True) == expected
    full = await count.shared(ret=True)
    assert 2 * MB <= full[0][0] - after[0][0] < 8 * MB, (full, after)
    # moving home with arrays that live in the destination's own segment
    h[1].move(0)
    assert await h[1].total(ret=True) == expected
    h[1].drop()
    h[1].move(1)
    for _ in range(4):  # broadcasts are kept for replay: they must not hold segment blocks
        h.look(np.ones(MB // 8))
    await shoal.quiescence()
    again = await count.shared(ret=True)
    fut = shoal.future()
    h[0].bounce(np.zeros(MB // 8), 20, fut)
    assert (await fut == 20.0).all()
    last = await count.shared(ret=True)
    assert [a[0] - b[0] for a, b in zip(last, again, strict=True)] == [10 * MB, 10 * MB]
    print("OK shared", [s for s, _ in last])


async def many_blocks():
    """More than 64 blocks in flight at once (8 MiB segments, 64 KiB arrays kept), taken
    back after the receiver drops them. Run with ``rt_job.py blocks 8388608`` on 2 PEs."""
    h = shoal.Array(Holder2, 2, map="round_robin")
    count = shoal.Group(ShmStats)
    n, size = 120, 65536
    for batch in range(2):
        before = await count.shared(ret=True)
        for k in range(1, n + 1):
            h[1].keep(k, np.full(size // 8, float(k)))
        assert await h[1].total(ret=True) == size // 8 * n * (n + 1) / 2
        after = await count.shared(ret=True)
        assert after[0][0] - before[0][0] == n * size, (batch, after, before)
        h[1].drop()
        await shoal.quiescence()
    print("OK blocks")


class Taker(shoal.Chare):
    def __init__(self):
        self.got = []

    def take(self, k, *arrays):
        assert all((a == k + j).all() for j, a in enumerate(arrays)), k
        self.got.append((k, len(arrays)))

    def send_bad_then_good(self, fut):
        other = self.thisProxy[1]
        try:
            other.take(-1, np.full(2000, -5.0), lambda: 0)  # an array set aside, then a failure
        except (pickle.PicklingError, AttributeError):
            pass
        else:
            raise AssertionError("a lambda pickled")
        for k in range(4):  # the next messages carry their own arrays, in order
            other.take(10 * k, *[np.full(2000 + 9000 * (j % 2), 10.0 * k + j)
                                 for j in range(k + 1)])
        fut.send(None)

    def report(self):
        return self.got


async def wire():
    """Envelope tags around the shared-memory tag (lowered to 3 here): messages with 2, 3
    and 4 out-of-band arrays; a send that fails to pickle leaves nothing behind."""
    t = shoal.Array(Taker, 2, map="round_robin")
    fut = shoal.future()
    t[0].send_bad_then_good(fut)
    await fut
    await shoal.quiescence()
    assert await t[1].report(ret=True) == [(0, 1), (10, 2), (20, 3), (30, 4)]
    print("OK wire")


# ---------------------------------------------------------------- errors
class Faulty(shoal.Chare):
    def boom(self):
        raise ValueError("deliberate failure in an entry method")


async def error():
    f = shoal.Array(Faulty, 4)
    f[3].boom()
    await shoal.future()  # never resolves: the failure must end the job


# ---------------------------------------------------------------- library mode
def library():
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    before = world.allreduce(1)
    results = []

    async def main():
        arr = shoal.Array(Contrib2, (2, 3))
        fut = shoal.future()
        arr.run(fut)
        results.append(await fut)

    shoal.start(main, comm=world)
    again = world.allreduce(world.Get_rank())
    if world.Get_rank() == 0:
        assert results == [sum(i * 4 + j for i in range(2) for j in range(3))], results
        print("OK library", before, again)


SCENARIOS = {"order": order, "reductions": reductions, "groups": groups,
             "coroutines": coroutines, "amr": amr, "migration": migration,
             "exact": exact_counts, "stats": stats, "error": error, "shared": shared,
             "wire": wire, "blocks": many_blocks}

if __name__ == "__main__":
    name = sys.argv[1]
    options = {"shm_bytes": int(sys.argv[2])} if len(sys.argv) > 2 else {}
    if name == "wire":
        transport.SHARED = 3  # on every PE
    if name == "library":
        library()
    else:
        shoal.start(SCENARIOS[name], **options)
