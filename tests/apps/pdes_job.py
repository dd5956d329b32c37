"""Under mpiexec: PHOLD with every event held back for a millisecond at its receiver before
it arrives (the window result, sent after it, overtakes it): LPs must wait for events still
in flight. Saves the run's counts to the .npz named by the last argument;
the other arguments are examples/phold.py's."""

import sys
from pathlib import Path

import numpy as np

import shoal
from shoal.apps import pdes

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
from phold import parse

on_time = pdes.LP.event
HOLD = 0.001  # seconds


async def held_back(self: pdes.LP, ts: float, uid: int, window: int) -> None:
    await shoal.sleep(HOLD)
    on_time(self, ts, uid, window)


pdes.LP.event = held_back  # type: ignore[method-assign]


async def main(p: pdes.Params, out: str) -> None:
    r = await pdes.simulate(p)
    np.savez(out, **r.arrays())


if __name__ == "__main__":
    params, _ = parse(sys.argv[1:-1])
    shoal.start(main, params, sys.argv[-1])
