"""The charm4py side of benchmarks/runtime_messaging.py (launched there with
``python -m charmrun.start +p2 messaging_charm4py.py REPEAT``): same patterns, same sizes."""

import json
import sys
import time

import numpy as np
from charm4py import Array, Chare, Future, charm

PINGS = 2000
BURST = 100_000
BIG_PINGS = 200
MIB = np.ones(1 << 17)


class Pong(Chare):
    def start(self, n, payload, fut):
        self.n, self.count, self.fut = n, 0, fut
        self.t0 = time.perf_counter()
        self.thisProxy[1].ping(payload)

    def ping(self, payload):
        self.thisProxy[0].pong(payload)

    def pong(self, payload):
        self.count += 1
        if self.count == self.n:
            self.fut((time.perf_counter() - self.t0) / (2 * self.n))
        else:
            self.thisProxy[1].ping(payload)

    def burst(self, n, fut):
        other = self.thisProxy[1]
        other.expect(n, fut)
        for k in range(n):
            other.take(k)

    def expect(self, n, fut):
        self.n, self.count, self.fut = n, 0, fut

    def take(self, k):
        self.count += 1
        if self.count == self.n:
            self.fut(time.perf_counter())

    def where(self):
        return charm.myPe()


def main(args):
    repeat = int(args[1])
    arr = Array(Pong, 2)
    assert arr[0].where(ret=True).get() != arr[1].where(ret=True).get()
    out = {"latency": [], "rate": [], "big": []}
    for _ in range(repeat):
        fut = Future()
        arr[0].start(PINGS, b"12345678", fut)
        out["latency"].append(fut.get())
        fut = Future()
        t0 = time.perf_counter()
        arr[0].burst(BURST, fut)
        out["rate"].append(BURST / (fut.get() - t0))
        fut = Future()
        arr[0].start(BIG_PINGS, MIB, fut)
        out["big"].append(fut.get())
    print(json.dumps(out))
    sys.stdout.flush()
    charm.exit()


charm.start(main)
