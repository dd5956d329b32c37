"""Memory of the runtime (issue 17, section 6): peak resident memory per PE in six cases.

Each case runs as its own job (a fresh process per PE, so each peak is its own); every PE
reports its resident memory once the runtime has started (``base``) and its peak
(``VmHWM``) at the end. Printed per case: each PE's base and peak in MiB and the case's
figure:

- ``pool_large``: PE 0 sends PE 1 24 arrays of about 64 MiB, each of another size, one at a
  time; PE 1 drops each. Figure: PE 1's growth (peak - base).
- ``pool_small``: 20,000 arrays of 8-64 KiB (random sizes), 100 in flight. Figure: PE 1's
  growth.
- ``queued``: main on PE 0 sends 10^6 small messages round-robin to 64 elements on 4 PEs
  before it returns to the scheduler. Figure: the growth summed over PEs per message.
- ``flood``: an element on PE 0 sends 10^6 small messages to one on PE 1, which spends
  about 10 us on each. Figure: the growth of both PEs per message.
- ``mutual``: two elements, on PE 0 and PE 1, each send the other 3x10^5 small messages in
  one entry method (two PEs that flood each other). Figure: the growth of both.
- ``roundtrip``: a float64 array of ``--size`` goes PE 0 -> PE 1 -> PE 0 (returned by the
  entry method), and main drops the copy it got back. Figure: each PE's peak over the
  array's size (2x is the floor on PE 0: the original and the copy), and what each PE
  still holds afterwards (``--size 2.5GiB`` for the issue's case).
- ``migrate``: ``--elements`` elements on PE 0 each call ``self.migrate(1)`` in one
  broadcast (single migrate() calls in one turn). Figure: seconds until PE 1 holds them all.
- ``temporary``: main creates ``--collections`` arrays of 4 elements one after another,
  calls one element of each and destroys it (``shoal.destroy``); ``temporary_kept``: the
  same without destroying. Figure: PE 0's growth.

Usage: python benchmarks/runtime_memory.py [--cases pool_large,...] [--size 512MiB]
       [--elements 10000] [--collections 100000] [--runs 1]
(a case on its own: mpiexec -n P python benchmarks/runtime_memory.py --job CASE)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import shoal
from shoal.runtime.context import current

MIB = 1 << 20
CASES = {"pool_large": 2, "pool_small": 2, "queued": 4, "flood": 2, "mutual": 2,
         "roundtrip": 2, "migrate": 2, "temporary": 2, "temporary_kept": 2}  # case -> PEs


def rss() -> tuple[float, float]:
    """(resident, peak resident) memory of this process in MiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[:5]] = int(line.split()[1]) / 1024
    return out["VmRSS"], out["VmHWM"]


class Probe(shoal.Chare):
    """One per PE: its memory figures."""

    def base(self):
        self.start = rss()[0]

    def report(self):
        now, peak = rss()
        return (self.start, peak, now)


class Sink(shoal.Chare):
    def __init__(self):
        self.count = 0
        self.total = 0

    def take(self, arr):
        self.total += int(arr[-1])  # touch it, drop it
        return arr.nbytes

    def small(self, k):
        self.count += 1

    def slow(self, k):
        self.count += 1
        t = time.perf_counter() + 1e-5
        while time.perf_counter() < t:
            pass

    def done(self):
        return self.count

    def echo(self, arr):
        return arr

    def flood(self, other, n, method="small"):
        send = getattr(self.thisProxy[other], method)
        for k in range(n):
            send(k)

    def move(self, pe):
        self.migrate(pe)


class Census(shoal.Chare):
    def count(self, cid):
        return len(current().colls[cid].local)


def on_pe0(index, dims, npes):
    return 0


async def pool_large(args):
    sink = shoal.Array(Sink, 2)
    rng = np.random.default_rng(1)
    for k in range(24):
        n = 64 * MIB + int(rng.integers(-4 * MIB, 4 * MIB)) // 8 * 8 + 8 * k
        await sink[1].take(np.ones(n, np.uint8), ret=True)
    return {"arrays": 24}


async def pool_small(args):
    sink = shoal.Array(Sink, 2)
    rng = np.random.default_rng(2)
    sizes = rng.integers(8 << 10, 64 << 10, 20_000)
    for lo in range(0, len(sizes), 100):
        futs = [sink[1].take(np.ones(int(n), np.uint8), ret=True) for n in sizes[lo:lo + 100]]
        for f in futs:
            await f
    return {"arrays": len(sizes)}


async def queued(args):
    sink = shoal.Array(Sink, 64, map="round_robin")
    n = 1_000_000
    for k in range(n):
        sink[k % 64].small(k)
    counts = await sink.done(ret=True)
    assert sum(counts) == n, sum(counts)
    return {"messages": n}


async def flood(args):
    sink = shoal.Array(Sink, 2)
    n = 1_000_000
    await sink[0].flood(1, n, "slow", ret=True)
    await shoal.quiescence()
    assert (await sink[1].done(ret=True)) == n
    return {"messages": n}


