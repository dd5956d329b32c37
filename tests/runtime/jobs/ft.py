"""In-job recovery (run by test_ft.py under Open MPI's ``mpiexec --with-ft ulfm``):
``python ft.py ft|plain STEPS`` (``plain``: without ``ft=True``), with ``SHOAL_KILL`` naming
the PE to kill and when. The ring of
jobs/autockpt.py, driven by main, takes a double in-memory checkpoint after every
iteration; a dead PE is replaced in-job by a rollback on the survivors. PE 0 prints
``RESULT`` and a Python literal (the digest of the final blocks, the PE count)."""

import sys

from autockpt import BLOCKS, STEPS, Block, digest

import shoal


async def main():
    state = shoal.restored()
    restored = state is not None
    if state is None:
        state = {"arr": shoal.Array(Block, BLOCKS), "it": 0}
    first = state["it"]
    while state["it"] < STEPS:
        fut = shoal.future()
        state["arr"].step(fut)
        await fut
        state["it"] += 1
        await shoal.checkpoint(state=state, memory=True)
    blocks = await state["arr"].result(ret=True)
    print("RESULT", repr({"digest": digest(blocks), "pes": shoal.num_pes(),
                         "restored": restored, "from": first}), flush=True)


if __name__ == "__main__":
    shoal.start(main, ft=sys.argv[1] == "ft")  # (autockpt reads STEPS from sys.argv[2])
