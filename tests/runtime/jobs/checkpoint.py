"""Checkpoint and restart (run by test_checkpoint.py): ``python checkpoint.py SCENARIO DIR
[--restart PATH]``. PE 0 prints ``RESULT`` and a Python literal for the test to compare.

``doomed``: a destroyed array across restarts. ``every``: the same ring, checkpointed
after every iteration (for ``shoal run --restarts`` and ``--kill``). ``ring MODE``: a
deterministic ring of 7 blocks (numpy state, neighbour exchange by channels, a group
counting the iterations) runs 6 iterations; values posted on channels at iteration 3 are
received at iteration 3 after the checkpoint point. MODE ``plain`` takes no checkpoint,
``ckpt`` checkpoints at iteration 3 and goes on, ``stop`` exits right after the checkpoint;
with ``--restart`` the run continues from the checkpoint.
"""

import hashlib
import sys
import threading
from pathlib import Path

import numpy as np

import shoal
from shoal import Channel, Reducer

BLOCKS, N, STEPS, AT = 7, 3000, 6, 3


class Block(shoal.Chare):
    def __init__(self):
        self.u = np.random.default_rng(self.thisIndex[0]).random(N)
        self.stepped = 0

    def _chan(self, d, name):
        i = self.thisIndex[0]
        return Channel(self, self.thisProxy[(i + d) % BLOCKS], name)

    async def step(self, fut):
        left, right = self._chan(-1, "x"), self._chan(1, "x")
        left.send(self.u[0])
        right.send(self.u[-1])
        gl = await left.recv()
        gr = await right.recv()
        u = self.u
        new = u.copy()
        new[1:-1] += 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])
        new[0] += 0.25 * (gl - 2 * u[0] + u[1])
        new[-1] += 0.25 * (u[-2] - 2 * u[-1] + gr)
        self.u = new
        self.stepped += 1
        self.contribute(float(new.sum()), Reducer.gather, fut)

    def post(self):
        """Values for the right neighbour, received only at the next collect()."""
        self._chan(1, "mail").send(np.full(2000, self.thisIndex[0] + 0.5))

    async def collect(self, fut):
        mail = await self._chan(-1, "mail").recv()
        self.u[: len(mail)] += 1e-3 * mail
        self.contribute(1, Reducer.sum, fut)

    def result(self):
        return self.u


class Tally(shoal.Chare):
    def __init__(self):
        self.origin = shoal.my_pe()
        self.ticks = 0

    def tick(self):
        self.ticks += 1

    def report(self):
        return (self.origin, self.ticks)

    def count(self, fut):
        self.contribute(1, Reducer.sum, fut)


class Sleeper(shoal.Chare):
    def __init__(self):
        self.lock = None

    async def wait_forever(self):
        self.never = shoal.future()
        await self.never

    def unpicklable(self):
        self.lock = threading.Lock()

    def fine(self):
        self.lock = None
        self.never.send(None)


class Leaf(shoal.Chare):
    def ping(self):
        return self.thisIndex[0]


class Maker(shoal.Chare):
    """One per PE: makes arrays there (their ids carry this PE's number)."""

    def make(self):
        return shoal.Array(Leaf, 2)


async def doomed(where, _mode):
    """An array made by the last PE, destroyed, then a checkpoint whose state holds its
    proxy. Restarted (and checkpointed again into ``where``): a call through that proxy is
    still an error at the caller, and the arrays every PE makes get ids of their own.
    Returns the destroyed id, the error and the ids made after the restart."""
    state = shoal.restored()
    makers = shoal.Group(Maker)
    if state is None:
        doomed = await makers[shoal.num_pes() - 1].make(ret=True)
        assert await doomed.ping(ret=True) == [0, 1]
        await shoal.destroy(doomed)
        await shoal.checkpoint(where, {"doomed": doomed})
        print("RESULT", repr({"doomed": doomed.cid}), flush=True)
        return
    doomed = state["doomed"]
    try:
        doomed[0].ping(ret=True)
        said = None
    except shoal.UsageError as exc:
        said = str(exc)
    made = [await makers[p].make(ret=True) for p in range(shoal.num_pes())]
    for arr in made:
        assert await arr.ping(ret=True) == [0, 1]
    await shoal.checkpoint(where, {"doomed": doomed})
    print("RESULT", repr({"doomed": doomed.cid, "said": said, "made": [a.cid for a in made]}),
          flush=True)


class Counter(shoal.Chare):
    """A member of a group on some PEs."""

    def __init__(self):
        self.n = 0

    def bump(self):
        self.n += 1
        return (shoal.my_pe(), self.n)


class Mover(shoal.Chare):
    def go(self):
        if self.thisIndex[0] % 2 == 0:  # away from its home, then pinned there
            self.migrate((shoal.my_pe() + 1) % shoal.num_pes())

    def pin(self):
        if self.thisIndex[0] % 2 == 0:
            self.migratable = False

    def where(self):
        return (shoal.my_pe(), self.migratable)

    def again(self):
        try:
            self.migrate(0)
        except shoal.UsageError as exc:
            return str(exc)
        return None


