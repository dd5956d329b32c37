"""The runtime's own Python cost per message, in one process (no MPI traffic, so a shared
machine disturbs it far less than a ping-pong): a PE on MPI_COMM_SELF with one element.

- receive and run: an INVOKE envelope as it comes off the network, through the handler,
  the ordering check and the entry method (the path every message from another PE takes);
- local send: ``proxy[0].take(k)`` to an element of the same PE, up to its queue entry.

Nanoseconds per message, median (min-max) of 7 runs of 100,000. Works against the API of
earlier commits too (benchmarks/runtime_ab.py runs it on both versions).

Usage: python benchmarks/runtime_percall.py [--json] [--n 100000] [--repeat 7]
(Under ``valgrind --tool=callgrind``, two runs with different ``--n`` give instructions per
message, which a busy machine does not change at all.)
"""

import argparse
import json
import statistics
import time

from mpi4py import MPI

import shoal
from shoal.runtime.context import set_current

N = 100_000


class Counter(shoal.Chare):
    def __init__(self):
        self.n = 0

    def take(self, k):
        self.n += 1


def measure(n: int = N, repeat: int = 7) -> dict[str, list[float]]:
    rt = shoal.Runtime(MPI.COMM_SELF)
    set_current(rt)
    try:
        create = getattr(rt, "location", rt).create  # (before the managers: rt.create)
        proxy = create("array", Counter, (1,), None, (), "block")
        on_invoke = getattr(rt, "on_invoke", None) or rt._on_invoke
        slot = rt.colls[proxy.cid].local[(0,)]
        envs = [(0, proxy.cid, (0,), "take", (k,), None, (-1, 1), k, 0, None, 1, 0)
                for k in range(n)]
        receive, send = [], []
        for _ in range(repeat):
            slot.expected.clear()
            t = time.perf_counter()
            for env in envs:
                rt.direct = True
                on_invoke(env)
            receive.append((time.perf_counter() - t) / n * 1e9)
            rt.direct = False
            element = proxy[0]
            t = time.perf_counter()
            for k in range(n):
                element.take(k)
            send.append((time.perf_counter() - t) / n * 1e9)
            getattr(rt, "queue", rt).fifo.clear()
        return {"receive": receive, "send": send}
    finally:
        set_current(None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--n", type=int, default=N, help="messages per measurement")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    res = measure(args.n, args.repeat)
    if args.json:
        print(json.dumps(res))
        return
    for key, label in (("receive", "receive and run"), ("send", "local send")):
        v = res[key]
        print(f"{label:16} {statistics.median(v):6.0f} ns/message ({min(v):.0f}-{max(v):.0f})")


if __name__ == "__main__":
    main()
