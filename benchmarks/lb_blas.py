"""Balancing a program of numpy matrix products on 2 PEs, with shoal's default BLAS
threads (the node's cores shared by its PEs: 1 each on 2 cores) and with every PE's
OpenBLAS on all cores (``OPENBLAS_NUM_THREADS`` set to the core count: what a PE got
before, issue 26 item 9).

16 elements, each a 256x256 matrix product per iteration, the first 4 doing 10 of them:
block mapping puts the heavy ones on PE 0; an AtSync point every 10 iterations. Per
setting, ms per iteration without balancing (``--lb none``) and with ``greedy_refine`` at
the AtSync points; the speed-up is their ratio (target >= 1.5x with the defaults). Medians
of ``--runs`` jobs, min-max.

Usage: python benchmarks/lb_blas.py [--runs 3] [--job]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import shoal

N, ITERS, SIZE, HEAVY, SYNC = 16, 100, 256, 10, 10


class Block(shoal.Chare):
    def __init__(self, done):
        self.a = np.random.default_rng(self.thisIndex[0]).random((SIZE, SIZE))
        self.done, self.it = done, 0

    def step(self):
        for _ in range(HEAVY if self.thisIndex[0] < 4 else 1):
            self.a = np.tanh(self.a @ self.a)
        self.it += 1
        if self.it == ITERS:
            self.contribute(None, shoal.Reducer.nop, self.done)
        elif self.it % SYNC == 0:
            self.at_sync()
        else:
            self.thisProxy[self.thisIndex].step()

    def resume_from_sync(self):
        self.step()


async def main():
    done = shoal.future()
    t0 = time.perf_counter()
    shoal.Array(Block, N, args=(done,), at_sync=True).step()
    await done
    steps = [{k: r[k] for k in ("before", "after_predicted", "migrations", "total_time")}
             for r in shoal.lb_history()]
    print(json.dumps({"ms": (time.perf_counter() - t0) / ITERS * 1e3, "steps": steps}))


def job(lb: str, env: dict) -> float:
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--lb", lb, __file__, "--job"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("{")))["ms"]


def report() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    cores = str(len(os.sched_getaffinity(0)))
    settings = {"shoal's default threads": base,
                f"OPENBLAS_NUM_THREADS={cores}": {**base, "OPENBLAS_NUM_THREADS": cores}}
    res: dict = {s: {"none": [], "greedy_refine": []} for s in settings}
    for _ in range(args.runs):
        for name, env in settings.items():
            for lb in ("none", "greedy_refine"):
                res[name][lb].append(job(lb, env))
    print(f"2 PEs on {cores} cores, ms per iteration: median (min-max) of {args.runs} jobs")
    for name, r in res.items():
        none, lb = statistics.median(r["none"]), statistics.median(r["greedy_refine"])
        print(f"{name:28} none {none:6.1f} ({min(r['none']):.1f}-{max(r['none']):.1f})  "
              f"greedy_refine {lb:6.1f} ({min(r['greedy_refine']):.1f}-"
              f"{max(r['greedy_refine']):.1f})  speed-up {none / lb:.2f}x")
    print("target: speed-up >= 1.5x with shoal's default threads")


if __name__ == "__main__":
    if "--job" in sys.argv:
        shoal.start(main)
    else:
        report()
