"""Shrink and expand a running job: blocks of state evolve one iteration at a time; main hands
its state to the runtime at every iteration (``shoal.iteration``), so the job can move to
another number of PEs between two iterations. The result does not depend on the resizes.

    shoal run -n 4 --jobdir /tmp/job examples/resize.py --iterations 400 &
    shoal ctl /tmp/job shrink 2     # prints how long the move took
    shoal ctl /tmp/job expand 4
    wait                            # the same checksum as a run left alone

Options: --elements N (default 1000) --kib K (state per element, default 64)
--iterations I (default 200) --pause SECONDS (per iteration, default 0.01).
"""

import argparse
import hashlib

import numpy as np

import shoal


class Block(shoal.Chare):
    def __init__(self, kib):
        self.rng = np.random.default_rng(self.thisIndex[0])
        self.u = self.rng.random(kib * 128)  # 8-byte floats

    def step(self, done):
        self.u = 0.5 * (self.u + self.rng.random(self.u.size))
        self.contribute(float(self.u.sum()), shoal.Reducer.sum, done)

    def digest(self):
        return self.thisIndex[0], hashlib.sha256(self.u.tobytes()).hexdigest()


async def main(opts):
    saved = shoal.restored()  # None on a fresh start
    if saved is None:
        blocks, it, total = shoal.Array(Block, opts.elements, args=(opts.kib,)), 0, 0.0
    else:
        blocks, it, total = saved["blocks"], saved["it"], saved["total"]
    print(f"iteration {it}: running on {shoal.num_pes()} PEs", flush=True)
    while it < opts.iterations:
        done = shoal.future()
        blocks.step(done)
        total += await done
        it += 1
        await shoal.iteration({"blocks": blocks, "it": it, "total": total})
        await shoal.sleep(opts.pause)
    digests = sorted(await blocks.digest(ret=True))
    checksum = hashlib.sha256("".join(d for _, d in digests).encode()).hexdigest()[:16]
    print(f"{opts.iterations} iterations on {shoal.num_pes()} PEs: total {total!r}, "
          f"checksum {checksum}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1000)
    parser.add_argument("--kib", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.01)
    shoal.start(main, parser.parse_args())