async def mutual(args):
    sink = shoal.Array(Sink, 2)
    n = 300_000
    a = sink[0].flood(1, n, ret=True)
    b = sink[1].flood(0, n, ret=True)
    await a
    await b
    await shoal.quiescence()
    counts = await sink.done(ret=True)
    assert counts == [n, n], counts
    return {"messages": 2 * n}


async def roundtrip(args):
    sink = shoal.Array(Sink, 2)
    arr = np.ones(args.size // 8)
    back = await sink[1].echo(arr, ret=True)
    assert back.shape == arr.shape and back[-1] == 1.0
    del back
    return {"bytes": arr.nbytes}


async def migrate(args):
    census = shoal.Group(Census)
    sink = shoal.Array(Sink, args.elements, map=on_pe0)
    await shoal.quiescence()
    t0 = time.perf_counter()
    sink.move(1)
    while (await census[1].count(sink.cid, ret=True)) < args.elements:
        await shoal.sleep(0.01)
    return {"elements": args.elements, "seconds": time.perf_counter() - t0}


async def temporary(args, keep=False):
    for k in range(args.collections):
        arr = shoal.Array(Sink, 4)
        await arr[k % 4].done(ret=True)
        if not keep:
            await shoal.destroy(arr)
        if k % 10_000 == 0:
            print(f"[{k}/{args.collections} collections]", file=sys.stderr, flush=True)
    return {"collections": args.collections}


async def temporary_kept(args):
    return await temporary(args, keep=True)


JOBS = {"pool_large": pool_large, "pool_small": pool_small, "queued": queued,
        "flood": flood, "mutual": mutual, "roundtrip": roundtrip, "migrate": migrate,
        "temporary": temporary, "temporary_kept": temporary_kept}


def job(case, args):
    async def main():
        probe = shoal.Group(Probe)
        await probe.base(ret=True)
        figures = await JOBS[case](args)
        await shoal.quiescence()
        mem = await probe.report(ret=True)
        print(json.dumps({"case": case, "figures": figures, "mem": mem}), flush=True)

    shoal.start(main)


def parse_size(text):
    from shoal.units import parse_size as ps

    return ps(text, "--size")


def launch(case, args):
    from shoal.launch import mpiexec

    cmd = [*mpiexec(), "-n", str(CASES[case]), sys.executable, __file__, "--job", case,
           "--size", str(args.size), "--elements", str(args.elements), "--collections",
           str(args.collections)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=7200)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{case} failed (its stderr is above)")
    res = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("{")))
    res["wall"] = wall
    return res


def figure(res):
    """The case's figure, as text."""
    case, mem, fig = res["case"], res["mem"], res["figures"]
    grow = [peak - base for base, peak, _ in mem]
    if case in ("pool_large", "pool_small"):
        return grow[1], f"PE 1 grew {grow[1]:.0f} MiB"
    if case.startswith("temporary"):
        return grow[0], (f"PE 0 grew {grow[0]:.0f} MiB for {fig['collections']} "
                         f"collections")
    if case in ("queued", "flood", "mutual"):
        per = sum(grow) * MIB / fig["messages"]
        return per, f"{per:.0f} B per message (growth summed over PEs)"
    if case == "roundtrip":
        ratio = max(peak for _, peak, _ in mem) * MIB / fig["bytes"]
        return ratio, (f"peak {ratio:.2f}x the array ({fig['bytes'] / MIB:.0f} MiB); "
                       f"per PE " + ", ".join(f"{peak * MIB / fig['bytes']:.2f}x"
                                               for _, peak, _ in mem)
                       + "; resident after the trip: "
                       + ", ".join(f"{now:.0f}" for *_, now in mem) + " MiB")
    return fig["seconds"], f"{fig['elements']} elements in {fig['seconds']:.2f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--size", type=parse_size, default=512 * MIB,
                    help="roundtrip: the array's size (e.g. 512MiB, 2.5GiB)")
    ap.add_argument("--elements", type=int, default=10_000, help="migrate: elements")
    ap.add_argument("--collections", type=int, default=100_000,
                    help="temporary: collections made one after another")
    ap.add_argument("--runs", type=int, default=1, help="jobs per case")
    ap.add_argument("--job", choices=sorted(CASES))
    args = ap.parse_args()
    if args.job:
        job(args.job, args)
        return
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}: choose from {', '.join(CASES)}")
    for case in cases:
        figs = []
        for run in range(args.runs):
            print(f"[{case} run {run + 1}/{args.runs}]", file=sys.stderr, flush=True)
            res = launch(case, args)
            value, text = figure(res)
            figs.append(value)
            mem = "  ".join(f"PE{p} {b:.0f}->{h:.0f}" for p, (b, h, _) in enumerate(res["mem"]))
            print(f"{case:10} {text}; MiB base->peak: {mem}; job {res['wall']:.1f} s",
                  flush=True)
        if args.runs > 1:
            print(f"{case:10} median {statistics.median(figs):.2f} "
                  f"({min(figs):.2f}-{max(figs):.2f}) over {args.runs} runs")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
