"""What publishing live data costs (issue 29 item 1: at most 2%): ``examples/stencil2d.py``
under ``shoal run -n 2`` with live data on (``--live-period``, default 0.5 s) and off
(``--live-period 0``), in alternating rounds (the first of each round alternates too, so
the machine's slow spells hit both alike). Printed: the ms per iteration the program
reports, median (min-max) of each, the ratio on/off, the rows the "on" runs wrote, and the
load average before and after (the machine may be shared).

A shared machine's noise (10-30% between runs of the same job) hides a 2% difference, so it
also measures what a row costs directly: in a 1-PE job with K elements (each has run two
entry methods), the wall time of ``Publisher.tick`` (one row: the walk over the elements'
statistics, the JSON line, its write), as a share of the period. What publishing adds per
message is not in a row: a float comparison per drain of the queue and per idle turn, and
the transport's ``MPI_Get_count`` per envelope received (``bytes_received``).

Usage: python benchmarks/live_cost.py [--rounds 7] [--n 4096] [--blocks 4] [--iters 200]
       [--period 0.5] [--elements 16,1024,16384]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import shoal
from shoal.runtime.publish import COST_SHARE

ROOT = Path(__file__).resolve().parent.parent
STENCIL = ROOT / "examples" / "stencil2d.py"
PER_ITER = re.compile(r"([0-9.]+) ms per iteration")


def run(period: str, args: argparse.Namespace, registry: Path) -> tuple[float, int]:
    """One job: its ms per iteration, and the rows it published."""
    env = dict(os.environ, SHOAL_STATE_DIR=str(registry))
    before = set(registry.glob("jobs/*"))
    out = subprocess.run(
        [sys.executable, "-m", "shoal", "run", "-n", "2", "--timeout", "15min",
         "--live-period", period, str(STENCIL), "--n", str(args.n), "--blocks",
         str(args.blocks), "--iters", str(args.iters)],
        env=env, capture_output=True, text=True, timeout=1200)
    if out.returncode:
        raise RuntimeError(f"stencil2d failed:\n{out.stderr[-2000:]}")
    found = PER_ITER.search(out.stdout)
    if found is None:
        raise RuntimeError(f"no 'ms per iteration' in:\n{out.stdout}")
    rows = 0
    for entry in set(registry.glob("jobs/*")) - before:
        for f in entry.glob("pe-*.jsonl"):
            rows += f.read_text().count("\n")
    return float(found.group(1)), rows


class Cell(shoal.Chare):
    def a(self, done):
        self.contribute(None, None, done)

    def b(self):
        pass


def tick_job() -> None:
    """In a 1-PE ``shoal run`` job: time ``Publisher.tick`` with K elements (argv[2])."""
    from shoal.runtime.api import current

    async def main():
        k = int(sys.argv[2])
        cells = shoal.Array(Cell, k)
        done = shoal.future()
        cells.a(done)
        cells.b()
        await done
        await shoal.quiescence()
        rt = current()
        pub = rt.publisher
        assert pub.on, "no live data in this job"
        times = []
        for _ in range(200):
            cells.b()  # (every element's statistics change between two rows)
            await shoal.quiescence()
            t0 = time.perf_counter()
            pub.tick(time.perf_counter(), 0.0)
            times.append(time.perf_counter() - t0)
        print(json.dumps({"elements": k, "median": statistics.median(times),
                          "min": min(times), "max": max(times)}))

    shoal.start(main)


def tick_cost(k: int, registry: Path) -> dict:
    env = dict(os.environ, SHOAL_STATE_DIR=str(registry))
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "1", "--timeout",
                          "10min", "--live-period", "1000", __file__, "--tick-job", str(k)],
                         env=env, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"the tick job failed:\n{out.stderr[-2000:]}")
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("{")))


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--period", default="0.5", help="the live period of the 'on' runs (s)")
    ap.add_argument("--elements", default="16,1024,16384",
                    help="element counts of the cost of one row (empty: skip)")
    args = ap.parse_args()
    load0 = os.getloadavg()
    ticks = []
    if args.elements:
        with tempfile.TemporaryDirectory(prefix="live-cost-") as tmp:
            for k in (int(x) for x in args.elements.split(",")):
                ticks.append(tick_cost(k, Path(tmp)))
                print(f"one row with {k} elements: {ticks[-1]['median'] * 1e6:.0f} us",
                      flush=True)
    on: list[float] = []
    off: list[float] = []
    rows: list[int] = []
    with tempfile.TemporaryDirectory(prefix="live-cost-") as tmp:
        registry = Path(tmp)
        for k in range(args.rounds):
            order = ("on", "off") if k % 2 == 0 else ("off", "on")
            for which in order:
                ms, n = run(args.period if which == "on" else "0", args, registry)
                (on if which == "on" else off).append(ms)
                if which == "on":
                    rows.append(n)
                print(f"round {k + 1} {which:>3}: {ms:.2f} ms/iter"
                      + (f", {n} rows" if which == "on" else ""), flush=True)
    load1 = os.getloadavg()
    if on and off:
        ab(args, on, off, rows)
    period = float(args.period)
    for t in ticks:
        print(f"one row, {t['elements']:>6} elements: {t['median'] * 1e6:8.0f} us median "
              f"({t['min'] * 1e6:.0f}-{t['max'] * 1e6:.0f}), {t['median'] / period:.4%} of "
              f"a {args.period} s period"
              + (f" (the period stretches to {t['median'] / COST_SHARE:.2f} s)"
                 if t["median"] / COST_SHARE > period else ""))
    print(f"load average (1, 5, 15 min): before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} on {os.cpu_count()} cores")


def ab(args: argparse.Namespace, on: list[float], off: list[float], rows: list[int]) -> None:
    ratio = statistics.median(on) / statistics.median(off)
    print(f"stencil2d {args.n}^2, {args.blocks}x{args.blocks} blocks, {args.iters} "
          f"iterations, 2 PEs, {args.rounds} rounds")
    print(f"live data off            : {summary(off)} ms/iter")
    print(f"live data on ({args.period} s)   : {summary(on)} ms/iter, "
          f"{statistics.median(rows):.0f} rows a run")
    print(f"on/off (medians)         : {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--tick-job"]:
        tick_job()
    else:
        main()
