"""A job that reports where its PEs run and how many elements of a default-map array start on
each (run by test_placement.py). Each launch prints ``WHERE`` and a Python literal from PE 0;
with ``HOLD=FILE`` in the environment, main waits at ``shoal.iteration`` points until that
file exists, so that the test can resize it meanwhile."""

import os

import shoal

HOLD = os.environ.get("HOLD")


class Where(shoal.Chare):
    def where(self):
        return shoal.my_host()


class Element(shoal.Chare):
    def pe(self):
        return shoal.my_pe()


async def main():
    hosts = await shoal.Group(Where).where(ret=True)
    pes = await shoal.Array(Element, 60).pe(ret=True)
    counts = [pes.count(p) for p in range(shoal.num_pes())]
    print("WHERE", repr({"hosts": hosts, "counts": counts}), flush=True)
    state = shoal.restored() or {"it": 0}
    while HOLD is not None and not os.path.exists(HOLD):
        await shoal.sleep(0.05)
        state["it"] += 1
        await shoal.iteration(state)


if __name__ == "__main__":
    shoal.start(main)
