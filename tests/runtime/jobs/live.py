"""A job for the live-data tests (test_publish.py), under ``shoal run``:
``live.py OUT.json SECONDS [checkpoint DIR] [plain]``.

An at_sync array of 8 elements, block mapped (PE 0 holds the first 4), whose first 3
elements work 6 times the others' CPU time (which the balancer weighs: ``cpu_stats``);
iterations of at_sync() and a sum reduction for about SECONDS (``shoal run --lb`` decides
what the AtSync points do: ``--lb none`` resumes at once). ``checkpoint DIR``: one
checkpoint into DIR halfway. At the end every PE's ``shoal.stats()`` (entry seconds of its
elements, idle seconds) and PE 0's ``shoal.lb_history()`` go to OUT.json. ``plain``: no
at_sync, main calls ``shoal.iteration()`` after each iteration, where ``shoal ctl`` resizes
the job; resized, it runs SECONDS again on the array it had."""

import json
import sys
import time

import shoal
from shoal import Reducer

N, HEAVY, UNIT = 8, 3, 0.004


def spin(seconds):
    """``seconds`` of this thread's CPU time: the same work however busy the machine is (a
    wall-clock spin stretched by another process's turn on the core weighs more)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Worker(shoal.Chare):
    def __init__(self, sync):
        self.done = None
        self.sync = sync

    def iterate(self, done):
        self.done = done
        spin(UNIT * (6 if self.thisIndex[0] < HEAVY else 1))
        if self.sync:
            self.at_sync()
        else:
            self.contribute(1, Reducer.sum, done)

    def resume_from_sync(self):
        self.contribute(1, Reducer.sum, self.done)


def own_stats():
    stats = shoal.stats()
    busy = sum(v[1] for methods in stats["elements"].values() for v in methods.values())
    return {"pe": stats["pe"], "busy": busy, "idle": stats["idle"]}


async def main():
    out, seconds = sys.argv[1], float(sys.argv[2])
    rest = sys.argv[3:]
    ckpt = rest[rest.index("checkpoint") + 1] if "checkpoint" in rest else None
    plain = "plain" in rest
    saved = shoal.restored()  # (after a resize: the array as it was)
    arr = saved["arr"] if saved else shoal.Array(Worker, N, args=(not plain,),
                                                 at_sync=not plain)
    start = time.time()
    steps = 0
    halfway = False
    while time.time() - start < seconds:
        done = shoal.future()
        arr.iterate(done)
        assert await done == N
        steps += 1
        if plain:
            await shoal.iteration({"arr": arr})
        if not halfway and time.time() - start > seconds / 2:
            halfway = True
            if ckpt is not None:
                await shoal.checkpoint(ckpt)
    await shoal.quiescence()
    stats = await shoal.run_on_all(own_stats)
    with open(out, "w") as f:
        json.dump({"steps": steps, "pes": stats, "lb": shoal.lb_history()}, f)


if __name__ == "__main__":
    # cpu_stats: the balancer weighs the elements' CPU time, which a loaded machine does not
    # stretch (wall-clock loads once measured 1.146 against the 1.65 of the design)
    shoal.start(main, cpu_stats=True)
