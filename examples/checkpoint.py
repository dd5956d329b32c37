"""Checkpoint and restart: a ring of 12 blocks diffusing heat saves itself every 5
iterations; a run stopped part-way (the end of an allocation) continues from its last
checkpoint, on any number of PEs, and ends with the same checksum as an uninterrupted run.

    shoal run -n 2 examples/checkpoint.py            # 20 iterations into ./heat-checkpoint
    shoal run -n 2 examples/checkpoint.py /tmp/heat 20 --stop 12   # stops after 12
    shoal run -n 3 --restart /tmp/heat examples/checkpoint.py /tmp/heat 20
    shoal run -n 2 examples/checkpoint.py /tmp/heat-all 20         # the same checksum
"""

import argparse
import hashlib

import numpy as np

import shoal

BLOCKS, SIZE, EVERY = 12, 10_000, 5


class Block(shoal.Chare):
    def __init__(self):
        self.u = np.random.default_rng(self.thisIndex[0]).random(SIZE)

    async def step(self, done):
        i = self.thisIndex[0]
        left = shoal.Channel(self, self.thisProxy[(i - 1) % BLOCKS])
        right = shoal.Channel(self, self.thisProxy[(i + 1) % BLOCKS])
        left.send(self.u[0])
        right.send(self.u[-1])
        padded = np.concatenate(([await left.recv()], self.u, [await right.recv()]))
        self.u = self.u + 0.25 * (padded[:-2] - 2 * self.u + padded[2:])
        self.contribute(1, shoal.Reducer.sum, done)

    def data(self):
        return self.u


async def main(path, iterations, stop):
    saved = shoal.restored()  # None on a fresh start
    if saved is None:
        blocks, it = shoal.Array(Block, BLOCKS), 0
    else:
        blocks, it = saved["blocks"], saved["it"]  # live proxies
        print(f"restarted from iteration {it} on {shoal.num_pes()} PEs")
    while it < iterations:
        done = shoal.future()
        blocks.step(done)
        await done
        it += 1
        if it % EVERY == 0:  # between iterations: no entry method is awaiting
            info = await shoal.checkpoint(path, {"blocks": blocks, "it": it})
            print(f"iteration {it}: checkpoint of {info['bytes'] / 1e6:.1f} MB in "
                  f"{info['seconds'] * 1e3:.0f} ms")
        if it == stop:
            print(f"stopped after iteration {it}; the last checkpoint is of iteration "
                  f"{it - it % EVERY}")
            return
    data = b"".join(a.tobytes() for a in await blocks.data(ret=True))
    print(f"{iterations} iterations, checksum {hashlib.sha256(data).hexdigest()[:16]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Checkpoint and restart a heat ring")
    ap.add_argument("path", nargs="?", default="heat-checkpoint",
                    help="the checkpoint directory (default: ./heat-checkpoint)")
    ap.add_argument("iterations", nargs="?", type=int, default=20)
    ap.add_argument("--stop", type=int, default=None, help="stop after this iteration")
    args = ap.parse_args()
    shoal.start(main, args.path, args.iterations, args.stop)
