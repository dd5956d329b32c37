"""Mapping at the paper's largest scale (Balaji11): a 131,072-process 3D 26-neighbour stencil
(64x64x32 grid) on a 32x32x32 torus with 4 cores per node, adaptive split routing.

- ``shoal map`` through the CLI on the 24 orderings (issue 17 target: well under 60 s);
- the whole candidate set (24 orderings + the tiled mappings) in this process (target: a
  few minutes);
- a 5D BG/Q partition (4x4x4x4x2 nodes, 16 cores, 8192 processes, 3D stencil 32x16x16)
  with its orderings of T and ABCDE.

Prints medians of ``--runs`` runs with their min-max spread, per-candidate times and peak
memory. The machine may be shared: the load average is printed with every figure.
Usage: python benchmarks/mapping_scale.py [--runs 3] [--skip-all] [--skip-cli]"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from shoal.mapping.mappings import orderings
from shoal.mapping.patterns import parse
from shoal.mapping.select import candidates, rank
from shoal.topology.torus import Torus

TORUS, CORES, GRID = "32x32x32", 4, "grid 64x64x32 stencil=star"


def spread(values):
    return (f"median {statistics.median(values):.1f} s (min {min(values):.1f}, max "
            f"{max(values):.1f}, {len(values)} runs)")


def load():
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def in_process(torus, pattern, names, runs, label):
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ranked = rank(torus, pattern, names, "adaptive", keep=1)
        walls.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"  {label}: {len(names)} candidates, {spread(walls)}, "
          f"{statistics.median(walls) / len(names):.2f} s each, peak RSS {rss:.2f} GiB; "
          f"{load()}")
    print(f"  best {ranked[0][0]} (max link {ranked[0][1]['max'] / 2**20:.1f} MiB), "
          f"worst {ranked[-1][0]} ({ranked[-1][1]['max'] / 2**20:.1f} MiB)")


def through_cli(runs):
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "shoal", "map", "--torus", TORUS,
                               "--cores", str(CORES), "--pattern", GRID, "--routing",
                               "adaptive", "--mappings", "orderings", "--top", "3"],
                              capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
        if done.returncode:
            sys.exit(done.stderr)
    print(f"  shoal map --mappings orderings: {spread(walls)} (target: well under 60 s); "
          f"{load()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-all", action="store_true", help="skip the whole candidate set")
    ap.add_argument("--skip-cli", action="store_true", help="skip the CLI runs")
    args = ap.parse_args()
    torus = Torus((32, 32, 32), cores=CORES)
    pattern = parse(GRID + " bytes=64KiB")
    print(f"131072 processes: {GRID} on torus {TORUS} x {CORES} cores, adaptive routing")
    if not args.skip_cli:
        through_cli(args.runs)
    in_process(torus, pattern, orderings(torus), args.runs, "orderings")
    if not args.skip_all:
        in_process(torus, pattern, candidates(torus, pattern), 1, "orderings + tiles")
    print("BG/Q 5D: grid 32x16x16 star on torus 4x4x4x4x2 x 16 cores")
    bgq = Torus((4, 4, 4, 4, 2), cores=16)
    in_process(bgq, parse("grid 32x16x16 stencil=star bytes=64KiB"), orderings(bgq)[:24],
               args.runs, "orderings")


if __name__ == "__main__":
    main()
