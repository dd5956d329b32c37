"""Barnes-Hut: a gravitational tree code over tree pieces with a per-PE cache of remote
nodes, balanced by orthogonal recursive bisection (Acun14, IV-C; the code is in
shoal.apps.barneshut).

Particles start in ``--clusters`` Plummer spheres (the default 4, masses 5:1, so the PEs
holding the dense ones have more work); tree pieces (``--pieces``, default 8 per PE) own runs
of the Morton curve with equal particle counts. With ``--lb-every K`` the pieces reach a sync
point every K steps and the balancer moves them (``orb`` unless ``--lb`` or ``shoal run
--lb`` says otherwise). Run:

    shoal run -n 2 examples/barneshut.py --n 20000 --steps 20 --lb-every 5
    shoal run -n 2 examples/barneshut.py --n 20000 --steps 20                 # no LB

Prints the energies at every reported step, then the time per step, interactions per
second, the caches' requests and a checksum of the final state (equal for equal runs,
whatever the PEs, the pieces and the balancing). ``--out final.npz`` saves the final
particles (ids, x, v, acc, pot) and the energies; ``--check K`` compares the accelerations
of K particles at the last step with direct summation and prints the relative errors.
"""

import argparse
import os
import sys

import numpy as np

import shoal
from shoal.apps.barneshut import Params, direct_forces, initial_state, simulate


def parse(argv: list[str]) -> tuple[Params, argparse.Namespace]:
    d = Params()
    ap = argparse.ArgumentParser(description="Barnes-Hut over tree pieces")
    ap.add_argument("--n", type=int, default=d.n, help="particles")
    ap.add_argument("--steps", type=int, default=d.steps)
    ap.add_argument("--dt", type=float, default=d.dt)
    ap.add_argument("--theta", type=float, default=d.theta, help="opening angle")
    ap.add_argument("--eps", type=float, default=d.eps, help="Plummer softening")
    ap.add_argument("--bucket", type=int, default=d.bucket, help="particles per leaf, at most")
    ap.add_argument("--pieces", type=int, default=d.pieces, help="tree pieces (0: 8 per PE)")
    ap.add_argument("--domain-factor", type=int, default=d.domain_factor,
                    help="domain leaves per piece, about")
    ap.add_argument("--fetch-depth", type=int, default=d.fetch_depth,
                    help="levels of a remote node's subtree sent per request")
    ap.add_argument("--clusters", type=int, default=d.clusters, help="Plummer spheres")
    ap.add_argument("--size", type=float, default=d.size, help="their scale radius, about")
    ap.add_argument("--lb-every", type=int, default=d.lb_every,
                    help="steps between load balancing sync points (0: no balancing)")
    ap.add_argument("--lb", help="strategy (default: shoal run's --lb, else orb)")
    ap.add_argument("--report-every", type=int, default=d.report_every)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--decomposition", choices=("oct", "sfc"), default=d.decomposition,
                    help="pieces of equal volume (oct, the paper's) or equal counts (sfc)")
    ap.add_argument("--check", type=int, default=0,
                    help="compare the last step's accelerations of this many particles "
                         "with direct summation")
    ap.add_argument("--out", help="save the final particles and the energies (.npz)")
    ap.add_argument("--cpu-stats", action="store_true", help="balance CPU seconds, not wall "
                    "seconds (on a shared machine, time other processes take is not load)")
    a = ap.parse_args(argv)
    p = Params(a.n, a.steps, a.dt, a.theta, a.eps, a.bucket, a.pieces, a.domain_factor,
               a.fetch_depth, a.clusters, a.size, a.lb_every, a.report_every, a.seed,
               a.decomposition)
    return p, a


async def main(p: Params, a: argparse.Namespace) -> None:
    def progress(step: int, ekin: float, epot: float, inter: tuple[int, int]) -> None:
        print(f"step {step:5d}  energy {ekin + epot:.12e}  kinetic {ekin:.6e}  "
              f"potential {epot:.6e}  interactions {sum(inter)}", flush=True)

    r = await simulate(p, progress)
    moved = sum(s["migrations"] for s in r.lb)
    per_step = r.interactions_per_step()
    print(f"{p.n} particles in {p.clusters} Plummer spheres, {r.pieces} tree pieces on "
          f"{shoal.num_pes()} PEs, theta {p.theta}, "
          f"{'no balancing' if not p.lb_every else f'{len(r.lb)} LB steps'}: "
          f"{r.seconds_per_step * 1e3:.2f} ms per step; {moved} piece migrations, "
          f"{sum(s['total_time'] for s in r.lb):.2f} s in LB steps")
    after = p.lb_every or p.report_every  # the first LB step comes after step lb_every
    if after < p.steps:
        print(f"from step {after} on: {r.seconds_per_step_after(after) * 1e3:.2f} ms per step")
    print(f"{per_step:.4g} interactions per step, "
          f"{per_step / r.seconds_per_step:.4g} per second; caches: {r.cache['requests']} "
          f"requests for {r.cache['asked']} nodes ({r.cache['shared']} misses shared on "
          f"a PE), {r.cache['rows']} nodes and {r.cache['particles']} particles received")
    print(f"energy drift {r.drift:.3e} (relative); checksum {r.checksum():.12e}")
    measured = [s["after_measured"] for s in r.lb if s["after_measured"] is not None]
    if measured:
        print(f"max/avg PE load {r.lb[0]['before']:.2f} before the first LB step, "
              f"{measured[-1]:.2f} after the last measured one")
    if a.check:
        m = initial_state(p)[3]
        pick = np.linspace(0, p.n - 1, min(a.check, p.n)).astype(int)
        ref, _ = direct_forces(r.x, m, p.eps, pick)
        err = np.linalg.norm(r.acc[pick] - ref, axis=1) / np.linalg.norm(ref, axis=1)
        print(f"force error at step {p.steps} against direct summation ({len(pick)} particles): "
              f"median {np.median(err):.2e}, 99th percentile {np.percentile(err, 99):.2e}, "
              f"max {err.max():.2e}")
    if a.out:
        np.savez(a.out, ids=r.ids, x=r.x, v=r.v, acc=r.acc, pot=r.pot, steps=np.array(r.steps),
                 ekin=r.ekin, epot=r.epot, lb_migrations=moved)


if __name__ == "__main__":
    params, args = parse(sys.argv[1:])
    try:
        params.check()
    except shoal.UsageError as e:  # every rank stops here, before the runtime starts
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"barneshut: {e}", file=sys.stderr)
        sys.exit(2)
    lb = args.lb or os.environ.get("SHOAL_LB") or "orb"
    shoal.start(main, params, args, cpu_stats=args.cpu_stats, lb=lb)
