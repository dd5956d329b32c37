"""LeanMD: Lennard-Jones molecular dynamics over cells and pairwise computes, balanced by the
runtime (Acun14, Section IV-B; the code is in shoal.apps.leanmd).

Cells form a dense 3-D chare array, computes (one per pair of neighbouring cells) a sparse
6-D one. ``--distribution clustered`` (the default) puts up to twice the mean atom count in
the cells of a cluster and an eighth of it elsewhere, so the PEs holding it do most of the
work; with ``--lb-every K`` every element reaches a sync point every K steps and the balancer
(``--lb`` of ``shoal run``, default greedy_refine) moves computes and cells. Run (by default
4^3 cells, 40 atoms per cell on average, 100 steps):

    shoal run -n 2 examples/leanmd.py --lb-every 20
    shoal run -n 2 examples/leanmd.py                 # no LB

Prints the energy at every migration step, then the time per step, the energy drift against
its tolerance and a checksum of the final state (equal for equal runs, whatever the PEs and
the balancing). ``--out final.npz`` saves the final atoms (ids, x, v, f) and the energies.
``--cpu-stats`` makes the balancer weigh CPU seconds instead of wall seconds: on a machine
shared with other programs, the time they take from a core is not this program's load.
"""

import argparse
import sys

import numpy as np

import shoal
from shoal.apps.leanmd import ENERGY_TOLERANCE, Params, simulate


def parse(argv: list[str]) -> tuple[Params, argparse.Namespace]:
    d = Params()
    ap = argparse.ArgumentParser(description="LeanMD: cells and pairwise computes")
    ap.add_argument("--cells", type=int, default=d.cells, help="cells per dimension (>= 3)")
    ap.add_argument("--atoms", type=int, default=d.atoms, help="atoms per cell, on average")
    ap.add_argument("--steps", type=int, default=d.steps)
    ap.add_argument("--cutoff", type=float, default=d.cutoff, help="in sigma")
    ap.add_argument("--skin", type=float, default=d.skin, help="cell side - cutoff")
    ap.add_argument("--dt", type=float, default=d.dt)
    ap.add_argument("--migrate-every", type=int, default=d.migrate_every,
                    help="steps between atom migrations")
    ap.add_argument("--lb-every", type=int, default=d.lb_every,
                    help="steps between load balancing sync points (0: no balancing)")
    ap.add_argument("--distribution", choices=("uniform", "clustered"), default=d.distribution)
    ap.add_argument("--temperature", type=float, default=d.temperature)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--out", help="save the final atoms and the energies (.npz)")
    ap.add_argument("--cpu-stats", action="store_true", help="balance CPU seconds, not wall "
                    "seconds (on a shared machine, time other processes take is not load)")
    a = ap.parse_args(argv)
    p = Params(a.cells, a.atoms, a.steps, a.cutoff, a.skin, a.dt, a.migrate_every, a.lb_every,
               a.distribution, a.temperature, a.seed)
    return p, a


async def main(p: Params, out: str | None) -> None:
    def progress(step: int, energy: float) -> None:
        print(f"step {step:6d}  energy {energy:.10e}", flush=True)

    r = await simulate(p, progress)
    moved = sum(s["migrations"] for s in r.lb)
    lb_time = sum(s["total_time"] for s in r.lb)
    print(f"{len(r.ids)} atoms in {p.cells}^3 cells ({p.distribution}), "
          f"{14 * p.cells**3} computes on {shoal.num_pes()} PEs, "
          f"{'no balancing' if not p.lb_every else f'{len(r.lb)} LB steps'}: "
          f"{r.seconds_per_step * 1e3:.2f} ms per step; {moved} element migrations, "
          f"{lb_time:.2f} s in LB steps; {r.moved} atom moves between cells")
    ok = "ok" if r.drift <= ENERGY_TOLERANCE else "ABOVE TOLERANCE"
    print(f"energy drift {r.drift:.3e} per atom (tolerance {ENERGY_TOLERANCE:.0e}, {ok}); "
          f"farthest stray {r.stray:.3f} (skin/2 {p.skin / 2:.3f}); "
          f"checksum {r.checksum():.12e}")
    measured = [s["after_measured"] for s in r.lb if s["after_measured"] is not None]
    if measured:
        print(f"max/avg PE load {r.lb[0]['before']:.2f} before the first LB step, "
              f"{measured[-1]:.2f} after the last measured one")
    if r.stray > p.skin / 2:
        print("warning: an atom strayed farther than skin/2 outside its cell, pairs may "
              "have been missed: raise --skin or lower --migrate-every", flush=True)
    if out:
        np.savez(out, ids=r.ids, x=r.x, v=r.v, f=r.f, steps=np.array(r.steps),
                 energies=r.energies, moved=r.moved, lb_migrations=moved)


if __name__ == "__main__":
    params, args = parse(sys.argv[1:])
    try:
        params.check()
    except shoal.UsageError as e:  # every rank stops here, before the runtime starts
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"leanmd: {e}", file=sys.stderr)
        sys.exit(2)
    shoal.start(main, params, args.out, cpu_stats=args.cpu_stats)
