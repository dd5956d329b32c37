"""Failures that must end the job with a message (run by test_errors.py):
``python errors.py NAME``."""

import sys

from runner import main

import shoal


class Faulty(shoal.Chare):
    def boom(self):
        raise ValueError("deliberate failure in an entry method")

    def ping(self):
        return shoal.my_pe()

    def twice(self, fut):
        fut.send(1)
        fut.send(2)

    def quit(self, code):
        sys.exit(code)

    async def later(self, fut, seconds):
        await shoal.sleep(seconds)
        fut.send(seconds)

    def ragged(self, fut):
        self.contribute([1] * (2 + self.thisIndex[0] % 2), shoal.Reducer.sum, fut)

    def anonymous(self, fut):
        self.contribute(1, lambda a, b: a + b, fut)

    def alone(self, fut):
        self.contribute(1, shoal.Reducer.sum, fut)


class Unready(shoal.Chare):
    async def __init__(self):
        await shoal.sleep(0.01)
        if self.thisIndex[0] == 3:
            raise ValueError("deliberate failure in an async __init__")

    def ping(self):
        return shoal.my_pe()


async def async_init():
    arr = shoal.Array(Unready, 4)
    await arr[3].ping(ret=True)  # never runs: the failure must end the job


async def entry_method():
    f = shoal.Array(Faulty, 4)
    f[3].boom()
    await shoal.future()  # never resolves: the failure must end the job


async def outside_shape():
    arr = shoal.Array(Faulty, 4)
    await arr[100].ping(ret=True)  # no element 100: an error here, not a wait


async def outside_shape_2d():
    arr = shoal.Array(Faulty, (2, 3))
    await arr[1, 3].ping(ret=True)


async def stuck_main():
    arr = shoal.Array(Faulty, 4)
    await arr.ping(ret=True)
    await shoal.future()  # nothing can resolve it


async def exit_3():
    arr = shoal.Array(Faulty, 4)
    arr[3].quit(3)
    await shoal.future()


async def exit_0():
    arr = shoal.Array(Faulty, 4)
    arr[3].quit(0)
    await shoal.future()


async def sent_twice():
    arr = shoal.Array(Faulty, 4)
    fut = shoal.future()
    arr[3].twice(fut)
    assert await fut == 1
    await shoal.future()


async def alive():
    """Not stuck: main waits on elements that sleep past the first probes, on a sleep
    and on quiescence."""
    arr = shoal.Array(Faulty, 4)
    for wait in (1.5, 3.5):
        fut = shoal.future()
        arr[3].later(fut, wait)
        assert await fut == wait
    await shoal.sleep(2.5)
    await shoal.quiescence()


async def ragged():
    """Lists of different lengths do not sum element-wise: an error, not a concatenation."""
    arr = shoal.Array(Faulty, 4)
    fut = shoal.future()
    arr.ragged(fut)
    await fut


async def lambda_reducer():
    arr = shoal.Array(Faulty, 4)
    fut = shoal.future()
    arr.anonymous(fut)
    await fut


async def sparse_block():
    shoal.Array(Faulty, ndims=1, map="block")


async def lambda_map():
    shoal.Array(Faulty, 4, map=lambda index, dims, npes: 0)


async def dropped():
    """An exception in a call with ret=True whose future main drops: nobody waits for it."""
    arr = shoal.Array(Faulty, 4)
    arr[3].boom(ret=True)
    await shoal.future()


async def single_contributes():
    one = shoal.create(Faulty)
    fut = shoal.future()
    one.alone(fut)
    await fut


if __name__ == "__main__":
    main({"entry_method": entry_method, "outside_shape": outside_shape,
          "outside_shape_2d": outside_shape_2d, "stuck_main": stuck_main, "alive": alive,
          "exit_3": exit_3, "exit_0": exit_0,
          "sent_twice": sent_twice, "ragged": ragged, "lambda_reducer": lambda_reducer,
          "sparse_block": sparse_block, "lambda_map": lambda_map, "dropped": dropped,
          "single_contributes": single_contributes, "async_init": async_init})
