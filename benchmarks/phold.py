"""PHOLD under YAWNS (examples/phold.py, Acun14 IV-E and Fig. 15b) on 2 PEs with 40 LPs per
PE: the event rate with aggregation (shoal.Aggregator) against direct sends, jobs
interleaved, medians (min-max) of ``--runs`` each, at two event loads. Targets (issue 15):
with 256 initial events per LP aggregation at least 2x direct sending; with 16 per LP not
slower (ratio >= 1). Every run must match its serial reference (the example checks it).

Usage: python benchmarks/phold.py [--runs 5] [--lps 40] [--loads 256:10,16:100]
       [--remote 0.5] [--lookahead 0.5]
(``--loads``: initial events per LP and end time of each load, comma-separated.)
"""

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

from shoal.launch import mpiexec

APP = Path(__file__).resolve().parent.parent / "examples" / "phold.py"
LINE = re.compile(r"(\d+) events committed in ([\d.]+) s: (\d+) events/s; (\d+) windows")
TARGETS = {256: 2.0, 16: 1.0}  # aggregated / direct event rate, by initial events per LP


def run(args: argparse.Namespace, events: int, end: float, aggregate: bool) -> dict:
    """One job on 2 PEs: events per second, events committed, windows, and whether the run
    matched its serial reference."""
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(APP), "--lps", str(args.lps),
           "--events", str(events), "--end-time", str(end), "--remote", str(args.remote),
           "--lookahead", str(args.lookahead)]
    if aggregate:
        cmd.append("--aggregate")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True).stdout
    m = LINE.search(out)
    if m is None:
        raise RuntimeError(f"unexpected output: {out}")
    return {"rate": float(m.group(3)), "events": int(m.group(1)), "windows": int(m.group(4)),
            "ok": "per-LP counts ok" in out and "order per LP ok; conservation ok" in out}


def load(args: argparse.Namespace, events: int, end: float) -> None:
    """Direct and aggregated runs of one load, interleaved; their medians and the ratio."""
    res: dict[bool, list[dict]] = {False: [], True: []}
    for k in range(args.runs):
        for aggregate in (False, True):
            res[aggregate].append(run(args, events, end, aggregate))
            print(f"{events} events/LP run {k + 1}/{args.runs} "
                  f"{'aggregated' if aggregate else 'direct'}: "
                  f"{res[aggregate][-1]['rate']:.0f} events/s", file=sys.stderr, flush=True)
    first = res[False][0]
    print(f"PHOLD, 2 PEs x {args.lps} LPs, {events} initial events per LP, end time {end:g} "
          f"({first['events']} events, {first['windows']} windows), remote {args.remote:g}, "
          f"lookahead {args.lookahead:g}, medians of {args.runs}")
    med = {}
    for aggregate in (False, True):
        rates = [r["rate"] for r in res[aggregate]]
        med[aggregate] = statistics.median(rates)
        print(f"  {'aggregated' if aggregate else 'direct':10} {med[aggregate]:10.0f} events/s "
              f"({min(rates):.0f}-{max(rates):.0f})")
    target = TARGETS.get(events)
    line = f"  aggregated / direct {med[True] / med[False]:.2f}x"
    if target is not None:
        line += f" (target >= {target:g})"
    print(line)
    bad = sum(not r["ok"] for rs in res.values() for r in rs)
    print(f"  serial reference: {'every run matched' if not bad else f'{bad} runs DIFFER'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lps", type=int, default=40, help="LPs per PE")
    ap.add_argument("--loads", default="256:10,16:100",
                    help="initial events per LP and end time of each load (EVENTS:END,...)")
    ap.add_argument("--remote", type=float, default=0.5)
    ap.add_argument("--lookahead", type=float, default=0.5)
    args = ap.parse_args()
    for spec in args.loads.split(","):
        events, _, end = spec.partition(":")
        load(args, int(events), float(end))


if __name__ == "__main__":
    main()
