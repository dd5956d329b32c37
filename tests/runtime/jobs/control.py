"""Control points inside the runtime (run by test_control.py): ``python control.py
app|lb_every [--tune lb_every]``.

``app``: main registers a point x in 1..6 and each iteration asks an element on PE 1 to
sleep (|x - 3| + 3) * 8 ms (sleep, not work: the machine's other load changes it little);
the controller must settle on 3. ``lb_every``: an at_sync array whose first elements work
longer syncs every iteration, and the controller (``--tune lb_every``) chooses every how
many sync points to balance; every element runs every iteration, and the steps taken are
the ones the values in force allow. ``young`` (``--checkpoint-every 0.1 --mtbf 2``): the
period of automatic checkpoints follows Young's rule."""

import math
import time

import numpy as np
from runner import main

import shoal

N, ITERS = 8, 150


class Sleeper(shoal.Chare):
    def nap(self, x, done):
        time.sleep((abs(x - 3) + 3) * 0.008)
        done.send(x)


async def app():
    sleeper = shoal.Array(Sleeper, 2)
    x = shoal.control_point("x", [1, 2, 3, 4, 5, 6], effect="3 is best")
    assert x.value == 1
    for _ in range(300):  # (noisy windows grow: on a loaded machine it takes longer)
        done = shoal.future()
        sleeper[1].nap(x.value, done)
        assert await done == x.value
        await shoal.iteration()
        history = shoal.control_history()
        if any(d["decision"] == "settled" for d in history["decisions"]):
            break
    settled = [d for d in history["decisions"] if d["decision"] == "settled"]
    assert settled and settled[0]["value"] == 3, history["decisions"]
    assert x.value == 3 and history["points"] == {"x": 3}
    measured = [d["value"] for d in history["decisions"] if d["decision"] == "measured"]
    assert measured[:4] == [1, 2, 3, 4], measured  # the descent, one value at a time
    return len(history["iterations"])


class Worker(shoal.Chare):
    def __init__(self, done):
        self.done, self.it = done, 0

    def start(self):
        self.step()

    def step(self):
        end = time.perf_counter() + (0.001 if self.thisIndex[0] < N // 2 else 0.0002)
        while time.perf_counter() < end:
            pass
        self.at_sync()

    def resume_from_sync(self):
        self.it += 1
        if self.it < ITERS:
            self.step()
        else:
            self.contribute(self.it, shoal.Reducer.sum, self.done)


async def lb_every():
    done = shoal.future()
    arr = shoal.Array(Worker, N, args=(done,), at_sync=True)
    arr.start()
    assert await done == N * ITERS  # every element ran every iteration
    history = shoal.control_history()
    rows = history["iterations"]
    assert len(rows) == ITERS - 1 and all(r["source"] == "sync" for r in rows), rows
    # the value each sync point used: 1 at the first, then what the mark of the point left
    # in force, which the next row records (the last point's is unknown)
    used = [1] + [rows[j + 1]["lb_every"] for j in range(len(rows) - 1)]
    steps, since = 0, 0
    for every in used:
        since += 1
        if since >= every:
            steps, since = steps + 1, 0
    taken = len(shoal.lb_history())
    assert taken in (steps, steps + 1), (taken, steps, used)
    assert taken < ITERS  # some sync points resumed without a step
    measured = [d["value"] for d in history["decisions"] if d["decision"] == "measured"]
    assert measured[:2] == [1, 2], history["decisions"]
    return taken


class Cell(shoal.Chare):
    def __init__(self):
        self.data = np.zeros(50_000)

    def work(self, it, done):
        self.data += it
        self.contribute(float(self.data[0]), shoal.Reducer.sum, done)


async def young():
    """--checkpoint-every 0.1 --mtbf 2: after each automatic checkpoint the period becomes
    sqrt(2 C M) for the mean cost C of the last ones."""
    cells = shoal.Array(Cell, 4)
    for it in range(40):
        done = shoal.future()
        cells.work(it, done)
        await done
        await shoal.iteration({"cells": cells, "it": it})
        await shoal.sleep(0.01)
    rules = [d for d in shoal.control_history()["decisions"] if d["decision"] == "young"]
    assert rules, "no automatic checkpoint"
    for d in rules:
        assert d["point"] == "checkpoint_every"
        assert d["value"] == math.sqrt(2 * d["seconds"] * 2.0), d
    return len(rules)


if __name__ == "__main__":
    main({"app": app, "lb_every": lb_every, "young": young})
