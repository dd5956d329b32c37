"""Control points tuned by the runtime's controller (issue 31 item 1; Acun14 III-E, Fig. 6),
against the best fixed value a sweep finds, on 2 PEs.

Two parts, each run ``--runs`` times (medians and min-max over runs, the load average):

- ``pipeline``: examples/control_pipeline.py, the stages of a pipelined ping (Fig. 6's
  benchmark). A sweep runs every candidate fixed (``--fixed S``, ``--sweep-iters``
  iterations, median time per iteration); then one tuned run (``--iters``) starts from 1
  stage: the value it settles on, how many iterations it took, and its median time over the
  last quarter of the run (settled) against the best fixed one; the trajectory of the last
  run, as Fig. 6 draws it.
- ``lb``: examples/stencil_hotspot.py, the moving hot spot, balanced every k iterations:
  the sweep runs ``--lb-every k`` for every candidate of the built-in point ``lb_every``,
  and no balancing at all; the tuned run syncs every iteration and lets the controller
  choose every how many sync points to balance (``shoal run --tune lb_every``). The issue's
  target: the value chosen is within 10% of the best fixed period (its time in the sweep
  over the best time in the sweep); the tuned run's whole time per iteration (exploration
  included) is printed too.

    python benchmarks/control_points.py --runs 3
    python benchmarks/control_points.py --part lb --runs 1 --lb-iters 300
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOAL = [sys.executable, "-c", "from shoal.cli.main import main; main()"]
PIPE = ROOT / "examples" / "control_pipeline.py"
HOT = ROOT / "examples" / "stencil_hotspot.py"
STAGES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
EVERY = (1, 2, 4, 8, 16, 32, 64)


def run(args: list[str], timeout: float = 1800) -> str:
    out = subprocess.run([*SHOAL, "run", "-n", "2", "--timeout", f"{int(timeout)}s", *args],
                         capture_output=True, text=True, timeout=timeout + 60)
    if out.returncode != 0:
        raise RuntimeError(f"shoal run {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def spread(values: list[float]) -> str:
    return (f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
            if values else "-")


def pipeline(runs: int, sweep_iters: int, iters: int, floats: int) -> None:
    sweep: dict[int, list[float]] = {s: [] for s in STAGES}
    chosen, settled_ms, settled_at, whole = [], [], [], []
    last = None
    for r in range(runs):
        print(f"pipeline run {r + 1}/{runs}: sweep of {len(STAGES)} values...", flush=True)
        for s in STAGES:
            job = json.loads(run([str(PIPE), "--fixed", str(s), "--iters", str(sweep_iters),
                                  "--floats", str(floats), "--json"]).splitlines()[-1])
            sweep[s].append(statistics.median(job["times"][2:]) * 1e3)
        print("  tuned run...", flush=True)
        job = json.loads(run([str(PIPE), "--iters", str(iters), "--floats", str(floats),
                              "--json"]).splitlines()[-1])
        chosen.append(job["points"]["stages"])
        times = job["times"]
        settled_ms.append(statistics.median(times[-len(times) // 4:]) * 1e3)
        whole.append(statistics.mean(times) * 1e3)
        first = [d["iteration"] for d in job["decisions"] if d["decision"] == "settled"]
        settled_at.append(first[0] if first else float("nan"))
        last = job
    med = {s: statistics.median(v) for s, v in sweep.items()}
    best = min(med, key=med.__getitem__)
    print(f"\npipeline: {floats} values per iteration, 2 PEs; sweep of fixed stages "
          f"({sweep_iters} iterations each, median ms per iteration; over {runs} run(s)):")
    for s in STAGES:
        print(f"  stages {s:4d}: {spread(sweep[s])}{'   <- best' if s == best else ''}")
    value = statistics.median_low(chosen)
    print(f"tuned ({iters} iterations from 1 stage): settled on {chosen} (first settled at "
          f"iteration {settled_at}); last quarter {spread(settled_ms)} ms per iteration, "
          f"whole run {spread(whole)}; the chosen value's sweep time / the best's: "
          f"{med[value] / med[best]:.2f}")
    if last is not None:
        print("trajectory of the last tuned run (Fig. 6's form): iterations, stages, "
              "median ms")
        rows = last["history"]
        start = 0
        for k in range(1, len(rows) + 1):
            if k == len(rows) or rows[k]["stages"] != rows[start]["stages"]:
                ms = statistics.median(x["seconds"] for x in rows[start:k]) * 1e3
                print(f"  {rows[start]['iteration']:4d}-{rows[k - 1]['iteration']:<4d} "
                      f"{rows[start]['stages']:5d} {ms:8.2f}")
                start = k


def _ms(stdout: str) -> float:
    m = re.search(r"([\d.]+) ms per iteration;", stdout)
    if m is None:
        raise RuntimeError(f"no time per iteration in:\n{stdout[-2000:]}")
    return float(m.group(1))


def lb(runs: int, iters: int, n: int, blocks: int) -> None:
    common = [str(HOT), "--iters", str(iters), "--n", str(n), "--blocks", str(blocks)]
    sweep: dict[object, list[float]] = {k: [] for k in (*EVERY, "none")}
    chosen, tuned = [], []
    for r in range(runs):
        print(f"lb run {r + 1}/{runs}: sweep of {len(EVERY)} periods and none...", flush=True)
        for k in EVERY:
            sweep[k].append(_ms(run([*common, "--lb-every", str(k)])))
        sweep["none"].append(_ms(run([*common, "--no-sync"])))
        print("  tuned run...", flush=True)
        out = run(["--tune", "lb_every", *common, "--lb-every", "1"])
        tuned.append(_ms(out))
        m = re.search(r"control point lb_every: (\d+) in force", out)
        chosen.append(int(m.group(1)) if m else -1)
    med = {k: statistics.median(v) for k, v in sweep.items()}
    best = min(EVERY, key=med.__getitem__)
    print(f"\nhot-spot stencil {n}x{n}, {blocks}x{blocks} blocks, {iters} iterations, 2 PEs: "
          f"ms per iteration, over {runs} run(s):")
    for k in (*EVERY, "none"):
        label = f"lb every {k:>2}" if k != "none" else "no balancing"
        print(f"  {label}: {spread(sweep[k])}{'   <- best' if k == best else ''}")
    value = statistics.median_low(chosen)
    ratio = med[value] / med[best] if value in med else float("nan")
    print(f"tuned (--tune lb_every, a sync point every iteration): chose {chosen}; the "
          f"chosen period's sweep time / the best's: {ratio:.2f} (target <= 1.10); the "
          f"tuned run's own time per iteration, exploring included: {spread(tuned)} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("pipeline", "lb", "all"), default="all")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sweep-iters", type=int, default=30)
    ap.add_argument("--iters", type=int, default=200, help="iterations of a tuned pipeline")
    ap.add_argument("--floats", type=int, default=1 << 20)
    ap.add_argument("--lb-iters", type=int, default=400)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=8)
    args = ap.parse_args()
    load = os.getloadavg()
    if args.part in ("pipeline", "all"):
        pipeline(args.runs, args.sweep_iters, args.iters, args.floats)
    if args.part in ("lb", "all"):
        lb(args.runs, args.lb_iters, args.n, args.blocks)
    print(f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after, on "
          f"{os.cpu_count()} cores")


if __name__ == "__main__":
    main()
