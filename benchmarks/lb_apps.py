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


def run(args: argparse.Namespace, strategy: str | None) -> tuple[float, float]:
    """One job: ms per iteration and the perfectly balanced ms of its work (no balancing
    when ``strategy`` is None)."""
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(APP), "--n", str(args.n), "--blocks",
           str(args.blocks), "--iters", str(args.iters), "--lb-every", str(args.lb_every)]
    if strategy is None:
        cmd.append("--no-sync")
    env = None if strategy is None else dict(os.environ, SHOAL_LB=strategy)
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
    ap.add_argument("--lb", action="append", help="strategy to compare (repeat the option; "
                    "default: greedy_refine and refine)")
    args = ap.parse_args()
    strategies: list[str | None] = [None, *(args.lb or ["greedy_refine", "refine"])]
    res: dict[str | None, list[tuple[float, float]]] = {s: [] for s in strategies}
    for _ in range(args.runs):
        for strategy in strategies:
            res[strategy].append(run(args, strategy))
    print(f"stencil with a moving hot spot, {args.n}^2, {args.blocks}x{args.blocks} blocks, "
          f"2 PEs, {args.iters} iterations, sync every {args.lb_every}, medians of "
          f"{args.runs}")
    base = statistics.median(r[0] for r in res[None])
    for strategy in strategies:
        t = [r[0] for r in res[strategy]]
        ideal = statistics.median(r[1] for r in res[strategy])
        med = statistics.median(t)
        label = strategy or "no balancing"
        line = (f"  {label:16} {med:7.2f} ms/iter ({min(t):.2f}-{max(t):.2f}), perfect "
                f"balance of its work {ideal:.2f} ms")
        if strategy is not None:
            line += (f"; speed-up {base / med:.2f}x (target >= 1.35), "
                     f"{100 * (med / ideal - 1):.0f}% above perfect (target <= 15%)")
        print(line)


if __name__ == "__main__":
    main()
