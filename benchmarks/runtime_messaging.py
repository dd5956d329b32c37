"""Messaging speed of the runtime against raw mpi4py and charm4py, 2 PEs, one run.

Three figures (issue: shoal runtime core), each the median of ``--repeat`` measurements:
- one-way latency of an 8-byte entry-method call between PEs (ping-pong / 2);
- rate of 100,000 small messages PE 0 -> PE 1 (sent in one loop, counted at the receiver);
- one-way time of a 1 MiB numpy array between PEs (ping-pong / 2).
For shoal the latency is also measured with instrumentation off, in the same job, which
gives its cost. ``shoal-mpi`` is shoal with its shared-memory segments off (``shm_bytes=0``):
every large buffer goes by MPI, as it does between nodes. ``shoal-pure`` is shoal under its
pure-Python core (``SHOAL_PURE=1``, docs/compiled.md) where ``shoal`` runs the compiled one:
the two cores' A/B, interleaved in one run.

Each figure is the median of every measurement of every run; below the table, each
implementation's spread over runs (the least and the greatest of the runs' own medians) and a
flag where they differ by more than ``BIMODAL`` times, so that a figure that depends on the run
(a shared core, issue 17) cannot hide behind a median; the load averages before and after.

Usage: python benchmarks/runtime_messaging.py [--runs 3] [--repeat 3]
(charm4py comes from ``pip install 'shoal[peers]'``; without it its column is left out.)
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import shoal

PINGS = 2000
BURST = 100_000
BIG_PINGS = 200
MIB = np.ones(1 << 17)  # 1 MiB of float64
PEER = Path(__file__).parent / "peers" / "messaging_charm4py.py"
BIMODAL = 1.5  # runs whose medians differ by more than this factor are flagged


# ---------------------------------------------------------------- shoal
class Pong(shoal.Chare):
    def start(self, n, payload, fut):
        self.n, self.count, self.fut = n, 0, fut
        self.t0 = time.perf_counter()
        self.thisProxy[1].ping(payload)

    def ping(self, payload):
        self.thisProxy[0].pong(payload)

    def pong(self, payload):
        self.count += 1
        if self.count == self.n:
            self.fut.send((time.perf_counter() - self.t0) / (2 * self.n))
        else:
            self.thisProxy[1].ping(payload)

    def burst(self, n, fut):
        other = self.thisProxy[1]
        other.expect(n, fut)
        for k in range(n):
            other.take(k)

    def expect(self, n, fut):
        self.n, self.count, self.fut = n, 0, fut

    def take(self, k):
        self.count += 1
        if self.count == self.n:
            self.fut.send(time.perf_counter())


class Switch(shoal.Chare):
    """One per PE: turns the runtime's instrumentation on or off there."""

    def set(self, on, fut):
        shoal.runtime.context.current().instrument = on
        self.contribute(None, _first, fut)


def _first(a, b):
    return a


def shoal_job(repeat, **options):
    async def main():
        arr = shoal.Array(Pong, 2)
        switch = shoal.Group(Switch)
        out = {"latency": [], "rate": [], "big": [], "latency_nostats": []}
        for _ in range(repeat):
            for on, key in ((False, "latency_nostats"), (True, "latency")):
                fut = shoal.future()
                switch.set(on, fut)
                await fut
                fut = shoal.future()
                arr[0].start(PINGS, b"12345678", fut)
                out[key].append(await fut)
            fut = shoal.future()
            t0 = time.perf_counter()
            arr[0].burst(BURST, fut)
            out["rate"].append(BURST / (await fut - t0))
            fut = shoal.future()
            arr[0].start(BIG_PINGS, MIB, fut)
            out["big"].append(await fut)
        print(json.dumps(out))

    shoal.start(main, **options)


# ---------------------------------------------------------------- raw mpi4py
def mpi_pingpong(comm, data, buf, n):
    """One-way seconds of ``data`` between ranks 0 and 1 by Send/Recv into ``buf``."""
    rank = comm.Get_rank()
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        if rank == 0:
            comm.Send(data, 1)
            comm.Recv(buf, 1)
        else:
            comm.Recv(buf, 0)
            comm.Send(buf, 0)
    return (time.perf_counter() - t0) / (2 * n)


def mpi4py_job(repeat):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    out = {"latency": [], "rate": [], "big": []}
    buf = np.empty_like(MIB)
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(PINGS):
            if rank == 0:
                comm.send(b"12345678", 1)
                comm.recv(source=1)
            else:
                comm.send(comm.recv(source=0), 0)
        out["latency"].append((time.perf_counter() - t0) / (2 * PINGS))
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            reqs = [comm.isend(k, 1) for k in range(BURST)]
            MPI.Request.waitall(reqs)
            comm.recv(source=1)
        else:
            for _ in range(BURST):
                comm.recv(source=0)
            comm.send(None, 0)
        out["rate"].append(BURST / (time.perf_counter() - t0))
        out["big"].append(mpi_pingpong(comm, MIB, buf, BIG_PINGS))
    if rank == 0:
        print(json.dumps(out))


