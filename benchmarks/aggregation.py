"""Aggregated items (shoal.Aggregator, Acun14 III-F: TRAM) against direct entry-method calls
and raw mpi4py, issue 15 section 3.

Three figures, each the median of ``--runs`` jobs x ``--repeat`` measurements (min-max after):
- ``p2p``, 2 PEs: 16-byte items PE 0 -> PE 1, items/s: aggregated with a 16-byte dtype, and
  with the same items pickled in batches; direct entry-method calls (one message per item);
  raw mpi4py in the same processes just before the runtime starts: pickled ``isend``/``recv``
  of the item (what an mpi4py program sends) and ``Isend``/``Recv`` of a 16-byte buffer.
  Targets: aggregated >= 5x direct and >= 2x raw mpi4py.
- ``a2a``, 4 PEs: all-to-all of small items; each PE (a group member) sends ``A2A`` items to
  each other PE, interleaved; total items/s until every item has run.
- ``kneighbor``, 4 PEs: 64 elements (round-robin map), each iteration every element sends
  ``KN_ITEMS`` items to each of its 4 neighbours (index +-1, +-2) and flushes; an element starts
  its next iteration once it has every item of this one; items/s over ``KN_ITERS`` iterations.
The memory of the aggregated runs is printed as each PE's buffers: the bound
((max_items + buffer_items) x item bytes) and the most bytes held at once.

Usage: python benchmarks/aggregation.py [--runs 3] [--repeat 3]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import shoal
from shoal import Reducer

DT = np.dtype([("k", "<i8"), ("x", "<f8")])  # 16 bytes
P2P = 200_000  # items per aggregated measurement
P2P_DIRECT = 50_000  # messages per direct or raw measurement
A2A = 20_000  # items from each PE to each other PE
KN_ITEMS, KN_ITERS, KN_ELEMS = 32, 20, 64
WINDOW = 64  # raw mpi4py: sends in flight at once


# ---------------------------------------------------------------- p2p, 2 PEs
class Sink(shoal.Chare):
    def expect(self, n, fut):
        self.n, self.count, self.fut = n, 0, fut

    def take(self, item):
        self.count += 1
        if self.count == self.n:
            self.fut.send(time.perf_counter())

    def direct(self, n):
        other = self.thisProxy[1]
        for k in range(n):
            other.take((k, 0.5))

    def aggregated(self, agg, n):
        send = agg.send
        for k in range(n):
            send(1, (k, 0.5))
        agg.flush()

    def memory(self, agg, fut):
        self.contribute([agg.stats()], Reducer.gather, fut)


async def timed(arr, n, start):
    """Items/s of ``n`` items to element 1, sent by ``start()``."""
    fut = shoal.future()
    await arr[1].expect(n, fut, ret=True)
    t0 = time.perf_counter()
    start()
    return n / (await fut - t0)


def raw_mpi4py(repeat):
    """Small-message rates of plain mpi4py between ranks 0 and 1 before shoal starts, in
    windows of ``WINDOW`` non-blocking sends (and, for buffers, receives) as OSU's message
    rate test does."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    out = {"mpi4py_pickled": [], "mpi4py_buffer": []}
    item = (1, 0.5)
    bufs = [np.zeros(16, np.uint8) for _ in range(WINDOW)]  # the bytes of one item each
    rounds = P2P_DIRECT // WINDOW
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(rounds):
            if rank == 0:
                MPI.Request.waitall([comm.isend(item, 1) for _ in range(WINDOW)])
            else:
                for _ in range(WINDOW):
                    comm.recv(source=0)
        comm.Barrier()
        out["mpi4py_pickled"].append(rounds * WINDOW / (time.perf_counter() - t0))
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(rounds):
            if rank == 0:
                MPI.Request.Waitall([comm.Isend(b, 1) for b in bufs])
            else:
                MPI.Request.Waitall([comm.Irecv(b, 0) for b in bufs])
        comm.Barrier()
        out["mpi4py_buffer"].append(rounds * WINDOW / (time.perf_counter() - t0))
    return out


