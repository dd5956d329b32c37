"""Load balancing inside the runtime (run by test_lb.py):
``python lb.py atsync|periodic [--lb STRATEGY] [--lb-period SECONDS] [--shm BYTES]``.

``atsync``: an at_sync array whose first elements work 6x longer than the others, block
mapped so that PE 0 holds them; 6 iterations, each a message to a neighbour, a sum
reduction and at_sync(); an element is inserted in iteration 2 (its constructor does that
iteration's work) and one deletes itself in iteration 3. ``periodic``: no at_sync; a hot
set of elements keeps working while balancing steps move elements between entry methods.
Every check is an assert inside the job."""

import time

import numpy as np
from runner import main

import shoal
from shoal import Reducer

N, ITERS, HEAVY = 24, 6, 8
LIGHT_S = 0.001


def spin(seconds, clock=time.perf_counter):
    """Work for ``seconds`` of ``clock``: wall time, or with ``time.process_time`` this
    process's CPU time (a preempted PE then takes longer, but its CPU-time load stays)."""
    end = clock() + seconds
    while clock() < end:
        pass


class Worker(shoal.Chare):
    def __init__(self, futs, done, first=0):
        self.futs, self.done = futs, done
        self.it = first
        self.got = {}
        self.sent = 0
        self.pes = []
        if first:  # inserted during iteration `first`: do its work now
            self.iterate()

    def start(self):
        self.iterate()

    def iterate(self):
        i = self.thisIndex[0]
        if i == N - 1 and self.it == 3:  # leaves for good: no contribution from here on
            self.thisProxy.delete(self.thisIndex)
            return
        if i == 0 and self.it == 2:
            self.thisProxy.insert(100, args=(self.futs, self.done, 2))
        self.pes.append(shoal.my_pe())
        spin(LIGHT_S * (6 if i < HEAVY else 1))
        if i < N - 1:
            self.sent += 1
            self.thisProxy[(i + 1) % (N - 1)].take(i, self.sent)
        self.contribute(1, Reducer.sum, self.futs[self.it])
        self.at_sync()

    def take(self, src, k):
        last = self.got.get(src, 0)
        assert k == last + 1, f"{self.thisIndex}: message {k} from {src} after {last}"
        self.got[src] = k

    def resume_from_sync(self):
        self.it += 1
        if self.it < ITERS:
            self.iterate()
        else:
            self.contribute((self.thisIndex[0], self.sent, sum(self.got.values()),
                             tuple(self.pes)), Reducer.gather, self.done)


async def atsync():
    futs = [shoal.future() for _ in range(ITERS)]
    done = shoal.future()
    arr = shoal.Array(Worker, N, args=(futs, done), at_sync=True)
    arr.start()
    sums = [await f for f in futs]
    # one element joins in iteration 2, one leaves in iteration 3
    assert sums == [N, N, N + 1, N, N, N], sums
    rows = await done
    indices = sorted(r[0] for r in rows)
    assert indices == [*range(N - 1), 100], indices  # each element exists once
    assert sum(r[1] for r in rows) == sum(r[2] for r in rows)  # every message arrived once
    history = shoal.lb_history()
    assert len(history) == ITERS, history  # one step per iteration
    first = history[0]
    gossip = first["strategy"] == "distributed"
    # 6x heavier elements, all on PE 0 at first (1.625 on 2 PEs of equal capacity). The
    # capacities blur it: measured over the first period, about 0.1 s with distributed
    # (0.5 s or more with a strategy compiled by numba then), on a loaded machine (1.39
    # seen at load 8, 1.13 with orb at load 5). distributed's first period is short enough
    # that a loaded machine blurs it below 1.1 (1.02 seen once, in a fresh clone's suite),
    # and so can the capacities of any strategy's first period (orb: 1.08 in CI, with 1.21
    # measured after its step); a later step then sees the imbalance the first did not move
    assert max(h["before"] for h in history) > 1.1, history
    # GrapevineLB sends objects only to PEs under the average, and at most to 1.10 of it
    # after 10 phases: with 6 heavy elements of 24 on PE 0 of 4 its first step may end
    # above 1.3, or, on a loaded machine where the idle PEs measure low capacities, move
    # nothing (no PE has room for a heavy element under 1.10 of the average: seen once in
    # a full test run, 4 ranks on 2 cores); a later step then does
    if gossip:
        assert any(h["after_predicted"] < h["before"] for h in history), history
    else:
        assert first["after_predicted"] < first["before"], first
        assert first["after_predicted"] < 1.3, first
    assert sum(h["migrations"] for h in history) > 0
    moved = sum(1 for r in rows if len(set(r[3])) > 1)
    assert moved > 0  # some element ran on more than one PE
    await shoal.destroy(arr)  # (an at_sync array made after this one balances alone)
    return [round(h["before"], 2) for h in history], moved, _root_objects(history, rows)


