"""Barnes-Hut (Acun14, Section IV-C, Fig. 12): what over-decomposition and ORB balancing buy
a tree code on clustered particles. The paper's mini-app, 500 million particles on Blue
Waters, ran 40% faster with tree pieces over-decomposed and balanced by ORB than with one
object per process ("500m" against "500m_NO"); here examples/barneshut.py (4 Plummer
spheres, masses 5:1) runs on ``--pes`` PEs in three variants:

- one tree piece per PE, no balancing (the paper's ``_NO``);
- ``--per-pe`` pieces per PE, no balancing;
- ``--per-pe`` pieces per PE, the balancer (``--lb``, default orb) every ``--lb-every`` steps.

The figure is the time per step from the first balancing point on (step ``--lb-every``: the
same steps in every variant), the median of ``--runs`` interleaved jobs with min-max, beside
the PE imbalance (max/avg) before the first step and after the last one the balancer
measured. Every job's final state must have the same checksum (the forces are summed in a
fixed order wherever the pieces are). The balancer weighs CPU seconds (``--cpu-stats``), so
another process on the machine slows a job without misleading the balancer; the load average
is printed, since it is part of the figure on a shared machine.

Usage: python benchmarks/barneshut.py [--pes 2] [--n 20000] [--steps 20] [--per-pe 16]
       [--lb-every 5] [--lb orb] [--decomposition sfc] [--runs 3]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "examples" / "barneshut.py"
STEP = re.compile(r"from step \d+ on: ([\d.]+) ms per step")
ALL = re.compile(r"theta [\d.]+, .*?: ([\d.]+) ms per step; (\d+) piece migrations")
IMBALANCE = re.compile(r"max/avg PE load ([\d.]+) before the first LB step, ([\d.]+) after")
CHECKSUM = re.compile(r"checksum (\S+)")
PAPER = ("paper (Fig. 12, 500M particles, Blue Waters): over-decomposed + ORB 40% faster than "
         "1 object per process")


def variants(a: argparse.Namespace) -> dict[str, list[str]]:
    base = [sys.executable, "-m", "shoal", "run", "-n", str(a.pes), str(APP), "--n", str(a.n),
            "--steps", str(a.steps), "--decomposition", a.decomposition, "--cpu-stats",
            "--report-every", str(a.lb_every)]
    many = ["--pieces", str(a.per_pe * a.pes)]
    return {
        "1 piece per PE, no LB": [*base, "--pieces", str(a.pes)],
        f"{a.per_pe} pieces per PE, no LB": [*base, *many],
        f"{a.per_pe} pieces per PE, {a.lb} every {a.lb_every}": [
            *base, *many, "--lb-every", str(a.lb_every), "--lb", a.lb],
    }


def run_one(cmd: list[str]) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    out = done.stdout
    step, whole, checksum = STEP.search(out), ALL.search(out), CHECKSUM.search(out)
    if step is None or whole is None or checksum is None:
        raise SystemExit(f"no result lines from {' '.join(cmd)}:\n{out[-2000:]}")
    imb = IMBALANCE.search(out)
    return {"ms": float(step[1]), "migrations": int(whole[2]), "checksum": checksum[1],
            "before": float(imb[1]) if imb else None, "after": float(imb[2]) if imb else None}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pes", type=int, default=2)
    ap.add_argument("--n", type=int, default=20000, help="particles")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--per-pe", type=int, default=16, help="tree pieces per PE, over-decomposed")
    ap.add_argument("--lb-every", type=int, default=5)
    ap.add_argument("--lb", default="orb")
    ap.add_argument("--decomposition", choices=("sfc", "oct"), default="sfc")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if not 0 < a.lb_every < a.steps:
        ap.error("--lb-every must lie between 0 and --steps (the figure starts there)")
    cmds = variants(a)
    rows: dict[str, list[dict]] = {name: [] for name in cmds}
    load0 = os.getloadavg()[0]
    for run in range(a.runs):
        for name, cmd in cmds.items():
            print(f"run {run + 1}/{a.runs}: {name}", file=sys.stderr, flush=True)
            rows[name].append(run_one(cmd))
    sums = {r["checksum"] for got in rows.values() for r in got}
    if len(sums) != 1:
        raise SystemExit(f"the variants ended in different states: checksums {sorted(sums)}")
    print(f"Barnes-Hut, {a.n} particles in 4 Plummer spheres, {a.pes} PEs, {a.decomposition} "
          f"decomposition; ms per step from step {a.lb_every} on, median (min-max) of "
          f"{a.runs} runs")
    first = statistics.median(r["ms"] for r in next(iter(rows.values())))
    for name, got in rows.items():
        ms = [r["ms"] for r in got]
        imb = [(r["before"], r["after"]) for r in got if r["before"] is not None]
        say = (f"; max/avg {statistics.median(b for b, _ in imb):.2f} -> "
               f"{statistics.median(x for _, x in imb):.2f}, "
               f"{statistics.median(r['migrations'] for r in got):.0f} migrations") if imb else ""
        print(f"  {name:34s} {spread(ms)}  x{first / statistics.median(ms):.2f} of 1 per PE{say}")
    print(PAPER)
    print(f"every job ended in the same state (checksum {sums.pop()}); load average "
          f"{load0:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
