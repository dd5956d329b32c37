"""Envelope tags around the shared-memory tag, lowered to 5 here on every PE (and the tag of
an envelope whose pickle follows to 4; under the pure core: the compiled one inlines them),
and envelopes larger than the receive posted for them (run by test_buffers.py on 2 ranks):
``python wire.py NAME... [--shm BYTES]``."""

import pickle

import numpy as np
from runner import main

import shoal
from shoal.runtime.wire import transport


class Taker(shoal.Chare):
    def __init__(self):
        self.got = []

    def take(self, k, *arrays):
        assert all((a == k + j).all() for j, a in enumerate(arrays)), k
        self.got.append((k, len(arrays)))

    def send_bad_then_good(self, fut):
        other = self.thisProxy[1]
        try:
            other.take(-1, np.full(2000, -5.0), lambda: 0)  # an array set aside, then a failure
        except (pickle.PicklingError, AttributeError):
            pass
        else:
            raise AssertionError("a lambda pickled")
        for k in range(4):  # the next messages carry their own arrays, in order
            other.take(10 * k, *[np.full(2000 + 9000 * (j % 2), 10.0 * k + j)
                                 for j in range(k + 1)])
        fut.send(None)

    def take_big(self, k, items, *arrays):
        assert items == list(range(k, k + len(items))), k
        assert all((a == k + j).all() for j, a in enumerate(arrays)), k
        self.got.append((k, len(items), len(arrays)))

    def send_big(self, fut):
        """Small and large envelopes in turn: pickles larger than the posted receive, alone,
        with arrays by MPI and with arrays in shared memory (1 MiB), and small ones."""
        other = self.thisProxy[1]
        n = transport.RECV // 2  # (a pickle of 2.5 bytes or more per item)
        for k in range(6):
            other.take(1000 * k)
            items = list(range(1000 * k, 1000 * k + (n if k % 2 else 10)))
            arrays = [np.full(4000 * (1 + 32 * j), 1000.0 * k + j) for j in range(k % 3)]
            other.take_big(1000 * k, items, *arrays)
        fut.send(None)

    def report(self):
        return self.got


async def messages():
    """Messages with 1 to 4 out-of-band arrays (2, 3 and 4 around the tag) arrive intact and
    in order; a send that fails to pickle, after setting an array aside, leaves nothing
    behind."""
    t = shoal.Array(Taker, 2, map="round_robin")
    fut = shoal.future()
    t[0].send_bad_then_good(fut)
    await fut
    await shoal.quiescence()
    assert await t[1].report(ret=True) == [(0, 1), (10, 2), (20, 3), (30, 4)]


async def big():
    """Envelopes larger than the receive posted for them arrive intact, in order among
    small ones."""
    t = shoal.Array(Taker, 2, map="round_robin")
    fut = shoal.future()
    t[0].send_big(fut)
    await fut
    await shoal.quiescence()
    n = transport.RECV // 2
    assert await t[1].report(ret=True) == [
        e for k in range(6) for e in ((1000 * k, 0), (1000 * k, n if k % 2 else 10, k % 3))]


if __name__ == "__main__":
    transport.SHARED, transport.BIG = 5, 4  # on every PE
    main({"messages": messages, "big": big})
