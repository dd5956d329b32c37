"""examples/stencil2d.py (4x4 over-decomposed blocks, channels, allreduce) against the
hand-written mpi4py version (one block per rank), 2 PEs, jobs interleaved; issue target:
shoal's time per iteration <= 1.15x mpi4py's.
Usage: python benchmarks/stencil2d.py [--n 4096] [--iters 50] [--runs 3]"""

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

from shoal.launch import mpiexec

HERE = Path(__file__).parent
SHOAL = HERE.parent / "examples" / "stencil2d.py"
PEER = HERE / "peers" / "stencil2d_mpi4py.py"


def per_iter(cmd: list[str]) -> float:
    out = subprocess.run([*mpiexec(), "-n", "2", sys.executable, *cmd], capture_output=True,
                         text=True, timeout=900, check=True).stdout
    return float(re.search(r"([\d.]+) ms per iteration", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    shoal_ms, mpi_ms = [], []
    for _ in range(args.runs):
        shoal_ms.append(per_iter([str(SHOAL), "--n", str(args.n), "--blocks", "4",
                                  "--iters", str(args.iters)]))
        mpi_ms.append(per_iter([str(PEER), str(args.n), str(args.iters)]))
    s, m = statistics.median(shoal_ms), statistics.median(mpi_ms)
    print(f"Jacobi {args.n}x{args.n}, {args.iters} iterations, 2 PEs, median of {args.runs}")
    print(f"  shoal 4x4 blocks: {s:.2f} ms/iteration ({', '.join(f'{x:.1f}' for x in shoal_ms)})")
    print(f"  mpi4py 1 block/rank: {m:.2f} ms/iteration ({', '.join(f'{x:.1f}' for x in mpi_ms)})")
    print(f"  ratio shoal/mpi4py {s / m:.2f}, target <= 1.15")


if __name__ == "__main__":
    main()
