"""Flat against hierarchical gossip from 10^3 to 10^6 nodes (issue: gossip as a cluster
service, item 4; shoal.gossip.hier): average age of own-group records and of group
summaries, bytes sent per node per unit, entries held per node, and what each simulation
cost (wall time, peak memory of this process). Windows are 20% of the vector (of N flat; of S
records and of G summaries in groups of S = G = sqrt N). The flat age is simulated up to
10^4 nodes and the paper's formula above (the N^2 simulation needs 2 TB at 10^6).

Usage: python benchmarks/gossip_hier.py [--nodes 1000,10000,100000,1000000] [--units 50]
"""

import argparse
import resource
import sys
import time

from shoal.gossip.hier import compare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="1000,10000,100000,1000000")
    ap.add_argument("--units", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    print(f"{'N':>8} {'S':>5} | {'flat age':>9} {'B/unit':>9} {'entries':>8} | "
          f"{'own age':>8} {'summ age':>8} {'known':>6} {'B/unit':>8} {'entries':>7} | "
          f"{'wall s':>7} {'peak GiB':>8}")
    for n in (int(x) for x in args.nodes.split(",")):
        print(f"simulating N={n}...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        c = compare(n, 0.2, args.units, args.warmup)
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        flat = f"{c.flat_age:8.2f}{'' if c.flat_simulated else '*'}"
        print(f"{n:>8} {c.group:>5} | {flat:>9} {c.flat_bytes_unit:>9.3g} {n:>8} | "
              f"{c.own_age:>8.2f} {c.summary_age:>8.2f} {c.summary_known:>6.3f} "
              f"{c.hier_bytes_unit:>8.3g} {c.group + n // c.group:>7} | {wall:>7.1f} "
              f"{peak:>8.2f}", flush=True)
    print("ages in units of time; B/unit: bytes a node sends per unit (records of "
          "260 B, summaries of 48 B); * the formula, not simulated")


if __name__ == "__main__":
    main()
