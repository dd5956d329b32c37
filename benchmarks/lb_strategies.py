"""Load-balancing strategies at scale (Acun14, Section III-A; issue 13, section 4): the
issue's targets, each printed with its figure, target and PASS/FAIL.

1. 10^6 objects on 16,384 PEs, lognormal loads (sigma 1), placed uniformly at random: every
   strategy that needs no graph runs --runs times (median time, min-max). Targets: greedy
   and greedy_refine <= 10 s with max/avg <= 1.02; refine max/avg <= 1.05 moving <= 25% of
   the objects; hierarchical <= 3 s with max/avg within 3% of greedy's; distributed max/avg
   <= 1.10 in <= 2 log2 P gossip rounds. orb is printed without a target.
2. METIS on a 3D-stencil graph of 262,144 objects over 4,096 PEs (lognormal sigma 0.5,
   random placement): <= 30 s, edge cut printed against greedy's; topo on a 16x16x16 torus
   printed beside it (hop-bytes against metis's and greedy's), no target.

No placement can beat max/avg = largest object / (highest capacity * avg): the header prints
this floor. With sigma 1 and ~61 objects per PE the largest of 10^6 objects is typically
1.2-1.6x the average PE load, so the issue's max/avg bounds are out of reach for any
placement; each bound is therefore checked as a multiple of the floor (1.02 x floor for
greedy, the same as 1.02 wherever the floor is 1, as with --sigma 0.5). Numba compilation
happens in a warm-up run before timing. The machine is shared
(2 cores, other users): times vary by tens of percent between runs.

Usage: python benchmarks/lb_strategies.py [--objects 1000000] [--pes 16384] [--runs 3]
       [--seed 1] [--slow 0.0] [--sigma 1.0] [--skip-metis]"""

import argparse
import math
import statistics
import time

import numpy as np

from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.distributed import simulate
from shoal.runtime.lb.graph import metis
from shoal.runtime.lb.machine import Machine
from shoal.runtime.lb.strategies import STRATEGIES
from shoal.runtime.lb.synth import synthesize
from shoal.runtime.lb.topo import topo
from shoal.topology.torus import Torus


def floor(db):
    """A lower bound of max/avg for any placement: 1, or the largest object alone on the PE
    of highest capacity."""
    return max(1.0, float(db.load.max() / db.capacity().max() / (db.load.sum() / db.npes)))


def synthesise(objects, pes, seed, slow, sigma=1.0):
    rng = np.random.default_rng(seed)
    load = rng.lognormal(0.0, sigma, objects)
    pe = rng.integers(0, pes, objects)
    speed = np.ones(pes)
    if slow > 0:  # Acun14 Fig. 17: some nodes at 0.7x frequency
        speed[rng.random(pes) < slow] = 0.7
    return LBDatabase(load=load, pe=pe, npes=pes, speed=speed)


def timed(fn, runs):
    """(result of the last run, median seconds, min, max)."""
    times = []
    out = None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times), min(times), max(times)


def verdict(ok):
    return "PASS" if ok else "FAIL"


def check(name, ok_time, ok_quality, seconds, ratio, moved, target, extra=""):
    print(f"  {name:14s} {seconds[0]:7.2f} s ({seconds[1]:.2f}-{seconds[2]:.2f})  max/avg "
          f"{ratio:.4f}  moved {moved:6.1%}{extra}   [{target}: "
          f"{verdict(ok_time and ok_quality)}]")


