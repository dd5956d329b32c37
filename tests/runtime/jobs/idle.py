"""What a waiting PE costs its core, in counts (run by test_idle.py on 2 ranks):
``python idle.py NAME... [--shm BYTES]``.

Every poll of the network is counted (each asks MPI once for a message: the transport's
test of its posted receive is wrapped when a PE is pinned, which works on the compiled core
too), and each
PE's minor page faults come from ``getrusage``."""

import os
import resource

import numpy as np
from runner import main

import shoal
from shoal.runtime.context import current

POLLS = [0]


def _count_polls():
    """Count this PE's polls of the network from now on (once)."""
    net = current().net
    test = net._test
    if getattr(test, "counted", False):
        return

    def counted(*args):
        POLLS[0] += 1
        return test(*args)

    counted.counted = True
    net._test = counted

MIB = np.ones(1 << 17)  # 1 MiB of float64


class Bouncer(shoal.Chare):
    """Element i on PE i: a ping-pong of ``n`` round trips from element 0."""

    def start(self, n, payload, fut):
        self.n, self.count, self.fut = n, 0, fut
        self.thisProxy[1].ping(payload)

    def ping(self, payload):
        self.thisProxy[0].pong(payload)

    def pong(self, payload):
        self.count += 1
        if self.count == self.n:
            self.fut.send(None)
        else:
            self.thisProxy[1].ping(payload)

    def counters(self):
        """This PE's polls and minor page faults so far."""
        return POLLS[0], resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def pin(self, cpu):
        """Run this PE on ``cpu`` only, counting its polls."""
        os.sched_setaffinity(0, {cpu})
        _count_polls()


async def _per_round_trip(arr, n, payload):
    """Polls and minor faults of each PE per round trip of ``n`` round trips."""
    before = [await arr[k].counters(ret=True) for k in range(2)]
    fut = shoal.future()
    arr[0].start(n, payload, fut)
    await fut
    after = [await arr[k].counters(ret=True) for k in range(2)]
    return ([(a[0] - b[0]) / n for a, b in zip(after, before, strict=True)],
            [(a[1] - b[1]) / n for a, b in zip(after, before, strict=True)])


async def one_core():
    """Both PEs on one core: a PE that waits for its peer must hand it the core rather than
    poll through its time slice. Returns the polls per round trip of each PE, for small
    messages and for 1 MiB arrays."""
    arr = shoal.Array(Bouncer, 2, map="round_robin")
    for k in range(2):
        await arr[k].pin(0, ret=True)
    await _per_round_trip(arr, 20, b"12345678")  # warm-up
    small, _ = await _per_round_trip(arr, 200, b"12345678")
    big, _ = await _per_round_trip(arr, 50, MIB)
    return small, big


async def warm_blocks():
    """A 1 MiB array bounced between 2 PEs: after a warm-up, the blocks it travels in are
    ones whose pages are mapped already (a cold block faults in 256 pages per hop). Returns
    the minor faults of each PE per round trip."""
    arr = shoal.Array(Bouncer, 2, map="round_robin")
    await _per_round_trip(arr, 50, MIB)  # warm-up
    _, faults = await _per_round_trip(arr, 200, MIB)
    return faults


if __name__ == "__main__":
    main({"one_core": one_core, "warm_blocks": warm_blocks})
