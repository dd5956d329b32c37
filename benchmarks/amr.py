"""AMR (examples/amr.py, Acun14 IV-A, AMR3D in 2-D): timesteps per second and remeshing time
at a few depths of the quadtree, as the paper's AMR figures report them (Fig. 8 and Langer
et al. 2012's tables: timesteps/s, and the time of one mesh restructuring).

Each depth is a job on ``--pes`` PEs: levels ``--min-level`` to MAX, blocks of
``--block``^2 cells, ``--steps`` steps remeshing every ``--remesh-every``, the balancer
(``--lb``) after every ``--lb-every``-th remeshing (0: none). Per depth, ``--runs`` jobs,
interleaved over the depths; medians with min-max of the timesteps per second (steps over
the seconds spent stepping, remeshing and balancing left out) and of each job's median
remeshing time (from the end of the steps to the quiescence that ends the restructuring:
the criterion's ghost exchange, the decisions, the insertions and deletions). The load
average of the machine before and after is printed: on a shared machine it is part of the
figure. ``--check`` has every job compare itself with the serial reference.

Usage: python benchmarks/amr.py [--runs 3] [--pes 2] [--depths 4,5,6] [--min-level 2]
       [--block 16] [--steps 80] [--remesh-every 4] [--lb-every 4] [--lb greedy_refine]
       [--check]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

APP = Path(__file__).resolve().parent.parent / "examples" / "amr.py"


def run(args: argparse.Namespace, depth: int, out: Path) -> dict:
    """One job: timesteps/s, median remeshing seconds, blocks (largest count), migrations."""
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(args.pes), "--lb", args.lb,
           str(APP), "--block", str(args.block), "--min-level", str(args.min_level),
           "--max-level", str(depth), "--steps", str(args.steps), "--remesh-every",
           str(args.remesh_every), "--lb-every", str(args.lb_every), "--quiet",
           "--out", str(out), "--cpu-stats"]
    if args.check:
        cmd.append("--serial")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    with np.load(out) as z:
        steps = int(z["steps"][-1])
        blocks = z["levels"].sum(axis=1)
        return {"rate": steps / float(z["step_seconds"].sum()),
                "remesh": float(np.median(z["remesh_seconds"])),
                "blocks": int(blocks.max()), "final": int(blocks[-1]),
                "moves": int(z["lb_migrations"]),
                "same": "the same bits" in done.stdout if args.check else None}


def spread(values: list[float], fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"({format(min(values), fmt)}-{format(max(values), fmt)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pes", type=int, default=2)
    ap.add_argument("--depths", default="4,5,6", help="finest levels, comma-separated")
    ap.add_argument("--min-level", type=int, default=2)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--remesh-every", type=int, default=4)
    ap.add_argument("--lb-every", type=int, default=4)
    ap.add_argument("--lb", default="greedy_refine")
    ap.add_argument("--check", action="store_true", help="compare with the serial reference")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    before = os.getloadavg()
    res: dict[int, list[dict]] = {d: [] for d in depths}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            for d in depths:
                r = run(args, d, Path(tmp) / "out.npz")
                res[d].append(r)
                print(f"levels {args.min_level}-{d} run {k + 1}/{args.runs}: "
                      f"{r['rate']:.1f} timesteps/s, remeshing {r['remesh'] * 1e3:.1f} ms",
                      file=sys.stderr, flush=True)
    after = os.getloadavg()
    lb = f"{args.lb} every {args.lb_every} remeshings" if args.lb_every else "no balancing"
    print(f"AMR, {args.pes} PEs, {args.block}x{args.block} cells per block, {args.steps} steps, "
          f"remeshing every {args.remesh_every}, {lb}; medians (min-max) of {args.runs} "
          f"runs; load average {before[0]:.1f} before, {after[0]:.1f} after")
    print()
    print("| levels | blocks (most, at the end) | timesteps/s | remeshing (ms) | "
          "LB migrations per run |")
    print("|---|---|---|---|---|")
    for d in depths:
        rs = res[d]
        print(f"| {args.min_level}-{d} | {rs[0]['blocks']}, {rs[0]['final']} | "
              f"{spread([r['rate'] for r in rs], '.1f')} | "
              f"{spread([r['remesh'] * 1e3 for r in rs], '.1f')} | "
              f"{statistics.median(r['moves'] for r in rs):.0f} |")
    if args.check:
        bad = sum(not r["same"] for rs in res.values() for r in rs)
        print(f"\nserial reference: {'every run matched' if not bad else f'{bad} runs DIFFER'}")


if __name__ == "__main__":
    main()