def p2p_job(repeat):
    out = raw_mpi4py(repeat)

    async def main():
        arr = shoal.Array(Sink, 2)
        agg = shoal.Aggregator(arr, "take", item_dtype=DT)
        pickled = shoal.Aggregator(arr, "take")
        for key in ("direct", "aggregated", "aggregated_pickled"):
            out[key] = []
        for _ in range(repeat):
            out["direct"].append(await timed(arr, P2P_DIRECT,
                                             lambda: arr[0].direct(P2P_DIRECT)))
            out["aggregated"].append(await timed(arr, P2P,
                                                 lambda: arr[0].aggregated(agg, P2P)))
            out["aggregated_pickled"].append(await timed(
                arr, P2P, lambda: arr[0].aggregated(pickled, P2P)))
        fut = shoal.future()
        arr.memory(agg, fut)
        out["memory"] = [s for part in await fut for s in part]
        print(json.dumps(out))

    shoal.start(main)


# ---------------------------------------------------------------- all-to-all, 4 PEs
class Peer(shoal.Chare):
    """One per PE: sends ``n`` items to each other PE, counts what it receives."""

    def expect(self, total, ready, done):
        self.total, self.count, self.fut = total, 0, done
        self.contribute(0, Reducer.sum, ready)

    def take(self, item):
        self.count += 1
        if self.count == self.total:
            self.contribute(time.perf_counter(), Reducer.max, self.fut)

    def go(self, agg, n):
        p, me = shoal.num_pes(), self.thisIndex[0]
        others = [(me + d) % p for d in range(1, p)]
        if agg is None:
            proxy = self.thisProxy
            for k in range(n):
                for q in others:
                    proxy[q].take((k, 0.5))
        else:
            send = agg.send
            for k in range(n):
                for q in others:
                    send(q, (k, 0.5))
            agg.flush()

    def memory(self, agg, fut):
        self.contribute([agg.stats()], Reducer.gather, fut)


