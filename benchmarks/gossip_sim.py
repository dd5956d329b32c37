"""Speed and memory of the gossip simulator (issue: N=8192, 20% window, 50 warm-up + 100
measured units in <= 15 s wall on a 2-core machine; N=32768 at 20% within 24 GiB).

Prints wall time, CPU time and peak resident memory of each case, and the simulated vs
expected average age. Each case runs in a fresh process so that its peak memory is its own.
Usage: python benchmarks/gossip_sim.py [--repeat 3] [--big-units 20]
"""

import argparse
import json
import statistics
import subprocess
import sys

CASE = r"""
import json, resource, sys, time
from shoal.gossip.sim import simulate
simulate(64, 0.2, 30, seed=0)  # compile (cached on disk after the first run)
n, units, warmup = map(int, sys.argv[1:4])
w0, c0 = time.perf_counter(), time.process_time()
r = simulate(n, 0.2, units, warmup, seed=1, snapshots=2)
print(json.dumps({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
                  "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "age": r.mean_age, "expected": r.expected, "window": r.window}))
"""


def run_case(n, units, warmup):
    out = subprocess.run([sys.executable, "-c", CASE, str(n), str(units), str(warmup)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-units", type=int, default=60,
                    help="units (half warm-up) of the N=32768 case")
    args = ap.parse_args()
    runs = [run_case(8192, 150, 50) for _ in range(args.repeat)]
    wall = statistics.median(r["wall"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    r = runs[0]
    walls = ", ".join(f"{x['wall']:.1f}" for x in runs)
    print(f"N=8192 window={r['window']} 50+100 units: wall {wall:.1f} s (median of "
          f"{len(runs)}: {walls}), cpu {cpu:.1f} s, "
          f"peak RSS {r['rss_gib']:.2f} GiB, target <= 15 s wall")
    print(f"  average age {r['age']:.2f} units, expected_age {r['expected']:.2f}")
    big = run_case(32768, args.big_units, args.big_units // 2)
    print(f"N=32768 window={big['window']} {args.big_units} units: wall {big['wall']:.1f} s, "
          f"cpu {big['cpu']:.1f} s, peak RSS {big['rss_gib']:.2f} GiB (limit 24 GiB), "
          f"{big['wall'] / args.big_units:.2f} s per unit")
    print(f"  average age {big['age']:.2f} units, expected_age {big['expected']:.2f}")


if __name__ == "__main__":
    main()