JOBS = {"shoal": shoal_job, "shoal-mpi": lambda repeat: shoal_job(repeat, shm_bytes=0),
        "shoal-pure": shoal_job, "mpi4py": mpi4py_job}


def launch(impl, repeat):
    """One job of ``impl`` on 2 PEs; its JSON line of measurements."""
    from shoal.launch import mpiexec

    if impl == "charm4py":
        cmd = [sys.executable, "-m", "charmrun.start", "+p2", str(PEER), str(repeat)]
    else:
        cmd = [*mpiexec(), "-n", "2", sys.executable, __file__, "--job", impl,
               "--repeat", str(repeat)]
    env = {**os.environ, "SHOAL_PURE": "1" if impl == "shoal-pure" else "0"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{impl} failed:\n{out.stderr[-2000:]}")
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("{")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="measurements per job")
    ap.add_argument("--runs", type=int, default=3, help="jobs per implementation")
    ap.add_argument("--job", choices=sorted(JOBS))
    args = ap.parse_args()
    if args.job:
        JOBS[args.job](args.repeat)
        return
    from shoal._compiled import core

    impls = ["shoal", "mpi4py", "shoal-mpi"]
    if core() == "compiled":
        impls.insert(1, "shoal-pure")
    if importlib.util.find_spec("charm4py") is not None:
        impls.append("charm4py")
    load = os.getloadavg()
    res = {impl: {} for impl in impls}  # impl -> key -> one list of measurements per run
    for _ in range(args.runs):  # jobs interleaved: the machine's slow spells hit all alike
        for impl in impls:
            for key, values in launch(impl, args.repeat).items():
                res[impl].setdefault(key, []).append(values)
    med = {impl: {k: statistics.median(v for run in runs for v in run)
                  for k, runs in r.items()} for impl, r in res.items()}
    s = med["shoal"]
    print(f"2 PEs, medians of {args.runs} jobs x {args.repeat} measurements each; shoal "
          f"runs its {core()} core")
    print(f"{'':38}" + "".join(f"{i:>12}" for i in impls) + "   ratios")
    peers = [i for i in impls if not i.startswith("shoal")]
    rows = [("8-byte call one-way latency (us)", "latency", 1e6, "<= 2x mpi4py"),
            ("small messages PE0 -> PE1 (k msg/s)", "rate", 1e-3, ">= 0.9x mpi4py"),
            ("1 MiB array one-way (us)", "big", 1e6, "<= 1.1x mpi4py")]
    for label, key, scale, target in rows:
        cells = "".join(f"{med[i][key] * scale:12.1f}" for i in impls)
        ratios = ", ".join(f"{a}/{b} {med[a][key] / med[b][key]:.2f}"
                           for a in ("shoal", "shoal-pure", "shoal-mpi") if a in impls
                           for b in peers)
        print(f"{label:38}{cells}   {ratios}   target {target}")
    print("(shoal-mpi: shoal with large buffers by MPI instead of shared memory)")
    over = s["latency"] / s["latency_nostats"] - 1
    print(f"instrumentation cost on the ping-pong: {100 * over:+.1f}% "
          f"({s['latency_nostats'] * 1e6:.1f} us without), target <= 5%")
    print_spread(res, [(label, key, scale) for label, key, scale, _ in rows], load)


def print_spread(res, rows, load):
    """Each implementation's least and greatest run median per row of ``rows`` (label, key,
    scale), flagged where they differ by more than ``BIMODAL`` times, and the load averages
    of the machine before (``load``) and after the runs."""
    impls = list(res)
    print(f"\nspread over runs: least-greatest of the runs' medians (* = more than "
          f"{BIMODAL}x apart)")
    flagged = []
    for label, key, scale in rows:
        cells = []
        for impl in impls:
            meds = [statistics.median(run) for run in res[impl][key]]
            lo, hi = min(meds) * scale, max(meds) * scale
            odd = max(meds) > BIMODAL * min(meds)
            if odd:
                flagged.append(f"{impl} {label}")
            cells.append(f"{lo:.3g}-{hi:.3g}{'*' if odd else ' '}")
        print(f"{label:38}" + "".join(f"{c:>12}" for c in cells))
    after = os.getloadavg()
    print(f"load average {load[0]:.2f} before, {after[0]:.2f} after, on "
          f"{os.cpu_count()} cores")
    if flagged:
        print(f"BIMODAL: {'; '.join(flagged)}: the runs disagree, so the medians above are "
              "not one figure; check what else ran (load average) and run again")


if __name__ == "__main__":
    main()
