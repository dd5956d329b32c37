"""shoal as a library inside an MPI program that uses its communicator before and after
(run by test_library_mode.py): ``python library_mode.py``; rank 0 prints
``OK library (BEFORE, AGAIN)``, the results of the MPI calls before and after, and
``OK collector (INSIDE, AFTER)``: the garbage collector's (threshold, frozen objects) while
the runtime ran and after it returned (shoal.runtime.collector)."""

import gc

import shoal
from shoal import Reducer


class Contrib2(shoal.Chare):
    def run(self, target):
        i, j = self.thisIndex
        self.contribute(i * 4 + j, Reducer.sum, target)


def library():
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    before = world.allreduce(1)
    results = []
    inside: list[tuple[int, int]] = []
    outside = (gc.get_threshold()[0], gc.get_freeze_count())

    async def main():
        inside.append((gc.get_threshold()[0], gc.get_freeze_count()))
        arr = shoal.Array(Contrib2, (2, 3))
        fut = shoal.future()
        arr.run(fut)
        results.append(await fut)

    shoal.start(main, comm=world)
    again = world.allreduce(world.Get_rank())
    if world.Get_rank() == 0:
        assert results == [sum(i * 4 + j for i in range(2) for j in range(3))], results
        print(f"OK library {(before, again)!r}", flush=True)
        after = (gc.get_threshold()[0], gc.get_freeze_count())
        assert after == outside, (outside, after)
        print(f"OK collector {(inside[0], after)!r}", flush=True)


if __name__ == "__main__":
    library()
