"""What load balancing buys an application: examples/stencil_hotspot.py on 2 PEs with a
balancer at sync points against the same work with no balancing, jobs interleaved, medians
(min-max) of ``--runs`` each. Also printed: the time a perfect balance of the measured work
would take (work / PEs), migrations and seconds in LB steps per run. Targets (issue: load
balancing): with greedy_refine at least 1.35x faster than without, and within 15% of the
perfectly balanced time. The example's defaults (its docstring says why): 4096^2 cells in
8x8 blocks, a patch of 2048 cells a side at 8x the work, from the top-left quadrant along the
diagonal at 0.5 cells per iteration, 200 iterations, sync every 10, CPU-second loads (the
machine is shared); ``--speed``, ``--spot``, ``--heat`` change the patch.

LeanMD (examples/leanmd.py, Acun14 IV-B) on 2 PEs from a clustered start, loads in CPU
seconds (``--cpu-stats``: the machine is shared): time per step with balancing at sync points
against none, same interleaving and medians; target at least 1.25x with LB. Strategies
greedy_refine and refine by default (``--md-lb``); refine moves a few heavy computes and
leaves the initial placement's messages between PEs, greedy_refine moves hundreds of light
ones in regions its locality pass grows, and cuts those messages by 2.5x. Its runs must end
in the same checksum (balancing changes no bit).

Usage: python benchmarks/lb_apps.py [--runs 3] [--n 4096] [--blocks 8] [--iters 200]
       [--speed 0.5] [--spot CELLS] [--heat 8] [--pairs stencil,leanmd]
       [--md-cells 4] [--md-atoms 1000] [--md-steps 60]
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
LEANMD = APP.with_name("leanmd.py")
MD_LINE = re.compile(r"([\d.]+) ms per step; (\d+) element migrations, ([\d.]+) s in LB")
MD_SUM = re.compile(r"checksum (\S+)")
MD_LOAD = re.compile(r"max/avg PE load ([\d.]+) before the first LB step, ([\d.]+) after")
LINE = re.compile(r"^(.*), on 2 PEs, .*: ([\d.]+) ms per iteration; work ([\d.]+) ms per "
                  r"iteration, perfectly balanced ([\d.]+) ms; (\d+) migrations, ([\d.]+) s in LB",
                  re.M)


def _job(cmd: list[str], env: dict | None) -> str:
    """Run one job; its output, or its stderr and exit code raised if it failed."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} (SHOAL_LB={(env or {}).get('SHOAL_LB')}) "
                           f"exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


def run(args: argparse.Namespace, strategy: str | None) -> dict:
    """One job (no balancing when ``strategy`` is None): what ran, ms per iteration, the
    perfectly balanced ms of its work, migrations and seconds in LB steps."""
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(APP), "--n", str(args.n), "--blocks",
           str(args.blocks), "--iters", str(args.iters), "--lb-every", str(args.lb_every),
           "--speed", str(args.speed), "--heat", str(args.heat), "--cpu-stats"]
    if args.spot is not None:
        cmd += ["--spot", str(args.spot)]
    if strategy is None:
        cmd.append("--no-sync")
    env = None if strategy is None else dict(os.environ, SHOAL_LB=strategy)
    out = _job(cmd, env)
    m = LINE.search(out)
    if m is None:
        raise RuntimeError(f"unexpected output: {out}")
    return {"what": m.group(1), "ms": float(m.group(2)), "ideal": float(m.group(4)),
            "migrations": int(m.group(5)), "lb_s": float(m.group(6))}


def leanmd_run(args: argparse.Namespace, strategy: str | None) -> dict:
    """One LeanMD job on 2 PEs (no balancing when ``strategy`` is None): ms per step,
    element migrations, LB seconds, checksum and (with LB) max/avg PE load before the first
    step and after the last."""
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(LEANMD), "--cells", str(args.md_cells),
           "--atoms", str(args.md_atoms), "--cutoff", str(args.md_cutoff), "--steps",
           str(args.md_steps), "--lb-every", str(args.md_lb_every if strategy else 0),
           "--cpu-stats"]
    env = dict(os.environ, SHOAL_LB=strategy) if strategy else None
    out = _job(cmd, env)
    m, c = MD_LINE.search(out), MD_SUM.search(out)
    if m is None or c is None:
        raise RuntimeError(f"unexpected output: {out}")
    load = MD_LOAD.search(out)
    return {"ms": float(m.group(1)), "migrations": int(m.group(2)), "lb_s": float(m.group(3)),
            "checksum": c.group(1), "load": load and (float(load.group(1)),
                                                     float(load.group(2)))}


