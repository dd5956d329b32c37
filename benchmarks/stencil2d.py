"""examples/stencil2d.py (4x4 over-decomposed blocks, channels, allreduce) against the
hand-written mpi4py version (one block per rank), 2 PEs, jobs interleaved; issue target: shoal
at >= 0.95x mpi4py's speed (its time per iteration <= 1.05x mpi4py's). Where shoal runs its
compiled core, the pure-Python one (``SHOAL_PURE=1``) is measured too, interleaved.
Usage: python benchmarks/stencil2d.py [--n 4096] [--iters 50] [--runs 3]"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from shoal.launch import mpiexec

HERE = Path(__file__).parent
SHOAL = HERE.parent / "examples" / "stencil2d.py"
PEER = HERE / "peers" / "stencil2d_mpi4py.py"


def per_iter(cmd: list[str], pure: bool = False) -> float:
    env = {**os.environ, "SHOAL_PURE": "1" if pure else "0"}
    out = subprocess.run([*mpiexec(), "-n", "2", sys.executable, *cmd], capture_output=True,
                         text=True, timeout=900, check=True, env=env).stdout
    return float(re.search(r"([\d.]+) ms per iteration", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from shoal._compiled import core

    stencil = [str(SHOAL), "--n", str(args.n), "--blocks", "4", "--iters", str(args.iters)]
    jobs = {f"shoal 4x4 blocks ({core()} core)": (stencil, False),
            "mpi4py 1 block/rank": ([str(PEER), str(args.n), str(args.iters)], False)}
    if core() == "compiled":
        jobs["shoal 4x4 blocks (pure core)"] = (stencil, True)
    ms: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(args.runs):
        for name, (cmd, pure) in jobs.items():
            ms[name].append(per_iter(cmd, pure))
    med = {name: statistics.median(v) for name, v in ms.items()}
    m = med["mpi4py 1 block/rank"]
    print(f"Jacobi {args.n}x{args.n}, {args.iters} iterations, 2 PEs, median of {args.runs} "
          f"(the runs in brackets)")
    for name, v in ms.items():
        print(f"  {name}: {med[name]:.2f} ms/iteration ({', '.join(f'{x:.1f}' for x in v)}), "
              f"speed {m / med[name]:.2f}x mpi4py's")
    print("  target: shoal at >= 0.95x mpi4py's speed")


if __name__ == "__main__":
    main()
