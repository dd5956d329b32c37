"""Moving many elements at once: batch migration against one migration per element, 2 PEs.

PE 0 holds ``--elements`` elements of 1 KiB state each and ``--messages`` messages queued
for them (sent by ``main``, which has not yet returned to the scheduler). Then either one
``migrate_many`` call moves every element to PE 1 (one pass over the queue, one envelope),
or one ``migrate_many`` call per element does (a pass over the queue each: what a balancer
moving elements one by one costs). Printed: seconds until PE 1 holds every element (a
priority message behind the migrations asks it), and the part of them PE 0 spent packing
and sending; medians (min-max) of ``--runs`` measurements in one job. Target (issue:
runtime architecture): batch under 0.5 s and at least 10x faster than single.

Usage: python benchmarks/runtime_migration.py [--elements 10000] [--messages 100000] [--runs 3]
(on N PEs: python benchmarks/runtime_migration.py --job under mpiexec -n 2)
"""

import argparse
import statistics
import subprocess
import sys
import time

import shoal
from shoal.runtime.context import current


def on_pe0(index, dims, npes):
    return 0


class Blob(shoal.Chare):
    def __init__(self):
        self.state = bytes(1024)
        self.got = 0

    def take(self, k):
        self.got += 1


class Census(shoal.Chare):
    """One per PE: how many elements of an array are here."""

    def count(self, cid):
        return len(current().colls[cid].local)


async def trial(census, elements: int, messages: int, batch: bool) -> tuple[float, float]:
    arr = shoal.Array(Blob, elements, map=on_pe0)
    for k in range(messages):
        arr[k % elements].take(k)
    rt = current()
    slots = list(rt.colls[arr.cid].local.values())
    t0 = time.perf_counter()
    if batch:
        rt.migration.migrate_many([(slot, 1) for slot in slots])
    else:
        for slot in slots:
            rt.migration.migrate_many([(slot, 1)])
    t1 = time.perf_counter()
    here = await census[1].count(arr.cid, ret=True, prio=-1)  # overtakes the moved messages
    t2 = time.perf_counter()
    assert here == elements, here
    await shoal.quiescence()  # PE 1 runs the messages before the next trial
    return t2 - t0, t1 - t0


def job(elements: int, messages: int, runs: int) -> None:
    async def main():
        census = shoal.Group(Census)
        res = {True: [], False: []}
        for _ in range(runs):
            for batch in (True, False):
                res[batch].append(await trial(census, elements, messages, batch))
        print(f"move {elements} elements of 1 KiB with {messages} messages queued, "
              f"PE 0 -> PE 1, {runs} runs")
        for batch, label in ((True, "batch (one migrate_many)"),
                             (False, "single (one call per element)")):
            total = [t for t, _ in res[batch]]
            send = [s for _, s in res[batch]]
            print(f"  {label:32} {statistics.median(total):8.3f} s "
                  f"({min(total):.3f}-{max(total):.3f}), of which packing and sending "
                  f"{statistics.median(send):.3f} s")
        ratio = (statistics.median(t for t, _ in res[False])
                 / statistics.median(t for t, _ in res[True]))
        print(f"  single/batch {ratio:.1f}x; targets: batch < 0.5 s, >= 10x")

    shoal.start(main)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--job", action="store_true", help="run as a rank (under mpiexec)")
    args = ap.parse_args()
    if args.job:
        job(args.elements, args.messages, args.runs)
        return
    from shoal.launch import mpiexec

    subprocess.run([*mpiexec(), "-n", "2", sys.executable, __file__, "--job", "--elements",
                    str(args.elements), "--messages", str(args.messages), "--runs",
                    str(args.runs)], check=True, timeout=3600)


if __name__ == "__main__":
    main()