def a2a_job(repeat):
    async def main():
        p = shoal.num_pes()
        peers = shoal.Group(Peer)
        agg = shoal.Aggregator(peers, "take", item_dtype=DT)
        out = {"direct": [], "aggregated": []}
        for _ in range(repeat):
            for key, a, n in (("direct", None, A2A // 4), ("aggregated", agg, A2A)):
                ready, done = shoal.future(), shoal.future()
                peers.expect(n * (p - 1), ready, done)
                await ready
                t0 = time.perf_counter()
                peers.go(a, n)
                out[key].append(n * p * (p - 1) / (await done - t0))
        fut = shoal.future()
        peers.memory(agg, fut)
        out["memory"] = [s for part in await fut for s in part]
        print(json.dumps(out))

    shoal.start(main)


# ---------------------------------------------------------------- kNeighbor, 4 PEs
class Neighbour(shoal.Chare):
    """kNeighbor: each iteration, ``KN_ITEMS`` items to each of 4 neighbours, then wait for
    theirs."""

    def __init__(self):
        self.got = {}  # iteration -> items received (a neighbour may be one ahead)
        self.it = self.iters = 0

    def run(self, agg, iters, done):
        self.agg, self.iters, self.done, self.it = agg, iters, done, 0
        self._send()
        self._advance()  # the neighbours' items may all have come before this call

    def _send(self):
        i, n = self.thisIndex[0], KN_ELEMS
        agg, it = self.agg, self.it
        for d in (-2, -1, 1, 2):
            j = (i + d) % n
            if agg is None:
                target = self.thisProxy[j]
                for k in range(KN_ITEMS):
                    target.take((it, float(k)))
            else:
                for k in range(KN_ITEMS):
                    agg.send(j, (it, float(k)))
        if agg is not None:
            agg.flush()

    def take(self, item):
        it = item[0]
        self.got[it] = self.got.get(it, 0) + 1
        self._advance()

    def _advance(self):
        while self.it < self.iters and self.got.get(self.it) == 4 * KN_ITEMS:
            del self.got[self.it]
            self.it += 1
            if self.it == self.iters:
                self.contribute(time.perf_counter(), Reducer.max, self.done)
                return
            self._send()


def kneighbor_job(repeat):
    async def main():
        arr = shoal.Array(Neighbour, KN_ELEMS, map="round_robin")
        agg = shoal.Aggregator(arr, "take", item_dtype=DT)
        out = {"direct": [], "aggregated": []}
        items = KN_ELEMS * 4 * KN_ITEMS * KN_ITERS
        for _ in range(repeat):
            for key, a in (("direct", None), ("aggregated", agg)):
                await shoal.quiescence()
                done = shoal.future()
                t0 = time.perf_counter()
                arr.run(a, KN_ITERS, done)
                out[key].append(items / (await done - t0))
        print(json.dumps(out))

    shoal.start(main)


JOBS = {"p2p": (2, p2p_job), "a2a": (4, a2a_job), "kneighbor": (4, kneighbor_job)}


def launch(job, repeat):
    from shoal.launch import mpiexec

    ranks, _ = JOBS[job]
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, __file__, "--job", job,
           "--repeat", str(repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{job} failed:\n{out.stderr[-2000:]}")
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("{")))


def spread(values, scale=1e-3):
    return (f"{statistics.median(values) * scale:9.1f}  "
            f"({min(values) * scale:.1f}-{max(values) * scale:.1f})")


def memory(stats):
    bound = max(s["bound_bytes"] for s in stats)
    peak = max(s["peak_items"] * s["item_bytes"] for s in stats)
    return (f"buffers per PE: {stats[0]['buffers']} (mesh {tuple(stats[0]['mesh'])}), "
            f"bound {bound / 1024:.0f} KiB, most held {peak / 1024:.1f} KiB")


def report(job, res):
    med = {k: statistics.median(v) for k, v in res.items() if k != "memory"}
    if job == "p2p":
        raw = max(med["mpi4py_pickled"], med["mpi4py_buffer"])
        print("16-byte items PE 0 -> PE 1, 2 PEs (k items/s, median (min-max))")
        for key in ("aggregated", "aggregated_pickled", "direct", "mpi4py_pickled",
                    "mpi4py_buffer"):
            print(f"  {key:22}{spread(res[key])}")
        print(f"  aggregated / direct        {med['aggregated'] / med['direct']:6.1f}x   "
              "target >= 5x")
        print(f"  aggregated / raw mpi4py    {med['aggregated'] / raw:6.1f}x   target >= 2x "
              "(against the faster of pickled and buffer sends)")
        print(f"  {memory(res['memory'])}")
        return
    title = {"a2a": f"all-to-all, 4 PEs, {A2A} items from each PE to each other PE",
             "kneighbor": f"kNeighbor, 4 PEs, {KN_ELEMS} elements x 4 neighbours x "
                          f"{KN_ITEMS} items x {KN_ITERS} iterations"}[job]
    print(f"{title} (k items/s, median (min-max))")
    for key in ("aggregated", "direct"):
        print(f"  {key:22}{spread(res[key])}")
    print(f"  aggregated / direct        {med['aggregated'] / med['direct']:6.1f}x")
    if "memory" in res:
        print(f"  {memory(res['memory'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="measurements per job")
    ap.add_argument("--runs", type=int, default=3, help="jobs per benchmark")
    ap.add_argument("--only", choices=sorted(JOBS), action="append",
                    help="run only these benchmarks (repeatable)")
    ap.add_argument("--job", choices=sorted(JOBS))
    args = ap.parse_args()
    if args.job:
        JOBS[args.job][1](args.repeat)
        return
    for job in args.only or list(JOBS):
        res = {}
        for run in range(args.runs):
            print(f"{job}: job {run + 1} of {args.runs}", file=sys.stderr, flush=True)
            for key, values in launch(job, args.repeat).items():
                res.setdefault(key, []).extend(values)
        report(job, res)
    print("(a 2-core machine shared with other work: figures are noisy; ratios are from the "
          "same jobs)")


if __name__ == "__main__":
    main()
