"""AMR: a blob advected across the periodic unit square on a quadtree of blocks that refines
and coarsens around it (Acun14, Section IV-A: AMR3D, here in 2-D; the code is in
shoal.apps.amr).

Each block (``--block`` x ``--block`` cells) is an element of a sparse chare array indexed
by its place in the tree, ``(level, i, j)``. Every ``--remesh-every`` steps blocks whose
largest jump between neighbouring cells exceeds ``--refine-tol`` insert their four
children and delete themselves, families of four below ``--coarsen-tol`` make way for their
parent; neighbours agree on the 2:1 balance by messages, and each remeshing ends by
quiescence detection. With ``--lb-every K`` the balancer (``--lb`` of ``shoal run``,
default greedy_refine) moves blocks after every K-th remeshing. Run (by default levels 2
to 5, 8x8 cells per block, 200 steps, remeshing every 4):

    shoal run -n 2 examples/amr.py --lb-every 2
    shoal run -n 2 examples/amr.py                 # no LB

Prints, after every remeshing, the step, the blocks per level, the total of the scalar and
the time per step and of the remeshing; then timesteps per second, the median remeshing
time, the conservation of the total (its largest relative change, against a tolerance of
1e-12) and a checksum of the final blocks (equal for equal runs, whatever the PEs and the
balancing). ``--serial`` also runs the serial reference on PE 0 and says whether it gives
the same bits. ``--out final.npz`` saves the final blocks and the per-cycle figures.
"""

import argparse
import statistics
import sys
import time

import numpy as np

import shoal
from shoal.apps.amr import MASS_TOLERANCE, Params, Result, serial, simulate


def parse(argv: list[str]) -> tuple[Params, argparse.Namespace]:
    d = Params()
    ap = argparse.ArgumentParser(description="AMR: an advected blob on a quadtree of blocks")
    ap.add_argument("--block", type=int, default=8, help="cells per block side (even)")
    ap.add_argument("--min-level", type=int, default=d.min_level)
    ap.add_argument("--max-level", type=int, default=d.max_level)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--remesh-every", type=int, default=d.remesh_every,
                    help="steps between remeshings")
    ap.add_argument("--lb-every", type=int, default=d.lb_every,
                    help="remeshings between load balancing steps (0: no balancing)")
    ap.add_argument("--vx", type=float, default=d.vx)
    ap.add_argument("--vy", type=float, default=d.vy)
    ap.add_argument("--cfl", type=float, default=d.cfl)
    ap.add_argument("--refine-tol", type=float, default=d.refine_tol)
    ap.add_argument("--coarsen-tol", type=float, default=d.coarsen_tol)
    ap.add_argument("--width", type=float, default=d.width, help="of the Gaussian blob")
    ap.add_argument("--serial", action="store_true",
                    help="also run the serial reference (on PE 0) and compare")
    ap.add_argument("--out", help="save the final blocks and the figures (.npz)")
    ap.add_argument("--quiet", action="store_true", help="no line per remeshing")
    ap.add_argument("--cpu-stats", action="store_true", help="balance CPU seconds, not wall "
                    "seconds (on a shared machine, time other processes take is not load)")
    a = ap.parse_args(argv)
    p = Params(block=a.block, min_level=a.min_level, max_level=a.max_level, steps=a.steps,
               remesh_every=a.remesh_every, lb_every=a.lb_every, vx=a.vx, vy=a.vy, cfl=a.cfl,
               refine_tol=a.refine_tol, coarsen_tol=a.coarsen_tol, width=a.width)
    return p, a


def levels(counts: dict[int, int]) -> str:
    return " ".join(f"L{lv}:{n}" for lv, n in counts.items())


async def main(p: Params, a: argparse.Namespace) -> None:
    def progress(r: Result, c: int) -> None:
        if a.quiet:
            return
        n = r.steps[-1] - (r.steps[-2] if c else 0)
        remesh = (f"  remesh {r.remesh_seconds[c] * 1e3:6.1f} ms"
                  if c < len(r.remesh_seconds) else "")
        print(f"step {r.steps[-1]:5d}  {sum(r.levels[-1].values()):5d} blocks "
              f"({levels(r.levels[-1])})  total {r.masses[-1]:.15e}  "
              f"{r.step_seconds[-1] / n * 1e3:7.2f} ms/step{remesh}", flush=True)

    r = await simulate(p, progress)
    moved = sum(s["migrations"] for s in r.lb)
    remesh = statistics.median(r.remesh_seconds) if r.remesh_seconds else float("nan")
    cells = sum(r.levels[-1].values()) * p.block ** 2
    print(f"levels {p.min_level}-{p.max_level}, {p.block}x{p.block} cells per block, "
          f"{p.steps} steps on {shoal.num_pes()} PEs, "
          f"{'no balancing' if not p.lb_every else f'{len(r.lb)} LB steps, {moved} moves'}: "
          f"{r.steps_per_second:.1f} timesteps/s; remeshing {remesh * 1e3:.1f} ms "
          f"(median of {len(r.remesh_seconds)}); {sum(r.levels[-1].values())} blocks, "
          f"{cells} cells at the end")
    ok = "ok" if r.drift <= MASS_TOLERANCE else "ABOVE TOLERANCE"
    print(f"total of u: relative change {r.drift:.2e} (tolerance {MASS_TOLERANCE:.0e}, {ok}); "
          f"checksum {r.checksum()}", flush=True)
    if a.serial:
        t0 = time.perf_counter()
        s = serial(p)
        same = (sorted(s.blocks) == sorted(r.blocks) and s.masses == r.masses
                and s.levels == r.levels and s.nb == r.nb
                and all(np.array_equal(s.blocks[k], r.blocks[k]) for k in s.blocks))
        print(f"serial reference ({time.perf_counter() - t0:.2f} s): checksum "
              f"{s.checksum()}, {'the same bits' if same else 'DIFFERENT'}", flush=True)
    if a.out:
        keys = sorted(r.blocks)
        np.savez(a.out, keys=np.array(keys, np.int64), cells=np.array([r.blocks[k] for k in
                                                                        keys]),
                 nb=np.array([r.nb[k] for k in keys], np.int64), steps=np.array(r.steps),
                 masses=np.array(r.masses), step_seconds=np.array(r.step_seconds),
                 remesh_seconds=np.array(r.remesh_seconds), lb_migrations=moved,
                 levels=np.array([[c.get(lv, 0) for lv in range(p.max_level + 1)]
                                  for c in r.levels], np.int64))


if __name__ == "__main__":
    params, args = parse(sys.argv[1:])
    try:
        params.check()
    except shoal.UsageError as e:  # every rank stops here, before the runtime starts
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"amr: {e}", file=sys.stderr)
        sys.exit(2)
    shoal.start(main, params, args, cpu_stats=args.cpu_stats)
