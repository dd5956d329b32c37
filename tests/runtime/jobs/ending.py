"""When the job ends (run by test_ending.py): ``python ending.py MODE``.

``returns``: main starts work on other PEs and returns at once; the work runs to its end
before the job ends (at quiescence), which then exits 0. ``plain``: the same with a main
that is a plain function. ``exit``: main calls shoal.exit() with work still queued; the
job ends at once, and says so."""

import sys

import shoal


class Hop(shoal.Chare):
    def __init__(self, n):
        self.n = n

    def hop(self, left, total):
        """A chain of calls around the array; the last one prints the total."""
        total += self.thisIndex[0]
        if left:
            self.thisProxy[(self.thisIndex[0] + 1) % self.n].hop(left - 1, total)
        else:
            print(f"chain done on PE {shoal.my_pe()}: {total}", flush=True)

    async def nap(self, seconds):
        await shoal.sleep(seconds)
        print(f"nap done: {self.thisIndex[0]}", flush=True)

    def flood(self, k):
        for _ in range(k):
            self.thisProxy[self.thisIndex].spin()

    def spin(self):
        x = 0
        for i in range(20000):
            x += i


def start_work():
    n = 2 * shoal.num_pes()
    arr = shoal.Array(Hop, n, args=(n,))
    arr[0].hop(400, 0)
    arr[1].nap(0.3)
    return arr


async def returns():
    start_work()
    print("main returned", flush=True)


def plain():
    start_work()
    print("main returned", flush=True)


async def exits():
    arr = start_work()
    arr[n_last()].flood(500)
    await shoal.sleep(0.01)
    shoal.exit()


def n_last():
    return 2 * shoal.num_pes() - 1


if __name__ == "__main__":
    shoal.start({"returns": returns, "plain": plain, "exit": exits}[sys.argv[1]])
