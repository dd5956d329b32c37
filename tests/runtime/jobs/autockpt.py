"""Checkpoints taken by the runtime (run by test_autockpt.py and test_resize.py): ``python
autockpt.py SCENARIO [STEPS]``, under ``shoal run --checkpoint-every T --restarts N --kill
PE@t``, resized by ``shoal ctl``, or plain. PE 0 prints ``RESULT`` and a Python literal for
the test to compare.

``sync``: an AtSync program that takes no checkpoint itself: 9 blocks iterate on their own
(neighbour exchange by channels, then ``at_sync()``; the balancer resumes them), main only
awaits the future the blocks contribute to at the end. ``iter``: main drives the
iterations and calls ``shoal.iteration(state)`` between them. Both are deterministic: the
digest of the final blocks is the same whatever PE count, balancing or restarts.
``grouped``: ``iter`` beside a group on the last PE only.

With ``HOLD=FILE`` in the environment, ``sync``, ``iter`` and ``grouped`` go on past their
last step, passing consistent points without changing anything, until FILE exists
(test_resize: the job cannot end before its resizes are served or refused, however slow
the machine).
"""

import hashlib
import os
import sys

import numpy as np

import shoal
from shoal import Channel, Reducer

BLOCKS, N, PAUSE = 9, 2000, 0.06
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 16  # (every rank reads its arguments)
HOLD = os.environ.get("HOLD")


def held():
    """Past the last step: go on until the test's HOLD file exists."""
    return HOLD is not None and not os.path.exists(HOLD)


class Block(shoal.Chare):
    def __init__(self, done=None):
        self.u = np.random.default_rng(self.thisIndex[0]).random(N)
        self.done = done
        self.it = 0

    def _chan(self, d):
        i = self.thisIndex[0]
        return Channel(self, self.thisProxy[(i + d) % BLOCKS], "x")

    async def step(self, fut=None):
        if fut is None and self.it >= STEPS:  # sync, held past the last step
            await shoal.sleep(0.05)
            if held():
                self.at_sync()
            else:
                self.contribute(1, Reducer.sum, self.done)
            return
        left, right = self._chan(-1), self._chan(1)
        left.send(self.u[0])
        right.send(self.u[-1])
        gl = await left.recv()
        gr = await right.recv()
        u = self.u
        new = u.copy()
        new[1:-1] += 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])
        new[0] += 0.25 * (gl - 2 * u[0] + u[1])
        new[-1] += 0.25 * (u[-2] - 2 * u[-1] + gr)
        self.u = np.sin(new) + 1e-3 * self.thisIndex[0]
        self.it += 1
        await shoal.sleep(PAUSE * (1 + self.thisIndex[0] % 3))  # uneven: the balancer moves
        if fut is not None:
            self.contribute(1, Reducer.sum, fut)
        elif self.it < STEPS or held():
            self.at_sync()
        else:
            self.contribute(1, Reducer.sum, self.done)

    def resume_from_sync(self):
        self.thisProxy[self.thisIndex].step()

    def result(self):
        return (self.it, self.u)


def digest(blocks):
    assert all(it == STEPS for it, _ in blocks), [it for it, _ in blocks]
    return hashlib.sha256(b"".join(u.tobytes() for _, u in blocks)).hexdigest()


async def sync():
    state = shoal.restored()
    if state is None:
        done = shoal.future()
        arr = shoal.Array(Block, BLOCKS, args=(done,), at_sync=True)
        state = {"arr": arr, "done": done}
        shoal.iteration(state)  # what a restart gives restored()
        arr.step()
    await state["done"]
    blocks = await state["arr"].result(ret=True)
    print("RESULT", repr({"digest": digest(blocks), "restarted": shoal.restored() is not None,
                         "pes": shoal.num_pes()}), flush=True)


async def iterate():
    state = shoal.restored()
    restarted = state is not None
    if state is None:
        state = {"arr": shoal.Array(Block, BLOCKS), "it": 0}
    taken = 0
    while state["it"] < STEPS or held():
        if state["it"] < STEPS:
            fut = shoal.future()
            state["arr"].step(fut)
            await fut
            state["it"] += 1
        else:
            await shoal.sleep(0.05)
        info = await shoal.iteration(state)
        taken += info is not None
    blocks = await state["arr"].result(ret=True)
    print("RESULT", repr({"digest": digest(blocks), "restarted": restarted, "taken": taken,
                         "pes": shoal.num_pes()}), flush=True)


class Member(shoal.Chare):
    def where(self):
        return shoal.my_pe()


async def grouped():
    """``iter`` beside a group on the last PE only (test_resize: no shrink below it)."""
    last = shoal.num_pes() - 1
    assert await shoal.Group(Member, pes=[last]).where(ret=True) == [last]
    await iterate()


if __name__ == "__main__":
    shoal.start({"sync": sync, "iter": iterate, "grouped": grouped}[sys.argv[1]])