def _root_objects(history, rows):
    """lb="distributed": the objects PE 0 saw at each step were its own (where each element
    ran the iteration before the step; the element deleted in iteration 3, whose row is
    missing, may have been there at steps 1-3), never the whole database. None for the
    central strategies."""
    if history[0]["strategy"] != "distributed":
        return None
    seen = []
    for k, h in enumerate(history, start=1):
        first = {100: 2}  # the element inserted in iteration 2 ran from then on
        mine = sum(1 for index, _, _, pes in rows
                   if k - 1 >= first.get(index, 0) and pes[k - 1 - first.get(index, 0)] == 0)
        deleted = 1 if k <= 3 else 0
        assert mine <= h["root_objects"] <= mine + deleted, (k, mine, h)
        assert h["root_objects"] < h["objects"], h
        # it stops early only once every PE is under the phase's threshold
        assert h["phases"] == 10 or h["after_predicted"] <= h["threshold"] + 1e-9, h
        seen.append((h["root_objects"], h["objects"]))
    return seen


class Hot(shoal.Chare):
    def __init__(self):
        self.got = 0
        self.pes = set()

    def work(self, k, rounds, fut):
        self.got += 1
        self.pes.add(shoal.my_pe())
        spin(LIGHT_S * (4 if self.thisIndex[0] < HEAVY else 1))
        if k + 1 < rounds:
            self.thisProxy[self.thisIndex].work(k + 1, rounds, fut)
        else:
            self.contribute((self.got, len(self.pes)), Reducer.gather, fut)


async def periodic():
    arr = shoal.Array(Hot, N)
    fut = shoal.future()
    rounds = 40
    arr.work(0, rounds, fut)
    rows = await fut
    assert [r[0] for r in rows] == [rounds] * N, rows  # exactly once, none lost
    history = shoal.lb_history()
    assert history, "no balancing step ran"
    assert sum(h["migrations"] for h in history) > 0, history
    strategies = {h["strategy"] for h in history}
    return len(history), sum(1 for r in rows if r[1] > 1), sorted(strategies)


class Listener(shoal.Chare):
    """Receives broadcasts and contributes to a reduction per round while periodic steps
    move it; heavy ones keep the balancer busy."""

    def __init__(self):
        self.rounds = []
        self.pes = set()

    def round(self, k, fut):
        self.rounds.append(k)
        self.pes.add(shoal.my_pe())
        spin(LIGHT_S * (3 if self.thisIndex[0] < HEAVY else 1))
        self.contribute(k, Reducer.sum, fut)

    def report(self):
        return self.rounds, len(self.pes)


async def periodic_collectives():
    """Periodic steps while broadcasts and reductions are in flight: 40 rounds, each a
    broadcast that every element runs once, in order, and a sum over every element; the
    next round is broadcast before the previous one's reduction completes."""
    arr = shoal.Array(Listener, N)
    rounds = 40
    futs = [shoal.future() for _ in range(rounds)]
    for k in range(rounds):
        arr.round(k, futs[k])
        if k >= 2:
            assert await futs[k - 2] == N * (k - 2), k
    for k in range(rounds - 2, rounds):
        assert await futs[k] == N * k, k
    reports = await arr.report(ret=True)
    assert all(r[0] == list(range(rounds)) for r in reports), reports  # once each, in order
    history = shoal.lb_history()
    assert history and sum(h["migrations"] for h in history) > 0, history
    return len(history), sum(1 for r in reports if r[1] > 1)


RING_N, RING_BYTES, RING_ITERS = 16, 64 * 1024, 4


