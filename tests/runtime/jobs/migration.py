"""Elements that migrate at random while they exchange messages (run by test_migration.py):
``python migration.py traffic [--shm BYTES]``."""

import random

import numpy as np
from runner import main

import shoal
from shoal import Reducer

SIZES = {0: 9000, 4: 1100}  # doubles in the arrays of every 8th and every 8th + 4th message


class Walker(shoal.Chare):
    def __init__(self, n, rounds, seed):
        self.n = n
        self.rounds = rounds
        self.rng = random.Random(seed * 1000 + self.thisIndex[0])
        self.got = {}
        self.sent = 0
        self.received = 0
        self.moves = 0
        self.arrivals = 0
        self.bcasts = 0

    def tick(self, r):
        for _ in range(8):
            j = self.rng.randrange(self.n)
            self.sent += 1
            # every 4th message carries an array that travels out of band (and may be
            # forwarded to an element that moved): 8.8 KB by MPI, 72 KB through the shared
            # segments of the sender and of each PE that forwards it
            big = (np.full(SIZES[self.sent % 8], float(self.sent)) if self.sent % 4 == 0
                   else None)
            self.thisProxy[j].recv(self.thisIndex[0], self.sent, big)
        if self.rng.random() < 0.3:
            pe = self.rng.randrange(shoal.num_pes())
            if pe != shoal.my_pe():
                self.moves += 1
            self.migrate(pe)
        if r + 1 < self.rounds:
            self.thisProxy[self.thisIndex].tick(r + 1)

    def recv(self, src, k, big):
        assert (big is None) == (k % 4 != 0)
        assert big is None or (big.shape == (SIZES[k % 8],) and (big == k).all()), (k, big)
        last = self.got.get(src, 0)
        assert k > last, f"{self.thisIndex}: message {k} from {src} after {last}"
        self.got[src] = k
        self.received += 1

    def count(self):
        self.bcasts += 1

    def on_migrated(self):
        self.arrivals += 1

    def report(self, fut):
        self.contribute(np.array([self.sent, self.received, self.moves, self.bcasts,
                                  self.arrivals]), Reducer.sum, fut)

    def senders(self, fut):
        self.contribute((self.thisIndex[0], sorted(self.got.items())), Reducer.gather, fut)


async def traffic():
    """24 elements each send 8 messages a tick (every 4th with an array), 30 ticks, and
    after 30% of their ticks ask to migrate to a random PE; 3 broadcasts go out meanwhile.
    Checked: each receiver gets each sender's messages in order with their arrays intact,
    every message and every broadcast arrives, ``on_migrated`` runs once per move. Returns
    the messages sent and the moves to another PE."""
    n, rounds = 24, 30
    w = shoal.Array(Walker, n, args=(n, rounds, 7))
    w.tick(0)
    for _ in range(3):
        w.count()
    await shoal.quiescence()
    fut = shoal.future()
    w.report(fut)
    sent, received, moves, bcasts, arrivals = map(int, await fut)
    assert sent == n * rounds * 8
    assert received == sent, (received, sent)
    assert bcasts == 3 * n
    assert arrivals == moves  # on_migrated ran once per move, with the state intact
    fut = shoal.future()
    w.senders(fut)
    # every sender's messages arrived in order (checked on arrival); the last number each
    # receiver saw from a sender equals the number of that sender's messages sent up to it
    per = await fut
    last = {}
    for _, got in per:
        for src, k in got:
            last[src] = max(last.get(src, 0), k)
    assert all(last[i] == rounds * 8 for i in range(n) if i in last)
    return sent, moves


if __name__ == "__main__":
    main({"traffic": traffic})
