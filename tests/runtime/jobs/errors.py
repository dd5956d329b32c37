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


if __name__ == "__main__":
    main({"entry_method": entry_method, "outside_shape": outside_shape,
          "outside_shape_2d": outside_shape_2d, "stuck_main": stuck_main, "alive": alive,
          "exit_3": exit_3, "exit_0": exit_0,
          "sent_twice": sent_twice})
