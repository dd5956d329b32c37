"""Emulated power (shoal.runtime.power), run by test_power.py: ``python power.py slow``
(with ``--power-monitor``: the readings reach PE 0)."""

import time

from runner import main

import shoal
from shoal.runtime.power import set_frequency


class Spinner(shoal.Chare):
    def spin(self, n):
        """A fixed loop of ``n`` iterations: its wall time, its thread CPU time."""
        t, c = time.perf_counter(), time.thread_time()
        x = 0
        for i in range(n):
            x += i
        return time.perf_counter() - t, time.thread_time() - c

    def set(self, f):
        set_frequency(f)

    def charged(self):
        return shoal.stats()


LOOP = 20_000  # about 1 ms of Python here
CALLS = 200


async def run_at(s, f):
    """``CALLS`` calls of the loop at frequency ``f``: (wall of the batch, summed wall and
    CPU of the loops themselves)."""
    await s.set(f, ret=True)
    t = time.perf_counter()
    busy = cpu = 0.0
    for _ in range(CALLS):
        w, c = await s.spin(LOOP, ret=True)
        busy += w
        cpu += c
    return time.perf_counter() - t, busy, cpu


async def slow():
    """The element on PE 0 (the only PE) runs the same loop at f = 1 and 0.5: the batch's
    wall time over the loops' own time is about 1/f; the element is charged about that."""
    s = shoal.Array(Spinner, 1)[0]
    wall1, busy1, _ = await run_at(s, 1.0)
    wall5, busy5, cpu5 = await run_at(s, 0.5)
    await s.set(1.0, ret=True)
    readings = len(shoal.power_history())
    return {"ratio1": wall1 / busy1, "ratio5": wall5 / busy5,
            "cpu_rate5": cpu5 / wall5, "readings": readings}


if __name__ == "__main__":
    main({"slow": slow})
