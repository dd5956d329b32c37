"""Mapping at the paper's largest scale (seed 004): all 24 orderings of a 131,072-process 3D
26-neighbour stencil (64x64x32 grid) on a 32x32x32 torus with 4 cores per node, adaptive
split routing (issue target: <= 60 s wall and <= 4 GiB on a 2-core machine); then a 5D BG/Q
partition (4x4x4x4x2 nodes, 16 cores, 8192 processes, 3D stencil 32x16x16) with its
orderings of T and ABCDE. Prints the time per mapping and the peak memory.
Usage: python benchmarks/mapping_scale.py [--mappings 24]"""

import argparse
import resource
import time

from shoal.mapping.mappings import orderings
from shoal.mapping.patterns import parse
from shoal.mapping.select import rank
from shoal.topology.torus import Torus


def run(torus, pattern, count):
    names = orderings(torus)[:count]
    t0 = time.perf_counter()
    ranked = rank(torus, pattern, names, "adaptive")
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"  {len(names)} mappings in {wall:.1f} s ({wall / len(names):.2f} s each), "
          f"peak RSS {rss:.2f} GiB")
    print(f"  best {ranked[0][0]} (max link {ranked[0][1]['max'] / 2**20:.1f} MiB), "
          f"worst {ranked[-1][0]} ({ranked[-1][1]['max'] / 2**20:.1f} MiB)")
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mappings", type=int, default=24)
    ap.add_argument("--bgq-mappings", type=int, default=24)
    args = ap.parse_args()
    print("131072 processes: grid 64x64x32 star on torus 32x32x32 x 4 cores "
          "(target <= 60 s, <= 4 GiB)")
    run(Torus((32, 32, 32), cores=4), parse("grid 64x64x32 stencil=star bytes=64KiB"),
        args.mappings)
    print("BG/Q 5D: grid 32x16x16 star on torus 4x4x4x4x2 x 16 cores")
    run(Torus((4, 4, 4, 4, 2), cores=16), parse("grid 32x16x16 stencil=star bytes=64KiB"),
        args.bgq_mappings)


if __name__ == "__main__":
    main()
