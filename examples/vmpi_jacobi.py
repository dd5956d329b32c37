"""Jacobi relaxation written as an MPI program (Acun14, Section IV-D: an MPI code run as
AMPI's virtual ranks): each rank owns a strip of rows of an N x N grid, trades ghost rows
with the ranks above and below by ``sendrecv`` and checks convergence with an ``allreduce``
(MAX) every iteration; every ``--migrate-every`` iterations it calls ``comm.migrate()``, where
shoal's balancer may move ranks. The same class runs as virtual ranks of shoal.vmpi or, with
``--native``, one rank per process over mpi4py itself:

    shoal run -n 2 --lb greedy_refine examples/vmpi_jacobi.py --ranks-per-pe 8
    mpiexec -n 2 python examples/vmpi_jacobi.py --native

``--heavy K``: the first quarter of the grid's rows costs K passes of a compute-bound kernel
more than the others (``np.sin`` over them, its result unused, so the grid is unchanged):
the imbalanced variant, where the ranks that own those rows do more work. The top
boundary is held at 1, the others at 0. The grid does not depend on the decomposition: every
cell is computed by the same arithmetic, so the grid (its SHA-256, gathered on rank 0) and
the maximum change (a MAX, exact in any order) are the same bits on any number of ranks,
virtual or not.
"""

import argparse
import hashlib
import sys

import numpy as np

from shoal import vmpi


def sweep(u: np.ndarray) -> np.ndarray:
    """One Jacobi sweep over the interior of ``u`` (ghost rows and columns included)."""
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


class Jacobi:
    """One MPI rank's part of the solver: the state is this object (it migrates); ``run`` is
    entered again after every ``comm.migrate()`` and goes on from ``self.it``."""

    def __init__(self, n: int, iters: int, heavy: int, every: int):
        self.n, self.iters, self.heavy, self.every = n, iters, heavy, every
        self.it = 0
        self.u = None  # this rank's strip with its ghost rows and columns
        self.diff = np.inf
        self.t0 = 0.0
        self.stamps: list[float] = []  # rank 0: the time at the end of each iteration

    def setup(self, comm) -> None:
        rank, size = comm.Get_rank(), comm.Get_size()
        n = self.n
        self.lo, self.hi = rank * n // size, (rank + 1) * n // size  # my rows
        self.u = np.zeros((self.hi - self.lo + 2, n + 2))
        if rank == 0:
            self.u[0, :] = 1.0  # the fixed top boundary lives in rank 0's top ghost row
        band = n // 4  # the heavy rows: the first quarter of the grid
        self.heavy_rows = (0, max(0, min(self.hi, band) - self.lo))

    async def run(self, comm):
        rank, size = comm.rank, comm.size
        if self.u is None:
            self.setup(comm)
            await comm.barrier()
            self.t0 = vmpi.Wtime()
        up = rank - 1 if rank > 0 else vmpi.PROC_NULL
        down = rank + 1 if rank < size - 1 else vmpi.PROC_NULL
        u = self.u
        a, b = self.heavy_rows
        for it in range(self.it, self.iters):
            ghost = await comm.sendrecv(u[1], up, 0, None, down, 0)
            if ghost is not None:
                u[-1] = ghost
            ghost = await comm.sendrecv(u[-2], down, 1, None, up, 1)
            if ghost is not None:
                u[0] = ghost
            new = sweep(u)
            for _ in range(self.heavy if b > a else 0):  # the heavy rows' extra work
                np.sin(new[a:b])  # (compute-bound: cache-blind, its result unused)
            local = float(np.abs(new - u[1:-1, 1:-1]).max())
            u[1:-1, 1:-1] = new
            self.diff = await comm.allreduce(local, vmpi.MAX)
            if rank == 0:
                self.stamps.append(vmpi.Wtime())
            self.it = it + 1
            if self.every and self.it % self.every == 0 and self.it < self.iters:
                await comm.migrate()  # run() starts again, from self.it
        elapsed = await comm.allreduce(vmpi.Wtime() - self.t0, vmpi.MAX)
        parts = await comm.gather(u[1:-1, 1:-1], root=0)
        if rank != 0:
            return None
        grid = np.vstack(parts)
        steps = np.diff([self.t0, *self.stamps])
        return {"ms": elapsed / self.iters * 1e3, "diff": self.diff,
                "sha": hashlib.sha256(grid.tobytes()).hexdigest()[:16],
                "steady_ms": float(np.median(steps[len(steps) // 2:])) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description="Jacobi 2-D as an MPI program, on virtual ranks")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--heavy", type=int, default=0,
                    help="extra work on the first quarter of the rows (imbalance)")
    ap.add_argument("--migrate-every", type=int, default=20,
                    help="iterations between comm.migrate() calls (0: never)")
    ap.add_argument("--ranks-per-pe", type=int, default=8)
    ap.add_argument("--ranks", type=int, help="virtual ranks in all (default: per PE x PEs)")
    ap.add_argument("--cpu-stats", action="store_true",
                    help="the balancer weighs ranks by CPU seconds (not wall seconds)")
    ap.add_argument("--lb-steps", action="store_true", help="print each balancing step")
    ap.add_argument("--native", action="store_true",
                    help="one rank per process over mpi4py (launch with mpiexec -n P)")
    args = ap.parse_args()
    rank_args = (args.n, args.iters, args.heavy, args.migrate_every)
    if args.native:
        from mpi4py import MPI

        res = vmpi.run(Jacobi, args=rank_args, native=True)
        nranks = pes = MPI.COMM_WORLD.Get_size()
        mode = "mpi4py"
    else:
        options = {"cpu_stats": True} if args.cpu_stats else {}
        res = vmpi.run(Jacobi, args.ranks, per_pe=args.ranks_per_pe, args=rank_args,
                       **options)
        if res is not None:
            nranks, pes = vmpi.last_run()["nranks"], vmpi.last_run()["pes"]
            for step in vmpi.last_run()["lb"] if args.lb_steps else ():
                print(f"  LB step {step['step']}: max/avg {step['before']:.2f} -> "
                      f"{step['after_predicted']:.2f} predicted, "
                      f"{step.get('after_measured') or float('nan'):.2f} measured, "
                      f"{step['migrations']} migrations")
        mode = "vmpi"
    if res is None:
        return
    out = res[0]
    moved = "" if args.native else f", {vmpi.last_run()['migrations']} migrations"
    print(f"{mode}: {nranks} ranks on {pes} PEs, {args.n}x{args.n}, {args.iters} iterations, "
          f"heavy {args.heavy}: {out['ms']:.2f} ms per iteration (steady {out['steady_ms']:.2f}"
          f"){moved}; max change {out['diff'].hex()} ({out['diff']:.6e}); grid sha256 "
          f"{out['sha']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
