"""What load balancing buys an application: examples/stencil_hotspot.py on 2 PEs with a
balancer at sync points against the same work with no balancing, jobs interleaved, medians
(min-max) of ``--runs`` each. Also printed: the time a perfect balance of the measured work
would take (work / PEs). Targets (issue: load balancing): with greedy_refine at least 1.35x
faster than without, and within 15% of the perfectly balanced time.

Usage: python benchmarks/lb_apps.py [--runs 3] [--n 2048] [--blocks 8] [--iters 60]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from shoal.launch import mpiexec

APP = Path(__file__).resolve().parent.parent / "examples" / "stencil_hotspot.py"
LINE = re.compile(r"([\d.]+) ms per iteration; work ([\d.]+) ms per iteration, perfectly "
                  r"balanced ([\d.]+) ms")


def run(args: argparse.Namespace, balanced: bool) -> tuple[float, float]:
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(APP), "--n", str(args.n), "--blocks",
           str(args.blocks), "--iters", str(args.iters), "--lb-every", str(args.lb_every)]
    if not balanced:
        cmd.append("--no-sync")
    env = dict(os.environ, SHOAL_LB=args.lb) if balanced else None
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env,
                         check=True).stdout
    m = LINE.search(out)
    if m is None:
        raise RuntimeError(f"unexpected output: {out}")
    return float(m.group(1)), float(m.group(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--lb-every", type=int, default=10)
    ap.add_argument("--lb", default="greedy_refine")
    args = ap.parse_args()
    res: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(args.runs):
        for balanced in (False, True):
            res[balanced].append(run(args, balanced))
    print(f"stencil with a moving hot spot, {args.n}^2, {args.blocks}x{args.blocks} blocks, "
          f"2 PEs, {args.iters} iterations, medians of {args.runs}")
    med = {}
    for balanced, label in ((False, "no balancing"), (True, f"{args.lb} every "
                                                            f"{args.lb_every} iterations")):
        t = [r[0] for r in res[balanced]]
        ideal = [r[1] for r in res[balanced]]
        med[balanced] = (statistics.median(t), statistics.median(ideal))
        print(f"  {label:36} {med[balanced][0]:7.2f} ms/iter ({min(t):.2f}-{max(t):.2f}), "
              f"perfect balance of its work {med[balanced][1]:.2f} ms")
    speedup = med[False][0] / med[True][0]
    off = med[True][0] / med[True][1] - 1
    print(f"  speed-up with balancing {speedup:.2f}x (target >= 1.35); balanced run "
          f"{100 * off:.0f}% above its perfect balance (target <= 15%)")


if __name__ == "__main__":
    main()
