"""Sections and messages held by guarded methods across a checkpoint and a restart on
another number of PEs (run by test_model_restart.py): ``python model_restart.py DIR`` takes
the checkpoint and stops; ``python model_restart.py DIR --restart DIR`` goes on from it.
Checked in the job: a section reduction half done at the checkpoint completes with the
exact sum, each member runs each multicast of each section once and in order (before and
after), and the held messages run once when their condition comes true; PE 0 prints
``RESULT`` and a literal for the test."""

import sys

import shoal
from shoal import Reducer


class Part(shoal.Chare):
    def __init__(self):
        self.phase = 0
        self.runs = {}  # section name -> the multicast numbers run, in order
        self.done = []  # (phase, k) of the held messages that ran

    def tick(self, name, k):
        self.runs.setdefault(name, []).append(k)

    def give(self, section, fut):
        self.contribute(self.thisIndex[0], Reducer.sum, fut, section=section)

    @shoal.when("self.phase == p")
    def work(self, p, k):
        self.done.append((p, k))

    def go(self, p):
        self.phase = p

    def report(self):
        return (self.runs, self.done, len(self._slot.held))


N = 10
EVENS = list(range(0, N, 2))
MIDDLE = list(range(1, 8))
# contribute before the checkpoint: on 2 or 4 PEs the home of 6 waits for no one else, so
# a tree that counted on it would wait for ever (the rest goes straight to the root)
FIRST = (4, 6)


async def before(where):
    arr = shoal.Array(Part, N)
    evens, middle = arr[::2], arr[1:8]
    for k in range(3):
        evens.tick("evens", k)
    for k in range(2):
        middle.tick("middle", k)
    fut = shoal.future()
    for i in FIRST:  # part of the reduction over the evens, the rest after the restart
        arr[i].give(evens, fut)
    for k in range(2):
        arr.work(1, k)  # held: the phase is 0
    info = await shoal.checkpoint(where, {"arr": arr, "evens": evens, "middle": middle,
                                          "fut": fut})
    reports = await arr.report(ret=True)
    assert all(held == 2 for _, _, held in reports), reports
    print("RESULT", repr({"elements": info["elements"]}), flush=True)


async def after():
    state = shoal.restored()
    arr, evens, middle, fut = state["arr"], state["evens"], state["middle"], state["fut"]
    for i in EVENS:
        if i not in FIRST:
            arr[i].give(evens, fut)
    assert await fut == sum(EVENS)
    evens.tick("evens", 3)
    middle.tick("middle", 2)
    arr.go(1)
    again = shoal.future()
    middle.give(middle, again)
    assert await again == sum(MIDDLE)
    await shoal.quiescence()
    reports = await arr.report(ret=True)
    for i, (runs, done, held) in enumerate(reports):
        want = {}
        if i in EVENS:
            want["evens"] = [0, 1, 2, 3]
        if i in MIDDLE:
            want["middle"] = [0, 1, 2]
        assert runs == want, (i, runs, want)
        assert done == [(1, 0), (1, 1)] and held == 0, (i, done, held)
    print("RESULT", repr({"pes": shoal.num_pes(), "sum": sum(EVENS)}), flush=True)


def main():
    args = sys.argv[1:]
    if "--restart" in args:
        shoal.start(after, restart=args[args.index("--restart") + 1])
    else:
        shoal.start(before, args[0])


if __name__ == "__main__":
    main()
