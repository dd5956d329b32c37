"""One AtSync load-balancing step: 10,000 elements of 4 KiB on 2 PEs (``--pes``), all
starting on PE 0.

Every element calls ``at_sync()``; the runtime balances (gathers the database and runs the
strategy; with ``--lb distributed``, GrapevineLB over messages, no gather), moves elements
off PE 0 and calls ``resume_from_sync()`` on each, which contributes to a reduction.
Printed per run: the step as the runtime records it (trigger to the last arrival), the
strategy's part, and the whole round trip from the broadcast that starts the iteration to
the reduction after the resume; medians (min-max) of ``--runs`` steps in one job. Target
(issue: load balancing): the step <= 0.5 s (10,000 elements on 2 PEs).

Usage: python benchmarks/lb_step.py [--elements 10000] [--bytes 4096] [--runs 3] [--pes 2]
[--lb greedy_refine]
"""

import argparse
import statistics
import subprocess
import sys
import time

import shoal


def on_pe0(index, dims, npes):
    return 0


class Blob(shoal.Chare):
    def __init__(self, nbytes, fut):
        self.state = bytes(nbytes)
        self.fut = fut

    def go(self, fut):
        self.fut = fut
        self.at_sync()

    def resume_from_sync(self):
        self.contribute(shoal.my_pe(), shoal.Reducer.sum, self.fut)


def job(elements: int, nbytes: int, runs: int, strategy: str) -> None:
    async def main():
        arr = shoal.Array(Blob, elements, args=(nbytes, None), map=on_pe0, at_sync=True)
        rounds = []
        for _ in range(runs):
            fut = shoal.future()
            t0 = time.perf_counter()
            arr.go(fut)
            on_pe1 = await fut
            rounds.append(time.perf_counter() - t0)
        steps = shoal.lb_history()
        first = steps[0]
        print(f"{elements} elements of {nbytes} B on {shoal.num_pes()} PEs, strategy "
              f"{strategy}: {first['migrations']} moved in the first step "
              f"({first['bytes_moved'] / 2**20:.1f} MiB), sum of their PEs after the last "
              f"{on_pe1}")
        for label, values in (("step (trigger to last arrival)",
                               [s["total_time"] for s in steps]),
                              ("  of which the strategy", [s["strategy_time"] for s in steps]),
                              ("iteration round trip", rounds)):
            print(f"  {label:32} {statistics.median(values):7.3f} s "
                  f"({min(values):.3f}-{max(values):.3f})")
        print("  target: the first step (the one that moves) <= 0.5 s; it took "
              f"{first['total_time']:.3f} s")

    shoal.start(main, lb=strategy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=10_000)
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lb", default="greedy_refine")
    ap.add_argument("--pes", type=int, default=2)
    ap.add_argument("--job", action="store_true", help="run as a rank (under mpiexec)")
    args = ap.parse_args()
    if args.job:
        job(args.elements, args.bytes, args.runs, args.lb)
        return
    from shoal.launch import mpiexec

    subprocess.run([*mpiexec(), "-n", str(args.pes), sys.executable, __file__, "--job",
                    "--elements", str(args.elements), "--bytes", str(args.bytes), "--runs",
                    str(args.runs), "--lb", args.lb], check=True, timeout=1800)


if __name__ == "__main__":
    main()
