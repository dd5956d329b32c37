"""Jacobi relaxation with a moving hot spot: the load-balancing example (Acun14, Section
III-A and Fig. 16: work per block varies in space and over time; the runtime measures it
and moves blocks at sync points).

The grid of examples/stencil2d.py, over-decomposed into B x B blocks. A refined patch, a
square of ``--spot`` cells a side (default n/2: a quarter of the domain), costs ``--heat``
times as much per cell as the rest (8 by default: refinement ratio 2 in 2-D with sub-cycled
time steps, 4x the cells and 2x the steps): every block sweeps its cells once per
iteration, then ``heat - 1`` more times over its part of the patch, each sweep writing its
result as the main one does (to a scratch array: the refined level's data). The patch
starts centred at ``--start`` (cells on both axes, default n/4: the top-left quadrant, all
on PE 0 under the default block map of 2 PEs, which without balancing is 1.64x slower than
an even split of the work) and moves along the diagonal at ``--speed`` cells per iteration
on each axis (0.5 by default: a feature carried by a flow at Courant number 1 in 2-D; an
explicit scheme cannot move anything faster than one cell per step, so the load of one sync
period predicts the next, the persistence balancing relies on). Blocks of 512^2 cells (the
defaults) take about 0.9 ms per sweep here, against about 40 µs of runtime per block and
iteration on one PE (the step and four ghost messages; a message to another PE costs more):
the grain at which the runtime costs a few percent.

Every ``--lb-every`` iterations each block calls ``at_sync()``; with a balancer (``--lb`` of
``shoal run``, default greedy_refine once an at_sync array exists) blocks move to even the
load, and ``resume_from_sync()`` starts the next iteration. ``--no-sync`` runs the same work
without sync points (no balancing), for comparison; ``--cpu-stats`` balances CPU seconds
instead of wall seconds (on a machine shared with other programs, the time they take from a
core is not this program's load). Run:

    shoal run -n 2 examples/stencil_hotspot.py --iters 200
    shoal run -n 2 examples/stencil_hotspot.py --iters 200 --no-sync

Prints the time per iteration, the work per iteration summed over blocks and the time a
perfect balance of that work would take on the PEs (work / PEs); ``--out grid.npy`` saves
the final grid (the same as examples/stencil2d.py's, balanced or not). The work is each block's own
computing: the sweeps, and copying its ghost layers out and in. The copies are part of the
numerical work (any runtime, MPI included, needs them) and cost more than they seem: a
column of a 512^2 block touches 512 pages, about 20 µs per column after a sweep has
evicted the caches and TLB (about 100 µs per block and iteration, 10% of a sweep).
"""

import argparse
import sys
import time

import numpy as np

import shoal


def jacobi(u: np.ndarray) -> np.ndarray:
    """One sweep over the interior of ``u`` (ghosts included in ``u``)."""
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


class Patch:
    """The refined patch: a square of ``side`` cells centred at ``start + speed * it`` on
    both axes, ``heat`` times the work per cell."""

    def __init__(self, side: float, start: float, speed: float, heat: int):
        self.side, self.start, self.speed, self.heat = side, start, speed, heat

    def part(self, lo: tuple[int, int], shape: tuple[int, int], it: int):
        """The patch's part of the block whose first interior cell is global cell ``lo``,
        as slices of the block's array (ghosts included), or None."""
        centre = self.start + self.speed * it
        a, b = round(centre - self.side / 2), round(centre + self.side / 2)
        out = []
        for first, size in zip(lo, shape, strict=True):
            begin, end = max(a, first), min(b, first + size)
            if begin >= end:
                return None
            out.append(slice(begin - first, end - first + 2))  # (+ a ghost on each side)
        return tuple(out)


class Block(shoal.Chare):
    def __init__(self, n: int, blocks: int, iters: int, patch: Patch, lb_every: int,
                 sync: bool, done):
        i, j = self.thisIndex
        self.iters, self.patch = iters, patch
        self.lb_every, self.sync, self.done = lb_every, sync, done
        self.h = self.w = n // blocks
        self.lo = (i * self.h, j * self.w)
        self.u = np.zeros((self.h + 2, self.w + 2))
        if i == 0:
            self.u[0, :] = 1.0  # the fixed top boundary lives in the top ghost row
        links = []  # (neighbour, what to send, where received data goes)
        if i > 0:
            links.append(((i - 1, j), (1, slice(1, -1)), (0, slice(1, -1))))
        if i < blocks - 1:
            links.append(((i + 1, j), (-2, slice(1, -1)), (-1, slice(1, -1))))
        if j > 0:
            links.append(((i, j - 1), (slice(1, -1), 1), (slice(1, -1), 0)))
        if j < blocks - 1:
            links.append(((i, j + 1), (slice(1, -1), -2), (slice(1, -1), -1)))
        # one channel per neighbour for the whole run: channels name the elements, so they
        # work wherever the blocks are
        self.links = [(shoal.Channel(self, self.thisProxy[k]), src, dst)
                      for k, src, dst in links]
        self.it = 0
        self.work = 0.0  # seconds of the block's own computing, over the run
        self.t0 = 0.0

    def start(self):
        self.t0 = time.perf_counter()
        self.thisProxy[self.thisIndex].step()

    async def step(self):
        u = self.u
        for ch, src, _ in self.links:
            t = time.perf_counter()
            ghost = u[src].copy()
            self.work += time.perf_counter() - t
            ch.send(ghost)
        for ch, _, dst in self.links:
            ghost = await ch.recv()
            t = time.perf_counter()
            u[dst] = ghost
            self.work += time.perf_counter() - t
        t = time.perf_counter()
        part = self.patch.part(self.lo, (self.h, self.w), self.it)
        if part is not None:  # the refined level's extra sweeps, into a scratch array
            hot = u[part]
            out = _scratch(u.shape)[tuple(slice(s.start, s.stop - 2) for s in part)]
            for _ in range(self.patch.heat - 1):
                out[...] = jacobi(hot)
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

    def grid(self, done):
        self.contribute((self.thisIndex, self.u[1:-1, 1:-1]), shoal.Reducer.gather, done)