def part_one(args):
    db = synthesise(args.objects, args.pes, args.seed, args.slow, args.sigma)
    lo = floor(db)
    print(f"1. {args.objects} objects (lognormal sigma {args.sigma:g}, seed {args.seed}), "
          f"{args.pes} PEs, random placement, {args.slow:.0%} of PEs at 0.7x; max/avg before "
          f"{db.imbalance():.3f}, floor {lo:.4f}; median of {args.runs} runs (min-max)")
    tiny = LBDatabase(np.array([2.0, 1.0, 1.0]), np.array([0, 0, 0]), 2)
    for name in ("greedy", "refine", "greedy_refine", "hierarchical"):
        STRATEGIES[name](tiny)  # numba compilation
    res = {}
    for name in ("greedy", "greedy_refine", "refine", "hierarchical", "orb"):
        placement, med, mn, mx = timed(lambda n=name: STRATEGIES[n](db), args.runs)
        res[name] = (db.imbalance(placement), float(np.mean(placement != db.pe)), (med, mn, mx))
    g = res["greedy"][0]
    for name in ("greedy", "greedy_refine"):
        r, moved, t = res[name]
        check(name, t[0] <= 10, r <= 1.02 * lo, t, r, moved,
              f"<= 10 s, max/avg <= 1.02 x floor = {1.02 * lo:.4f}")
    r, moved, t = res["refine"]
    check("refine", True, r <= 1.05 * lo and moved <= 0.25, t, r, moved,
          f"max/avg <= 1.05 x floor = {1.05 * lo:.4f}, moved <= 25%")
    r, moved, t = res["hierarchical"]
    check("hierarchical", t[0] <= 3, r <= 1.03 * g, t, r, moved,
          f"<= 3 s, max/avg <= 1.03 x greedy's = {1.03 * g:.4f}")
    r, moved, t = res["orb"]
    check("orb", True, True, t, r, moved, "no target (1-D: object numbers)")
    out, med, mn, mx = timed(lambda: simulate(db, args.seed), args.runs)
    r = db.imbalance(out.placement)
    bound = 2 * math.log2(args.pes)
    check("distributed", True, r <= 1.10 * lo and out.rounds <= bound, (med, mn, mx), r,
          float(np.mean(out.placement != db.pe)),
          f"max/avg <= 1.10 x floor = {1.10 * lo:.4f} in <= 2 log2 P = {bound:.0f} rounds",
          f"  {out.rounds} rounds, {out.phases} phases, {out.messages} messages")


def part_two(args):
    n, pes = 262_144, 4096
    db = synthesize(n, pes, "lognormal", "stencil3d", "random", args.seed, sigma=0.5)
    machine = Machine.block(Torus((16, 16, 16)), pes)
    print(f"2. 3D stencil of {n} objects ({db.src.size} directed edges, 8 KiB each) on "
          f"{pes} PEs, random placement; max/avg before {db.imbalance():.3f}, edge cut "
          f"before {db.edge_cut() / 2**30:.2f} GiB; median of {args.runs} runs (min-max)")
    g = STRATEGIES["greedy"](db)
    placement, med, mn, mx = timed(lambda: metis(db), args.runs)
    cut, gcut = db.edge_cut(placement), db.edge_cut(g)
    print(f"  metis {med:7.2f} s ({mn:.2f}-{mx:.2f})  max/avg {db.imbalance(placement):.4f}  "
          f"edge cut {cut / 2**20:.0f} MiB = {cut / gcut:.3f} x greedy's "
          f"{gcut / 2**20:.0f} MiB   [<= 30 s: {verdict(med <= 30)}]")
    tp, med, mn, mx = timed(lambda: topo(db, machine), args.runs)
    hb = {k: machine.hop_bytes(db, p) for k, p in (("topo", tp), ("metis", placement),
                                                    ("greedy", g))}
    print(f"  topo  {med:7.2f} s ({mn:.2f}-{mx:.2f})  max/avg {db.imbalance(tp):.4f}  "
          f"hop-bytes on 16x16x16: {hb['topo']:.3g} (metis {hb['metis']:.3g}, greedy "
          f"{hb['greedy']:.3g})   [no target]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=1_000_000)
    ap.add_argument("--pes", type=int, default=16_384)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slow", type=float, default=0.0,
                    help="fraction of PEs at speed 0.7 (default 0: identical PEs)")
    ap.add_argument("--sigma", type=float, default=1.0, help="of the lognormal loads")
    ap.add_argument("--skip-metis", action="store_true", help="only part 1")
    args = ap.parse_args()
    part_one(args)
    if not args.skip_metis:
        part_two(args)


if __name__ == "__main__":
    main()
