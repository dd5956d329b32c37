"""PHOLD under the YAWNS windowed conservative protocol (Acun14, Section IV-E; the code is
in shoal.apps.pdes).

LPs form a chare array, ``--lps`` per PE. Each window a reduction finds the earliest pending
event (and checks that every event sent so far has arrived); every LP then executes its
events before that time + lookahead, in timestamp order, each sending one new event to a
random LP (on another PE with probability ``--remote``) at now + lookahead + an exponential
delay. ``--aggregate`` sends events through a shoal.Aggregator instead of one message each.
Run:

    shoal run -n 2 examples/phold.py --lps 40 --events 256 --end-time 10 --aggregate
    shoal run -n 2 examples/phold.py --lps 40 --events 256 --end-time 10    # direct sends

Prints the committed events, the event rate and the windows, then the checks:
every LP executed its events in non-decreasing timestamp order, events are conserved, and
the total and per-LP counts (and last timestamps and windows) equal those of a serial run of
the same seed on PE 0. ``--out run.npz`` saves the per-LP counts of the parallel run.
"""

import argparse
import sys
import time

import numpy as np

import shoal
from shoal.apps.pdes import Params, serial, simulate
from shoal.runtime.vmesh import mesh_shape


def parse(argv: list[str]) -> tuple[Params, argparse.Namespace]:
    d = Params()
    ap = argparse.ArgumentParser(description="PHOLD under YAWNS")
    ap.add_argument("--lps", type=int, default=d.lps, help="LPs per PE")
    ap.add_argument("--events", type=int, default=d.events, help="initial events per LP")
    ap.add_argument("--lookahead", type=float, default=d.lookahead,
                    help="least delay of an event (> 0), the window length")
    ap.add_argument("--mean-delay", type=float, default=d.mean_delay,
                    help="mean of the exponential part of a delay")
    ap.add_argument("--remote", type=float, default=d.remote,
                    help="probability that an event goes to an LP on another PE")
    ap.add_argument("--end-time", type=float, default=d.end_time,
                    help="virtual time at which the simulation stops")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--aggregate", action="store_true",
                    help="send events through a shoal.Aggregator")
    ap.add_argument("--buffer-items", type=int, default=1024,
                    help="events per aggregation buffer (with --aggregate)")
    ap.add_argument("--mesh", help="sides of the aggregation's virtual mesh of PEs, e.g. 2x2 "
                    "(with --aggregate; default: chosen from the number of PEs)")
    ap.add_argument("--out", help="save the per-LP counts of the parallel run (.npz)")
    a = ap.parse_args(argv)
    p = Params(a.lps, a.events, a.lookahead, a.mean_delay, a.remote, a.end_time, a.seed)
    return p, a


async def main(p: Params, a: argparse.Namespace) -> None:
    r = await simulate(p, aggregate=a.aggregate, buffer_items=a.buffer_items, mesh=a.mesh,
                       progress=True)
    npes = shoal.num_pes()
    mode = "direct sends"
    if a.aggregate:
        mesh = "" if a.mesh is None else f", mesh {'x'.join(map(str, a.mesh))}"
        mode = f"aggregated ({a.buffer_items} per buffer{mesh})"
    print(f"{npes * p.lps} LPs on {npes} PEs, {p.events} initial events per LP, lookahead "
          f"{p.lookahead:g}, remote {p.remote:g}, end time {p.end_time:g}, {mode}")
    print(f"{r.total} events committed in {r.seconds:.3f} s: {r.rate:.0f} events/s; "
          f"{r.windows} windows, {r.waited.sum()} waits of an LP for events in flight",
          flush=True)
    moved = sum(step["migrations"] for step in shoal.lb_history())
    if moved:
        print(f"{len(shoal.lb_history())} load-balancing steps moved LPs {moved} times")
    t0 = time.perf_counter()
    ref = serial(p, npes)
    took = time.perf_counter() - t0
    order = "ok" if not r.disorder.any() else f"FAILED at {np.count_nonzero(r.disorder)} LPs"
    kept = "ok" if r.conserved(p) else "FAILED"
    diff = r.differences(ref)
    same = "ok" if not diff else "DIFFER in " + ", ".join(diff)
    print(f"timestamp order per LP {order}; conservation {kept}; serial run ({took:.2f} s): "
          f"{ref.total} events, per-LP counts {same}")
    if a.out:
        np.savez(a.out, **r.arrays(), lb_migrations=moved)


def check(p: Params, a: argparse.Namespace, npes: int) -> None:
    """Refuse what cannot run (a :class:`shoal.UsageError` saying what to change); turn
    ``--mesh`` into a tuple of sides."""
    p.check()
    if a.buffer_items < 1:
        raise shoal.UsageError(f"--buffer-items must be >= 1 (got {a.buffer_items})")
    if a.mesh is not None:
        try:
            a.mesh = tuple(int(s) for s in a.mesh.lower().split("x"))
        except ValueError:
            raise shoal.UsageError(f"--mesh takes sides like 2x2, not {a.mesh!r}") from None
        mesh_shape(npes, a.mesh)


if __name__ == "__main__":
    from mpi4py import MPI

    params, args = parse(sys.argv[1:])
    try:
        check(params, args, MPI.COMM_WORLD.Get_size())
    except shoal.UsageError as e:  # every rank stops here, before the runtime starts
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"phold: {e}", file=sys.stderr)
        sys.exit(2)
    shoal.start(main, params, args)
