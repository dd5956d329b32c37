"""Jacobi relaxation with a moving hot spot: the load-balancing example (seed 002, Section
III-A and Fig. 16: work per block varies in space and over time; the runtime measures it
and moves blocks at sync points).

The grid of examples/stencil2d.py, over-decomposed into B x B blocks. Blocks near a hot spot
do ``--heat`` times more work per iteration (extra sweeps over a scratch copy, as a physics
module that refines there would); the spot starts in a corner and moves along the diagonal.
Every ``--lb-every`` iterations each block calls ``at_sync()``; with a balancer (``--lb``
of ``shoal run``, default greedy_refine once an at_sync array exists) blocks move to even
the load, and ``resume_from_sync()`` starts the next iteration. ``--no-sync`` runs the same
work without sync points (no balancing), for comparison. Run:

    shoal run -n 2 examples/stencil_hotspot.py --n 1024 --blocks 8 --iters 60
    shoal run -n 2 examples/stencil_hotspot.py --n 1024 --blocks 8 --iters 60 --no-sync

Prints the time per iteration, the work per iteration summed over blocks (seconds) and the
time a perfect balance of that work would take on the PEs (work / PEs).
"""

import argparse
import time

import numpy as np

import shoal


def jacobi(u: np.ndarray) -> np.ndarray:
    """One sweep over the interior of ``u`` (ghosts included in ``u``)."""
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def heat_of(i: int, j: int, blocks: int, it: int, iters: int, heat: int) -> int:
    """Sweeps a block does in iteration ``it``: ``heat`` near the spot, else 1. The spot
    moves along the diagonal from block (0, 0) to (B-1, B-1) over the run."""
    centre = (blocks - 1) * it / max(1, iters - 1)
    near = abs(i - centre) + abs(j - centre) <= blocks / 4
    return heat if near else 1


class Block(shoal.Chare):
    def __init__(self, n: int, blocks: int, iters: int, heat: int, lb_every: int, sync: bool,
                 done):
        i, _ = self.thisIndex
        self.blocks, self.iters, self.heat = blocks, iters, heat
        self.lb_every, self.sync, self.done = lb_every, sync, done
        self.h = self.w = n // blocks
        self.u = np.zeros((self.h + 2, self.w + 2))
        if i == 0:
            self.u[0, :] = 1.0  # the fixed top boundary lives in the top ghost row
        self.it = 0
        self.work = 0.0  # seconds of computing, over the run
        self.t0 = 0.0

    def _links(self):
        i, j = self.thisIndex
        b = self.blocks
        links = []  # (neighbour, what to send, where received data goes)
        if i > 0:
            links.append(((i - 1, j), (1, slice(1, -1)), (0, slice(1, -1))))
        if i < b - 1:
            links.append(((i + 1, j), (-2, slice(1, -1)), (-1, slice(1, -1))))
        if j > 0:
            links.append(((i, j - 1), (slice(1, -1), 1), (slice(1, -1), 0)))
        if j < b - 1:
            links.append(((i, j + 1), (slice(1, -1), -2), (slice(1, -1), -1)))
        return [(shoal.Channel(self, self.thisProxy[k]), src, dst) for k, src, dst in links]

    def start(self):
        self.t0 = time.perf_counter()
        self.thisProxy[self.thisIndex].step()

    async def step(self):
        u = self.u
        links = self._links()  # channels by name: they work wherever the blocks are
        for ch, src, _ in links:
            ch.send(u[src].copy())
        for ch, _, dst in links:
            u[dst] = await ch.recv()
        t = time.perf_counter()
        i, j = self.thisIndex
        for _ in range(heat_of(i, j, self.blocks, self.it, self.iters, self.heat) - 1):
            jacobi(u.copy())  # the hot spot's extra work
        u[1:-1, 1:-1] = jacobi(u)
        self.work += time.perf_counter() - t
        self.it += 1
        if self.it == self.iters:
            self.contribute((self.work, time.perf_counter() - self.t0), _sum_max, self.done)
        elif self.sync and self.it % self.lb_every == 0:
            self.at_sync()  # returns: the block may move before resume_from_sync
        else:
            self.thisProxy[self.thisIndex].step()

    def resume_from_sync(self):
        self.thisProxy[self.thisIndex].step()


def _sum_max(a, b):
    """(total work, longest elapsed) over blocks."""
    return (a[0] + b[0], max(a[1], b[1]))


async def main():
    ap = argparse.ArgumentParser(description="Jacobi 2-D stencil with a moving hot spot")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--blocks", type=int, default=8, help="blocks per dimension")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--heat", type=int, default=8, help="work factor at the hot spot")
    ap.add_argument("--lb-every", type=int, default=5, help="iterations between sync points")
    ap.add_argument("--no-sync", action="store_true", help="no sync points: no balancing")
    args = ap.parse_args()
    if args.n % args.blocks:
        raise shoal.UsageError(f"--n {args.n} must be a multiple of --blocks {args.blocks}")
    if min(args.iters, args.heat, args.lb_every, args.blocks) < 1:
        raise shoal.UsageError("--iters, --heat, --lb-every and --blocks must be >= 1")
    done = shoal.future()
    blocks = shoal.Array(Block, (args.blocks, args.blocks), at_sync=not args.no_sync,
                         args=(args.n, args.blocks, args.iters, args.heat, args.lb_every,
                               not args.no_sync, done))
    blocks.start()
    work, elapsed = await done
    pes = shoal.num_pes()
    steps = shoal.lb_history()
    moved = sum(s["migrations"] for s in steps)
    lb_time = sum(s["total_time"] for s in steps)
    print(f"{args.n}x{args.n} grid, {args.blocks}x{args.blocks} blocks, heat {args.heat} on "
          f"{pes} PEs, {'no balancing' if args.no_sync else f'{len(steps)} LB steps'}: "
          f"{elapsed / args.iters * 1e3:.2f} ms per iteration; work {work / args.iters * 1e3:.2f}"
          f" ms per iteration, perfectly balanced {work / args.iters / pes * 1e3:.2f} ms; "
          f"{moved} migrations, {lb_time:.2f} s in LB steps")


if __name__ == "__main__":
    shoal.start(main)
