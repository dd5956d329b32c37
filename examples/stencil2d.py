"""Jacobi relaxation on an N x N grid, over-decomposed into B x B blocks (Acun14, Section II:
more work units than PEs; each block is a chare that exchanges ghost layers with its four
neighbours through channels and checks convergence with an allreduce).

The top boundary is held at 1, the others at 0. Run:
    shoal run -n 2 examples/stencil2d.py --n 4096 --blocks 4 --iters 50
``--blocks 8x4`` makes 8 rows of 4 blocks (chares per PE need not be a square).
``--out grid.npy`` gathers the final grid on PE 0 and saves it.
"""

import argparse
import time

import numpy as np

import shoal


def jacobi(u: np.ndarray) -> np.ndarray:
    """One sweep over the interior of ``u`` (ghosts included in ``u``)."""
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


class Block(shoal.Chare):
    def __init__(self, n: int, blocks: tuple[int, int]):
        i, _ = self.thisIndex
        self.blocks = blocks
        self.h, self.w = n // blocks[0], n // blocks[1]
        self.u = np.zeros((self.h + 2, self.w + 2))
        if i == 0:
            self.u[0, :] = 1.0  # the fixed top boundary lives in the top ghost row

    async def run(self, iters: int, tol: float, check: int, done):
        i, j = self.thisIndex
        rows, cols = self.blocks
        links = []  # (channel, what to send, where received data goes)
        u = self.u
        if i > 0:
            links.append((shoal.Channel(self, self.thisProxy[i - 1, j]),
                          (1, slice(1, -1)), (0, slice(1, -1))))
        if i < rows - 1:
            links.append((shoal.Channel(self, self.thisProxy[i + 1, j]),
                          (-2, slice(1, -1)), (-1, slice(1, -1))))
        if j > 0:
            links.append((shoal.Channel(self, self.thisProxy[i, j - 1]),
                          (slice(1, -1), 1), (slice(1, -1), 0)))
        if j < cols - 1:
            links.append((shoal.Channel(self, self.thisProxy[i, j + 1]),
                          (slice(1, -1), -2), (slice(1, -1), -1)))
        t0 = time.perf_counter()
        it = 0
        diff = np.inf
        while it < iters and diff > tol:
            for ch, src, _ in links:
                ch.send(u[src].copy())
            for ch, _, dst in links:
                u[dst] = await ch.recv()
            new = jacobi(u)
            it += 1
            if it % check == 0 or it == iters:
                local = float(np.abs(new - u[1:-1, 1:-1]).max())
                u[1:-1, 1:-1] = new
                diff = await self.allreduce(local, shoal.Reducer.max)
            else:
                u[1:-1, 1:-1] = new
        elapsed = time.perf_counter() - t0
        self.contribute((it, diff, elapsed), shoal.Reducer.max, done)

    def grid(self, done):
        self.contribute((self.thisIndex, self.u[1:-1, 1:-1]), shoal.Reducer.gather, done)


def _blocks(text: str) -> tuple[int, int]:
    """``--blocks``: ``B`` (B x B) or ``RxC``."""
    parts = text.lower().split("x")
    try:
        rows, cols = (int(parts[0]),) * 2 if len(parts) == 1 else (int(parts[0]), int(parts[1]))
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"{text!r}: give B or RxC (such as 4 or 8x4)") from None
    if len(parts) > 2 or min(rows, cols) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give B or RxC, each at least 1")
    return rows, cols


async def main():
    ap = argparse.ArgumentParser(description="Jacobi 2-D stencil on over-decomposed blocks")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--blocks", type=_blocks, default=(4, 4), help="blocks per dimension "
                    "(B: B x B blocks), or R x C as RxC (8x4: 8 rows of 4 blocks)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--tol", type=float, default=0.0, help="stop when max change < tol")
    ap.add_argument("--check", type=int, default=1, help="convergence test every k iters")
    ap.add_argument("--out", help="save the final grid (.npy)")
    args = ap.parse_args()
    rows, cols = args.blocks
    if args.n % rows or args.n % cols:
        raise shoal.UsageError(f"--n {args.n} must be a multiple of the blocks per "
                               f"dimension ({rows}x{cols})")
    blocks = shoal.Array(Block, (rows, cols), args=(args.n, (rows, cols)))
    done = shoal.future()
    blocks.run(args.iters, args.tol, args.check, done)
    iters, diff, elapsed = await done
    print(f"{args.n}x{args.n} grid, {rows}x{cols} blocks on {shoal.num_pes()} "
          f"PEs: {iters} iterations, max change {diff:.3e}, "
          f"{elapsed / iters * 1e3:.2f} ms per iteration")
    if args.out:
        done = shoal.future()
        blocks.grid(done)
        h, w = args.n // rows, args.n // cols
        grid = np.empty((args.n, args.n))
        for (i, j), part in await done:
            grid[i * h:(i + 1) * h, j * w:(j + 1) * w] = part
        np.save(args.out, grid)


if __name__ == "__main__":
    shoal.start(main)