_SCRATCH: dict[tuple[int, ...], np.ndarray] = {}


def _scratch(shape: tuple[int, ...]) -> np.ndarray:
    """This PE's scratch array for the refined level (not part of a block's state: it
    does not travel when the block moves)."""
    if shape not in _SCRATCH:
        _SCRATCH[shape] = np.empty(shape)
    return _SCRATCH[shape]


def _sum_max(a, b):
    """(total work, longest elapsed) over blocks."""
    return (a[0] + b[0], max(a[1], b[1]))


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Jacobi 2-D stencil with a moving hot spot")
    ap.add_argument("--n", type=int, default=4096, help="grid side, cells")
    ap.add_argument("--blocks", type=int, default=8, help="blocks per dimension")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--heat", type=int, default=8, help="work factor in the patch")
    ap.add_argument("--spot", type=float, help="side of the patch, cells (default n/2)")
    ap.add_argument("--start", type=float, help="the patch's first centre on both axes, "
                    "cells (default n/4)")
    ap.add_argument("--speed", type=float, default=0.5, help="cells per iteration on each "
                    "axis the patch moves (default 0.5)")
    ap.add_argument("--lb-every", type=int, default=10, help="iterations between sync points")
    ap.add_argument("--no-sync", action="store_true", help="no sync points: no balancing")
    ap.add_argument("--cpu-stats", action="store_true", help="balance CPU seconds, not wall "
                    "seconds (on a machine shared with other programs)")
    ap.add_argument("--out", help="save the final grid (.npy)")
    args = ap.parse_args()
    if args.n % args.blocks:
        raise shoal.UsageError(f"--n {args.n} must be a multiple of --blocks {args.blocks}")
    if min(args.iters, args.heat, args.lb_every, args.blocks) < 1:
        raise shoal.UsageError("--iters, --heat, --lb-every and --blocks must be >= 1")
    args.spot = args.n / 2 if args.spot is None else args.spot
    args.start = args.n / 4 if args.start is None else args.start
    if args.spot < 0:
        raise shoal.UsageError(f"--spot must be >= 0 cells, not {args.spot}")
    return args


async def main(args: argparse.Namespace):
    done = shoal.future()
    patch = Patch(args.spot, args.start, args.speed, args.heat)
    blocks = shoal.Array(Block, (args.blocks, args.blocks), at_sync=not args.no_sync,
                         args=(args.n, args.blocks, args.iters, patch, args.lb_every,
                               not args.no_sync, done))
    blocks.start()
    work, elapsed = await done
    pes = shoal.num_pes()
    steps = shoal.lb_history()
    moved = sum(s["migrations"] for s in steps)
    lb_time = sum(s["total_time"] for s in steps)
    print(f"{args.n}x{args.n} grid, {args.blocks}x{args.blocks} blocks, patch {args.spot:g} "
          f"cells at {args.heat}x from {args.start:g} moving {args.speed:g} cells/iteration, "
          f"on {pes} PEs, {'no balancing' if args.no_sync else f'{len(steps)} LB steps'}: "
          f"{elapsed / args.iters * 1e3:.2f} ms per iteration; work {work / args.iters * 1e3:.2f}"
          f" ms per iteration, perfectly balanced {work / args.iters / pes * 1e3:.2f} ms; "
          f"{moved} migrations, {lb_time:.2f} s in LB steps")
    control = shoal.control_history()
    for name, value in control["points"].items():  # shoal run --tune lb_every
        settled = [d for d in control["decisions"] if d["decision"] == "settled"]
        print(f"control point {name}: {value} in force at the end; "
              f"{len(settled)} settlement(s): "
              f"{', '.join(str(d['value']) for d in settled) or 'still exploring'}; "
              "measured: " + ", ".join(f"{d['value']} {d['seconds'] * 1e3:.2f} ms"
                                       for d in control["decisions"]
                                       if d["decision"] == "measured"))
    if args.out:  # (the patch's extra work changes nothing: the same grid as stencil2d.py)
        done = shoal.future()
        blocks.grid(done)
        h = args.n // args.blocks
        grid = np.empty((args.n, args.n))
        for (i, j), part in await done:
            grid[i * h:(i + 1) * h, j * h:(j + 1) * h] = part
        np.save(args.out, grid)


if __name__ == "__main__":
    try:
        arguments = _arguments()
    except shoal.UsageError as e:  # every rank stops here, before the runtime starts
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"stencil_hotspot: {e}", file=sys.stderr)
        sys.exit(2)
    shoal.start(main, arguments, cpu_stats=arguments.cpu_stats)
