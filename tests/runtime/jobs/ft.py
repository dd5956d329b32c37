"""In-job recovery (run by test_ft.py under Open MPI's ``mpiexec --with-ft ulfm``):
``python ft.py ft|plain STEPS`` (``plain``: without ``ft=True``), with ``SHOAL_KILL`` naming
the PE to kill and when. The ring of jobs/autockpt.py, driven by main, takes a double
in-memory checkpoint after every iteration; a dead PE is replaced in-job by a rollback on
the survivors. A group counts the iterations on every PE (member p adds p + 1 each time;
after a recovery, member p of the survivors goes on from saved member p). PE 0 prints
``RESULT`` and a Python literal (the digest of the final blocks, the PE count, the group's
sums, the hosts its PEs ran on)."""

import sys

from autockpt import BLOCKS, STEPS, Block, digest

import shoal


class Tally(shoal.Chare):
    def __init__(self):
        self.ticks = 0

    def tick(self):
        self.ticks += 1 + self.thisIndex[0]  # a member's own sum: a swap of two shows

    def count(self):
        return self.ticks

    def host(self):
        return shoal.my_host()


async def main():
    state = shoal.restored()
    restored = state is not None
    if state is None:
        state = {"arr": shoal.Array(Block, BLOCKS), "tally": shoal.Group(Tally), "it": 0}
    first = state["it"]
    while state["it"] < STEPS:
        fut = shoal.future()
        state["arr"].step(fut)
        state["tally"].tick()
        await fut
        state["it"] += 1
        await shoal.checkpoint(state=state, memory=True)
    blocks = await state["arr"].result(ret=True)
    print("RESULT", repr({"digest": digest(blocks), "pes": shoal.num_pes(),
                         "restored": restored, "from": first,
                         "tally": await state["tally"].count(ret=True),
                         "hosts": sorted(set(await state["tally"].host(ret=True)))}), flush=True)


if __name__ == "__main__":
    shoal.start(main, ft=sys.argv[1] == "ft")  # (autockpt reads STEPS from sys.argv[2])
