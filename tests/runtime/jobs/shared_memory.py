"""Large arrays through the shared segments of the PEs, and by MPI when they are full or
off (run by test_buffers.py on 2 ranks): ``python shared_memory.py NAME... [--shm BYTES]``."""

import numpy as np
from runner import main

import shoal

MB = 1 << 20


class Holder2(shoal.Chare):
    """Bounces arrays, keeps them on request, moves with what it keeps."""

    def __init__(self):
        self.kept = []

    def bounce(self, arr, hops, fut):
        arr += 1.0  # the receiver owns what it got: writable
        if hops == 1:
            fut.send(arr)
        else:
            self.thisProxy[1 - self.thisIndex[0]].bounce(arr, hops - 1, fut)

    def keep(self, k, a, b=None):
        assert a[0] == k and a[-1] == k, (k, a[0], a[-1])
        self.kept.append(a)
        if b is not None:
            assert (b == -k).all()
            self.kept.append(b)

    def total(self):
        return float(sum(a.sum() for a in self.kept))

    def drop(self):
        self.kept = []

    def move(self, pe):
        self.migrate(pe)

    def look(self, arr):
        assert arr.shape == (MB // 8,)


class ShmStats(shoal.Chare):
    def shared(self):
        st = shoal.stats()
        return st["bytes_shared"], st["bytes_sent"]


async def bounce():
    """A 1 MiB array bounced 60 times between elements on PEs 0 and 1, each receiver
    writing to it. Returns the bytes each PE sent meanwhile: through shared memory, in all."""
    h = shoal.Array(Holder2, 2, map="round_robin")
    count = shoal.Group(ShmStats)
    before = await count.shared(ret=True)
    fut = shoal.future()
    h[0].bounce(np.zeros(MB // 8), 60, fut)
    out = await fut
    assert out.shape == (MB // 8,) and (out == 60.0).all()
    after = await count.shared(ret=True)
    return ([a[0] - b[0] for a, b in zip(after, before, strict=True)],
            [a[1] - b[1] for a, b in zip(after, before, strict=True)])


async def overflow():
    """Run with a 4 MiB segment per PE (``--shm 4194304``). Arrays kept by the receiver fill
    the receiver's view of the sender's segment: the rest goes by MPI; an element moves home
    with arrays that live in the destination's own segment; broadcasts (kept for replay) hold
    no segment block; once the kept arrays are dropped every hop of a bounce goes through
    shared memory again. Returns the bytes each PE sent through shared memory in all."""
    h = shoal.Array(Holder2, 2, map="round_robin")
    count = shoal.Group(ShmStats)
    after = await count.shared(ret=True)
    for k in range(1, 9):
        h[1].keep(k, np.full(MB // 8, float(k)), -np.full(300_000 // 8, float(k)) if k == 5
                  else None)
    expected = sum(k * MB / 8 for k in range(1, 9)) - 5 * 300_000 / 8
    assert await h[1].total(ret=True) == expected
    full = await count.shared(ret=True)
    assert 2 * MB <= full[0][0] - after[0][0] < 8 * MB, (full, after)
    # moving home with arrays that live in the destination's own segment
    h[1].move(0)
    assert await h[1].total(ret=True) == expected
    h[1].drop()
    h[1].move(1)
    for _ in range(4):  # broadcasts are kept for replay: they must not hold segment blocks
        h.look(np.ones(MB // 8))
    await shoal.quiescence()
    again = await count.shared(ret=True)
    fut = shoal.future()
    h[0].bounce(np.zeros(MB // 8), 20, fut)
    assert (await fut == 20.0).all()
    last = await count.shared(ret=True)
    assert [a[0] - b[0] for a, b in zip(last, again, strict=True)] == [10 * MB, 10 * MB]
    return [s for s, _ in last]


async def many_blocks():
    """More than 64 blocks in flight at once (8 MiB segments, 64 KiB arrays kept), taken
    back after the receiver drops them. Run with ``--shm 8388608``."""
    h = shoal.Array(Holder2, 2, map="round_robin")
    count = shoal.Group(ShmStats)
    n, size = 120, 65536
    for batch in range(2):
        before = await count.shared(ret=True)
        for k in range(1, n + 1):
            h[1].keep(k, np.full(size // 8, float(k)))
        assert await h[1].total(ret=True) == size // 8 * n * (n + 1) / 2
        after = await count.shared(ret=True)
        assert after[0][0] - before[0][0] == n * size, (batch, after, before)
        h[1].drop()
        await shoal.quiescence()


if __name__ == "__main__":
    main({"bounce": bounce, "overflow": overflow, "many_blocks": many_blocks})