class Ring(shoal.Chare):
    """lb="topo": a ring whose neighbours start on different PEs (round-robin map); each
    iteration every element sends RING_BYTES to both neighbours, then syncs."""

    def __init__(self, done):
        self.done, self.it, self.got, self.synced, self.pes = done, 0, 0, 0, set()

    def iterate(self):
        i, out = self.thisIndex[0], np.full(RING_BYTES // 8, float(self.thisIndex[0]))
        self.pes.add(shoal.my_pe())
        spin(0.002, time.process_time)  # (equal loads in CPU time: --cpu-stats)
        for j in ((i - 1) % RING_N, (i + 1) % RING_N):
            self.thisProxy[j].halo(self.it, out)
        self._sync_when_both_came()

    def halo(self, it, data):
        self.got += 1  # (a neighbour resumed first may send the next halos early)
        if self.it == it:
            self._sync_when_both_came()

    def _sync_when_both_came(self):
        if self.got >= 2 * (self.it + 1) and self.synced < self.it + 1:
            self.synced = self.it + 1
            self.at_sync()

    def resume_from_sync(self):
        self.it += 1
        if self.it < RING_ITERS:
            self.iterate()
        else:
            self.contribute((self.thisIndex[0], self.got, len(self.pes)), Reducer.gather,
                            self.done)


async def topo_ring():
    """Neighbours spread over the PEs: topo brings each run of neighbours onto one PE and
    neighbouring runs onto neighbouring nodes, cutting the hop-bytes."""
    done = shoal.future()
    arr = shoal.Array(Ring, RING_N, args=(done,), map="round_robin", at_sync=True)
    arr.iterate()
    rows = await done
    assert sorted(r[0] for r in rows) == list(range(RING_N)), rows  # each element once
    assert all(r[1] == 2 * RING_ITERS for r in rows), rows  # every halo arrived once
    history = shoal.lb_history()
    assert history and all(h["strategy"] == "topo" for h in history), history
    return [(h["hop_bytes_before"], h["hop_bytes_after"], h["migrations"]) for h in history]


AUTO_N, AUTO_WORK_S, AUTO_ONSET = 24, 0.0015, 20  # 24: divides among 2, 3, 4 PEs


class Phase(shoal.Chare):
    """lb="auto": every element works AUTO_WORK_S per iteration; from iteration ``onset``
    the first quarter (all on PE 0, block map) works 4x longer."""

    def __init__(self, iters, onset, done, work=AUTO_WORK_S):
        self.iters, self.onset, self.done, self.work = iters, onset, done, work
        self.it = 0
        self.pes = []

    def iterate(self):
        heavy = self.it >= self.onset and self.thisIndex[0] < AUTO_N // 4
        self.pes.append(shoal.my_pe())
        spin(self.work * (4 if heavy else 1), time.thread_time)  # the clock cpu_stats reads
        self.at_sync()

    def resume_from_sync(self):
        self.it += 1
        if self.it < self.iters:
            self.iterate()
        else:
            self.contribute((self.thisIndex[0], tuple(self.pes)), Reducer.gather, self.done)


async def _phases(iters, onset, work=AUTO_WORK_S):
    done = shoal.future()
    arr = shoal.Array(Phase, AUTO_N, args=(iters, onset, done, work), at_sync=True)
    arr.iterate()
    rows = await done
    assert sorted(r[0] for r in rows) == list(range(AUTO_N)), rows  # each element once
    assert all(len(r[1]) == iters for r in rows), rows  # every iteration ran once
    return shoal.lb_history()


async def auto_balanced():
    """200 balanced iterations: the MetaBalancer never asks for a step."""
    history = await _phases(200, 10**9)
    assert history == [], history
    return 0


async def none_balanced():
    """lb="none": 200 AtSync points of elements that do no work (what a step would cost or
    gain does not matter: none is ever taken), each resumed at once."""
    history = await _phases(200, 10**9, work=0.0)
    assert history == [], history
    return 0


async def auto_imbalance():
    """An imbalance appears at iteration AUTO_ONSET: a step follows within 10 iterations
    and brings max/avg down."""
    history = await _phases(AUTO_ONSET + 30, AUTO_ONSET)
    assert history, "the MetaBalancer never balanced"
    first = history[0]
    fired = first["auto"]["iterations"]  # iterations observed up to the step
    assert AUTO_ONSET < fired <= AUTO_ONSET + 10, first
    assert first["migrations"] > 0 and first["after_predicted"] < 1.15, first
    return fired, len(history)


# every_k: elements that sync every EVERY_K iterations, an iteration being two calls (a
# message to itself, then the work), the last one calling at_sync() after its work, as
# LeanMD's computes do (the work of a period is not in any one call)
EVERY_K, EVERY_N, EVERY_S = 5, 8, 0.004


class Periodic(shoal.Chare):
    def __init__(self, done):
        self.done, self.it, self.worked = done, 0, 0.0

    def iterate(self):
        self.thisProxy[self.thisIndex].work()

    def work(self):
        # this thread's CPU time, which the runtime measures with cpu_stats (the process's
        # would count its other threads too: a full test run once saw a light element's
        # period at 0.36 of the process time it worked)
        t0 = time.thread_time()
        spin(EVERY_S * (4 if self.thisIndex[0] < EVERY_N // 2 else 1), time.thread_time)
        self.worked += time.thread_time() - t0
        self.it += 1
        if self.it % EVERY_K:
            self.iterate()
        else:
            self.at_sync()

    def resume_from_sync(self):
        if self.it < 2 * EVERY_K:
            self.iterate()
        else:
            self.contribute((self.thisIndex[0], self.worked), Reducer.gather, self.done)


async def every_k():
    """Sync every EVERY_K iterations: each step's database holds each element's work of
    the whole period, not of its last call (the loads of the heavy half are 4x)."""
    done = shoal.future()
    shoal.Array(Periodic, EVERY_N, args=(done,), at_sync=True).iterate()
    worked = dict(await done)
    return sorted(worked.items())


class Pinned(shoal.Chare):
    """An at_sync element; the heavy even ones are not migratable (charm4py's
    tests/migration/test_nonmigratables.py, with every strategy)."""

    def __init__(self, done):
        self.done = done
        self.it = 0
        self.pes = []
        i = self.thisIndex[0]
        if i < HEAVY and i % 2 == 0:
            self.setMigratable(False)  # charm4py's spelling of self.migratable = False
        self.refused = None

    def iterate(self):
        i = self.thisIndex[0]
        self.pes.append(shoal.my_pe())
        if not self.migratable and self.it == 0:
            try:
                self.migrate((shoal.my_pe() + 1) % shoal.num_pes())
            except shoal.UsageError as exc:
                self.refused = str(exc)
        spin(LIGHT_S * (6 if i < HEAVY else 1), time.process_time)
        self.at_sync()

    def resume_from_sync(self):
        self.it += 1
        if self.it < 4:
            self.iterate()
        else:
            self.contribute((self.thisIndex[0], self.migratable, tuple(self.pes),
                             self.refused), Reducer.gather, self.done)


async def pinned():
    """Non-migratable elements (self.setMigratable(False)) stay on their PE through every
    balancing step while the balancer moves the others; their load counts on their PE
    (fixed load: the heavy pinned ones on PE 0 push the movable load off it); migrate()
    on one is refused with a UsageError."""
    done = shoal.future()
    before = len(shoal.lb_history())
    shoal.Array(Pinned, N, args=(done,), at_sync=True).iterate()
    rows = await done
    steps = shoal.lb_history()[before:]
    assert len(steps) == 4, steps
    fixed = [r for r in rows if r[0] < HEAVY and r[0] % 2 == 0]
    assert len(fixed) == HEAVY // 2
    for i, migratable, pes, refused in rows:
        if i < HEAVY and i % 2 == 0:
            assert not migratable and len(set(pes)) == 1 and pes[0] == 0, (i, pes)
            assert refused is not None and "not migratable" in refused, refused
        else:
            assert migratable and refused is None
    moved = [i for i, m, pes, _ in rows if len(set(pes)) > 1]
    assert moved, rows  # the balancer did move the others
    # PE 0 keeps its pinned heavy load: the movable elements left it for the other PEs
    # (in units of the light load; where each ran its first and its last iteration)
    def movable_on_0(k):
        return sum(6 if i < HEAVY else 1 for i, m, pes, _ in rows if m and pes[k] == 0)

    assert movable_on_0(-1) < movable_on_0(0), rows
    return len(moved)


if __name__ == "__main__":
    main({"atsync": atsync, "periodic": periodic, "periodic_collectives": periodic_collectives,
          "auto_balanced": auto_balanced, "auto_imbalance": auto_imbalance,
          "none_balanced": none_balanced,
          "topo_ring": topo_ring, "every_k": every_k, "pinned": pinned})
