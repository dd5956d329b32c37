"""Temperature control with and without load balancing (Acun14, Section III-C, Fig. 4), on
EMULATED hardware: no DVFS governor or temperature sensor is reachable in a VM, so each PE's
frequency is emulated by duty-cycling (a PE at f sleeps t (1 - f) / f after t seconds of
entry methods) and its temperature by a first-order RC model driven by its measured
utilisation (shoal.runtime.power: 5 W static + 35 W x f^3 x utilisation, R 0.8-1.2 K/W by
PE, C 8 J/K; room 74 F = 23.3 C as the paper's CRAC, threshold 50 C). Every temperature
printed here is the model's, not a sensor's.

The application: examples/power_jacobi.py, a uniform 2-D Jacobi (8x8 blocks, 2048^2 cells)
on 2 PEs. The cores differ in cooling (R), so under DVFS the hotter one runs slower and a
tightly coupled run waits for it; balancing by frequency gives it less work. Variants, as
in Fig. 4:

    Base         the thermal model alone (--power-monitor): nominal frequency, no control
    Naive_DVFS   the controller (--power-threshold 50C, a reading per second), no balancing
    LB_10s       the controller and a balancing step every 10 s (--lb-period 10s)
    LB_5s        ... every 5 s
    MetaTemp     the controller and lb=auto: an AtSync point every --sync-every iterations,
                 the MetaBalancer balancing when it pays (Menon et al., CLUSTER 2013)

For each: wall time, the timing penalty (time / Base's median time - 1), the maximum
emulated temperature over PEs, the mean emulated frequency of each PE, LB steps and
migrations; medians (min-max) over --runs rounds, the variants interleaved in each round.

``--sleep-work MS`` makes each block's work a sleep of MS ms inside its entry method (see the
example): the PE is held as by computing, but no CPU is taken, so the figures do not move
with whatever else runs on the machine (the runtime's own work still does).

Usage: python benchmarks/power.py [--runs 3] [--iters 600] [--pes 2] [--sleep-work MS]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from shoal.launch import mpiexec

APP = Path(__file__).resolve().parent.parent / "examples" / "power_jacobi.py"
THRESHOLD = 50.0

VARIANTS = {
    "Base": ({"SHOAL_POWER_MONITOR": "1"}, 0),
    "Naive_DVFS": ({"SHOAL_POWER_THRESHOLD": "50C"}, 0),
    "LB_10s": ({"SHOAL_POWER_THRESHOLD": "50C", "SHOAL_LB_PERIOD": "10"}, 0),
    "LB_5s": ({"SHOAL_POWER_THRESHOLD": "50C", "SHOAL_LB_PERIOD": "5"}, 0),
    "MetaTemp": ({"SHOAL_POWER_THRESHOLD": "50C", "SHOAL_LB": "auto"}, None),
}

# The paper gives Fig. 4 as bars without numbers in its text: only the shape is known.
PAPER = ("the paper (Acun14 Fig. 4) prints no numbers, only the bars' shape: timing "
         "penalty Naive_DVFS > LB_10s > LB_5s ~ MetaTemp; maximum temperature under the "
         "50 C threshold for all but Base")


def run(name: str, args: argparse.Namespace, out: Path) -> dict:
    env_extra, sync = VARIANTS[name]
    sync_every = args.sync_every if sync is None else sync
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_LB",
                                                                     "SHOAL_POWER"))}
    env.update(env_extra)
    cmd = [*mpiexec(), "-n", str(args.pes), sys.executable, str(APP), "--iters",
           str(args.iters), "--sync-every", str(sync_every), "--json", str(out),
           "--sleep-work", str(args.sleep_work)]
    subprocess.run(cmd, env=env, check=True, timeout=1800, capture_output=True, text=True)
    return json.loads(out.read_text())


def span(values: list[float], fmt: str = "{:.1f}") -> str:
    return (f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-"
            f"{fmt.format(max(values))})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--pes", type=int, default=2)
    ap.add_argument("--sync-every", type=int, default=10,
                    help="MetaTemp's iterations between AtSync points")
    ap.add_argument("--sleep-work", type=float, default=0.0, metavar="MS",
                    help="emulated work: each block sleeps MS ms per iteration instead of "
                         "its extra sweeps (timings free of the machine's other load)")
    ap.add_argument("--only", nargs="*", choices=list(VARIANTS), help="run these only")
    args = ap.parse_args()
    names = args.only or list(VARIANTS)
    res: dict[str, list[dict]] = {n: [] for n in names}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for name in names:
                d = run(name, args, Path(tmp) / f"{name}-{r}.json")
                res[name].append(d)
                print(f"  run {r + 1} {name:10} {d['elapsed']:6.1f} s, max "
                      f"{max(d['max_temp']):.1f} C, mean f "
                      f"{'/'.join(f'{f:.2f}' for f in d['mean_freq'])}, "
                      f"{len(d['lb'])} LB steps", flush=True)
                loads.append(os.getloadavg()[0])
    work = (f"emulated work of {args.sleep_work:g} ms per block and iteration (a sleep)"
            if args.sleep_work else "numpy sweeps")
    print(f"\nEMULATED power (shoal.runtime.power): {args.pes} PEs, Jacobi 2048^2 in 8x8 "
          f"blocks, {work}, {args.iters} iterations, threshold {THRESHOLD:g} C, room 23.3 C; "
          f"medians (min-max) of {args.runs} runs; load average (1 min) during the runs "
          f"{min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} cores")
    base = statistics.median(d["elapsed"] for d in res["Base"]) if "Base" in res else None
    print(f"  {'variant':11} {'time, s':>20} {'penalty, %':>22} {'max temp, C':>22} "
          f"{'mean f per PE':>16} {'LB steps':>9} {'moved':>6}")
    for name, rows in res.items():
        t = [d["elapsed"] for d in rows]
        pen = "-" if base is None else span([100 * (x / base - 1) for x in t])
        temp = span([max(d["max_temp"]) for d in rows])
        freqs = "/".join(f"{statistics.median(d['mean_freq'][p] for d in rows):.2f}"
                         for p in range(args.pes))
        steps = statistics.median(len(d["lb"]) for d in rows)
        moved = statistics.median(sum(s["migrations"] for s in d["lb"]) for d in rows)
        print(f"  {name:11} {span(t):>20} {pen:>22} {temp:>22} {freqs:>16} {steps:>9g} "
              f"{moved:>6g}")
    print(f"  {PAPER}")


if __name__ == "__main__":
    main()