def leanmd_pair(args: argparse.Namespace) -> None:
    """LeanMD with each strategy of ``--md-lb`` against no balancing, interleaved, medians of
    ``runs``."""
    strategies: list[str | None] = [None, *(args.md_lb or ["greedy_refine", "refine"])]
    res: dict[str | None, list[dict]] = {s: [] for s in strategies}
    for k in range(args.runs):
        for strategy in strategies:
            res[strategy].append(leanmd_run(args, strategy))
            print(f"leanmd run {k + 1}/{args.runs} {strategy or 'no LB'}: "
                  f"{res[strategy][-1]['ms']:.1f} ms/step", file=sys.stderr, flush=True)
    print(f"LeanMD, {args.md_cells}^3 cells, {args.md_atoms} atoms per cell on average "
          f"(clustered), cutoff {args.md_cutoff}, 2 PEs, {args.md_steps} steps, sync every "
          f"{args.md_lb_every}, CPU-second loads, medians of {args.runs}")
    base = statistics.median(r["ms"] for r in res[None])
    for strategy in strategies:
        t = [r["ms"] for r in res[strategy]]
        med = statistics.median(t)
        line = f"  {strategy or 'no balancing':16} {med:7.1f} ms/step ({min(t):.1f}-{max(t):.1f})"
        if strategy:
            loads = [r["load"] for r in res[strategy] if r["load"]]
            line += (f"; speed-up {base / med:.2f}x (target >= 1.25); "
                     f"{statistics.median(r['migrations'] for r in res[strategy]):.0f} "
                     f"migrations, {statistics.median(r['lb_s'] for r in res[strategy]):.2f} s "
                     "in LB steps")
            if loads:
                line += (f"; max/avg PE load {statistics.median(x[0] for x in loads):.2f} "
                         f"before, {statistics.median(x[1] for x in loads):.2f} after")
        print(line)
    sums = {r["checksum"] for rs in res.values() for r in rs}
    print(f"  checksums {'all equal' if len(sums) == 1 else 'DIFFER: ' + ', '.join(sums)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--lb-every", type=int, default=10)
    ap.add_argument("--speed", type=float, default=0.5, help="cells per iteration the patch "
                    "moves on each axis")
    ap.add_argument("--spot", type=float, help="side of the patch, cells (default n/2)")
    ap.add_argument("--heat", type=int, default=8, help="work factor in the patch")
    ap.add_argument("--lb", action="append", help="strategy to compare (repeat the option; "
                    "default: greedy_refine and refine)")
    ap.add_argument("--pairs", default="stencil,leanmd", help="which pairs to run")
    ap.add_argument("--md-cells", type=int, default=4, help="LeanMD cells per dimension")
    ap.add_argument("--md-atoms", type=int, default=1000, help="LeanMD atoms per cell")
    ap.add_argument("--md-cutoff", type=float, default=10.5)
    ap.add_argument("--md-steps", type=int, default=60)
    ap.add_argument("--md-lb-every", type=int, default=10)
    ap.add_argument("--md-lb", action="append", help="LeanMD strategy to compare (repeat; "
                    "default: greedy_refine and refine)")
    args = ap.parse_args()
    pairs = args.pairs.split(",")
    if "leanmd" in pairs:
        leanmd_pair(args)
    if "stencil" not in pairs:
        return
    strategies: list[str | None] = [None, *(args.lb or ["greedy_refine", "refine"])]
    res: dict[str | None, list[dict]] = {s: [] for s in strategies}
    for k in range(args.runs):
        for strategy in strategies:
            res[strategy].append(run(args, strategy))
            print(f"stencil run {k + 1}/{args.runs} {strategy or 'no LB'}: "
                  f"{res[strategy][-1]['ms']:.2f} ms/iteration", file=sys.stderr, flush=True)
    print(f"stencil with a moving hot spot: {res[None][0]['what']}; 2 PEs, {args.iters} "
          f"iterations, sync every {args.lb_every}, CPU-second loads, medians of {args.runs}")
    base = statistics.median(r["ms"] for r in res[None])
    for strategy in strategies:
        t = [r["ms"] for r in res[strategy]]
        ideal = statistics.median(r["ideal"] for r in res[strategy])
        med = statistics.median(t)
        label = strategy or "no balancing"
        line = (f"  {label:16} {med:7.2f} ms/iter ({min(t):.2f}-{max(t):.2f}), perfect "
                f"balance of its work {ideal:.2f} ms")
        if strategy is not None:
            line += (f"; speed-up {base / med:.2f}x (target >= 1.35), "
                     f"{100 * (med / ideal - 1):.0f}% above perfect (target <= 15%); "
                     f"{statistics.median(r['migrations'] for r in res[strategy]):.0f} "
                     f"migrations, {statistics.median(r['lb_s'] for r in res[strategy]):.2f} s "
                     "in LB steps")
        print(line)

if __name__ == "__main__":
    main()
