"""Under mpiexec: PHOLD with every event held back for a millisecond at its receiver before
it arrives (the window result, sent after it, overtakes it): LPs must wait for events still
in flight. An aggregated event is held back by handing it to the direct path's (held back)
method. Saves the run's counts to the .npz named by the last argument; the other arguments
are examples/phold.py's."""

import argparse
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


def handed_on(self: pdes.LP, rec: tuple[float, int, int]) -> None:
    self.thisProxy[self.thisIndex].event(*rec)


pdes.LP.event = held_back  # type: ignore[method-assign]
pdes.LP.item = handed_on  # type: ignore[method-assign]


async def main(p: pdes.Params, a: argparse.Namespace, out: str) -> None:
    r = await pdes.simulate(p, aggregate=a.aggregate, buffer_items=a.buffer_items)
    np.savez(out, **r.arrays())


if __name__ == "__main__":
    params, args = parse(sys.argv[1:-1])
    shoal.start(main, params, args, sys.argv[-1])
