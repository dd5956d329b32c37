"""A job that floods (run by test_multinode.py over the links, ``OVER_LINKS``): one element
per PE, each sending ``M`` messages of 1,000 bytes to every other element from one entry
method, receiving nothing meanwhile, all at once. PE 0 prints ``RESULT`` and a Python
literal: per element, the messages it got from each sender and whether each sender's came
in the order sent."""

import sys

import shoal
from shoal import Reducer

M = int(sys.argv[1]) if len(sys.argv) > 1 else 300


class Flooder(shoal.Chare):
    def __init__(self, n):
        self.n = n
        self.got = {}  # sender -> the sequence numbers received, in order
        self.done = None

    def blast(self, done):
        self.done = done
        me = self.thisIndex[0]
        pad = b"x" * 1000
        for k in range(M):
            for other in range(self.n):
                if other != me:
                    self.thisProxy[other].take(me, k, pad)
        self._check()

    def take(self, sender, k, pad):
        self.got.setdefault(sender, []).append(k)
        self._check()

    def _check(self):
        if self.done is not None and sum(map(len, self.got.values())) == M * (self.n - 1):
            report = {s: (len(ks), ks == sorted(ks)) for s, ks in self.got.items()}
            self.contribute((self.thisIndex[0], report), Reducer.gather, self.done)
            self.done = None


async def main():
    n = shoal.num_pes()
    arr = shoal.Array(Flooder, n, args=(n,))
    done = shoal.future()
    arr.blast(done)
    print("RESULT", repr(sorted(await done)), flush=True)


if __name__ == "__main__":
    shoal.start(main)