async def placed(where, _mode):
    """A group on PEs [1, 2] and an array whose even elements moved off their homes and
    are then not migratable: restarted on the same number of PEs, the members keep their
    state and PEs and the pinned elements are where they were, still pinned."""
    state = shoal.restored()
    if state is None:
        g = shoal.Group(Counter, pes=[1, 2])
        arr = shoal.Array(Mover, 6)
        await g.bump(ret=True)
        await arr.go(awaitable=True)
        await arr.pin(awaitable=True)
        got = await arr.where(ret=True)
        await shoal.checkpoint(where, {"g": g, "arr": arr})
        print("RESULT", repr({"where": got}), flush=True)
        return
    g, arr = state["g"], state["arr"]
    print("RESULT", repr({"where": await arr.where(ret=True), "g": await g.bump(ret=True),
                          "again": await arr[0].again(ret=True)}), flush=True)


async def ring(where, mode):
    state = shoal.restored()
    if state is None:
        arr, group, it = shoal.Array(Block, BLOCKS), shoal.Group(Tally), 0
        extra = np.arange(100_000, dtype=np.float64)
    else:
        arr, group, it, extra = state["arr"], state["group"], state["it"], state["extra"]
        assert np.array_equal(extra, np.arange(100_000, dtype=np.float64))
    info = None
    while it < STEPS:
        if it == AT:
            if state is None:
                arr.post()
                if mode != "plain":
                    info = await shoal.checkpoint(where, {"arr": arr, "group": group,
                                                          "it": it, "extra": extra})
                    if mode == "stop":
                        print("RESULT", repr({"info": info}), flush=True)
                        return
            fut = shoal.future()
            arr.collect(fut)
            await fut
        fut = shoal.future()
        arr.step(fut)
        await fut
        group.tick()
        it += 1
    blocks = await arr.result(ret=True)
    digest = hashlib.sha256(b"".join(b.tobytes() for b in blocks)).hexdigest()
    members = await group.report(ret=True)
    fut = shoal.future()
    group.count(fut)
    print("RESULT", repr({"digest": digest, "group": members, "count": await fut,
                         "pes": shoal.num_pes(), "info": info}), flush=True)


async def every(where, _mode):
    """A checkpoint after every iteration (of 0.15 s at least): killed at any moment and
    relaunched by ``shoal run --restarts``, it ends as the uninterrupted ring."""
    state = shoal.restored()
    if state is None:
        arr, group, it = shoal.Array(Block, BLOCKS), shoal.Group(Tally), 0
    else:
        arr, group, it = state["arr"], state["group"], state["it"]
    start = it
    while it < STEPS:
        if it == AT:
            arr.post()
            fut = shoal.future()
            arr.collect(fut)
            await fut
        fut = shoal.future()
        arr.step(fut)
        await fut
        group.tick()
        it += 1
        await shoal.sleep(0.15)
        await shoal.checkpoint(where, {"arr": arr, "group": group, "it": it})
    blocks = await arr.result(ret=True)
    digest = hashlib.sha256(b"".join(b.tobytes() for b in blocks)).hexdigest()
    members = await group.report(ret=True)
    print("RESULT", repr({"digest": digest, "group": members, "start": start,
                         "pes": shoal.num_pes()}), flush=True)


async def serial(where, _mode):
    """Two calls without awaiting in between: the second waits for the first."""
    arr = shoal.Array(Block, BLOCKS)
    first = shoal.checkpoint(where, {"n": 1})
    second = shoal.checkpoint(where, {"n": 2})
    b = await second
    a = await first
    print("RESULT", repr({"first": a["generation"], "second": b["generation"],
                         "elements": b["elements"], "arr": arr.cid}), flush=True)


async def refused(where, _mode):
    """A good checkpoint, then two refused ones (a suspended coroutine; an element that
    cannot be pickled, on PE 1): the first stays."""
    sleepers = shoal.Array(Sleeper, 4)
    good = await shoal.checkpoint(where, {"n": 1})
    sleepers[3].wait_forever()
    errors = []
    try:
        await shoal.checkpoint(where, {"n": 2})
    except shoal.CheckpointError as exc:
        errors.append(str(exc))
    sleepers[3].fine()
    sleepers[3].unpicklable()
    try:
        await shoal.checkpoint(where, {"n": 3})
    except shoal.CheckpointError as exc:
        errors.append(str(exc))
    left = sorted(p.name for p in Path(where).iterdir())
    print("RESULT", repr({"good": good["generation"], "errors": errors, "left": left}),
          flush=True)


async def show(where, _mode):
    """Restarted: print the state."""
    print("RESULT", repr(shoal.restored()), flush=True)


def main():
    args = sys.argv[1:]
    restart = None
    if "--restart" in args:
        k = args.index("--restart")
        restart = args[k + 1]
        del args[k:k + 2]
    scenario, where, mode = args[0], args[1], (args[2] if len(args) > 2 else "")
    scenarios = {"ring": ring, "every": every, "serial": serial, "refused": refused,
                 "show": show, "doomed": doomed, "placed": placed}
    shoal.start(scenarios[scenario], where, mode, restart=restart)


if __name__ == "__main__":
    main()
