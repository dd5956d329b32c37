"""Jacobi relaxation under EMULATED temperature control (Acun14, Section III-C, Fig. 4).

A uniform 2-D Jacobi grid in B x B blocks (chares), each doing ``--sweeps`` sweeps of its
cells per iteration and exchanging ghost layers with its four neighbours: a tightly coupled
iterative application whose work is the same on every PE, so any imbalance comes from the
PEs' frequencies. Run it with the power emulation of shoal.runtime.power (no real DVFS or
temperature sensor is used: a thermal model per core driven by the PE's measured
utilisation, and a PE at frequency f duty-cycles):

    shoal run -n 2 --power-monitor examples/power_jacobi.py                  # Base
    shoal run -n 2 --power-threshold 50C examples/power_jacobi.py            # naive DVFS
    shoal run -n 2 --power-threshold 50C --lb-period 10s examples/power_jacobi.py  # LB_10s
    shoal run -n 2 --power-threshold 50C --lb auto examples/power_jacobi.py --sync-every 20
                                                                              # MetaTemp

``--sleep-work MS`` replaces the extra sweeps by a sleep of MS milliseconds inside the entry
method (``shoal.runtime.power.emulated_work``): emulated work, which holds the PE as
computing would (the runtime counts it busy and as the PE's own time, not another
process's; the duty-cycle slows it) but takes no CPU, so the timings do not depend on
other programs on the machine. Without ``--sync-every`` the blocks never call
``at_sync()`` (balancing, if any, is periodic: ``--lb-period``); with it, every K
iterations. Prints the time, the emulated
maximum temperature per PE and the mean emulated frequency; ``--json FILE`` writes them with
every reading (``shoal.power_history()``) and balancing step, for benchmarks/power.py.
"""

import argparse
import itertools
import json
import sys
import time

import numpy as np

import shoal
from shoal.runtime.power import emulated_work


def jacobi(u: np.ndarray) -> np.ndarray:
    """One sweep over the interior of ``u`` (ghosts included in ``u``)."""
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


class Block(shoal.Chare):
    """A block, message-driven (no coroutine): it never waits suspended, so the periodic
    balancer (``--lb-period``) may move it between any two entry methods."""

    def __init__(self, n: int, blocks: int, iters: int, sweeps: int, sync_every: int, done,
                 sleep_work: float = 0.0):
        i, j = self.thisIndex
        self.iters, self.sweeps, self.sync_every, self.done = iters, sweeps, sync_every, done
        self.sleep_work = sleep_work
        h = n // blocks
        self.u = np.zeros((h + 2, h + 2))
        if i == 0:
            self.u[0, :] = 1.0  # the fixed top boundary lives in the top ghost row
        self.links = []  # (neighbour, what to send it)
        self.into = {}  # neighbour -> where its ghost layer goes
        for k, src, dst, ok in (((i - 1, j), (1, slice(1, -1)), (0, slice(1, -1)), i > 0),
                                ((i + 1, j), (-2, slice(1, -1)), (-1, slice(1, -1)),
                                 i < blocks - 1),
                                ((i, j - 1), (slice(1, -1), 1), (slice(1, -1), 0), j > 0),
                                ((i, j + 1), (slice(1, -1), -2), (slice(1, -1), -1),
                                 j < blocks - 1)):
            if ok:
                self.links.append((k, src))
                self.into[k] = dst
        self.inbox: dict[int, dict] = {}  # iteration -> {neighbour: ghost layer}
        self.it = 0

    def start(self):
        self.send_ghosts()

    def send_ghosts(self):
        for k, src in self.links:
            self.thisProxy[k].ghost(self.it, self.thisIndex, self.u[src].copy())
        self.advance()

    def ghost(self, it, sender, layer):
        self.inbox.setdefault(it, {})[sender] = layer
        self.advance()

    def advance(self):
        """The iteration, once every neighbour's ghost layer for it is here."""
        got = self.inbox.get(self.it)
        if len(self.links) and (got is None or len(got) < len(self.links)):
            return
        self.inbox.pop(self.it, None)
        u = self.u
        for k, layer in (got or {}).items():
            u[self.into[k]] = layer
        if self.sleep_work:  # emulated work: the PE is held as if busy, no CPU taken
            emulated_work(self.sleep_work)
        else:
            scratch = np.empty_like(u[1:-1, 1:-1])
            for _ in range(self.sweeps - 1):  # (extra work of the same cost: the grain)
                scratch[...] = jacobi(u)
        u[1:-1, 1:-1] = jacobi(u)
        self.it += 1
        if self.it == self.iters:
            self.contribute(float(u[1:-1, 1:-1].sum()), shoal.Reducer.sum, self.done)
        elif self.sync_every and self.it % self.sync_every == 0:
            self.at_sync()
        else:
            self.send_ghosts()

    def resume_from_sync(self):
        self.send_ghosts()


def summary(history: list[dict], npes: int) -> dict:
    """Per PE: the emulated maximum temperature and the time-weighted mean frequency."""
    out = {"max_temp": [], "mean_freq": []}
    for pe in range(npes):
        rows = sorted((r for r in history if r["pe"] == pe), key=lambda r: r["t"])
        out["max_temp"].append(max((r["temp"] for r in rows), default=float("nan")))
        span = sum(b["t"] - a["t"] for a, b in itertools.pairwise(rows))
        # the frequency recorded at a reading holds until the next one
        weighted = sum(a["freq"] * (b["t"] - a["t"]) for a, b in itertools.pairwise(rows))
        out["mean_freq"].append(weighted / span if span > 0 else 1.0)
    return out


async def main(args: argparse.Namespace):
    done = shoal.future()
    blocks = shoal.Array(Block, (args.blocks, args.blocks), at_sync=args.sync_every > 0,
                         args=(args.n, args.blocks, args.iters, args.sweeps,
                               args.sync_every, done, args.sleep_work / 1e3))
    t0 = time.perf_counter()
    blocks.start()
    checksum = await done
    elapsed = time.perf_counter() - t0
    npes = shoal.num_pes()
    history = shoal.power_history()
    steps = shoal.lb_history()
    s = summary(history, npes)
    print(f"{args.n}x{args.n} grid, {args.blocks}x{args.blocks} blocks, {args.iters} "
          f"iterations on {npes} PEs: {elapsed:.2f} s, {len(steps)} LB steps, "
          f"{sum(r['migrations'] for r in steps)} migrations; EMULATED max temperature "
          f"per PE {', '.join(f'{t:.1f}' for t in s['max_temp'])} C, mean frequency "
          f"{', '.join(f'{f:.2f}' for f in s['mean_freq'])}; checksum {checksum:.6e}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"elapsed": elapsed, "npes": npes, "checksum": checksum,
                       "history": history, **s,
                       "lb": [{k: v for k, v in r.items() if k != "auto"} for r in steps]},
                      fh)


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Jacobi under emulated temperature control")
    ap.add_argument("--n", type=int, default=2048, help="grid side, cells")
    ap.add_argument("--blocks", type=int, default=8, help="blocks per dimension")
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--sweeps", type=int, default=4, help="sweeps per block and iteration")
    ap.add_argument("--sync-every", type=int, default=0,
                    help="iterations between at_sync() calls (0: none)")
    ap.add_argument("--sleep-work", type=float, default=0.0, metavar="MS",
                    help="instead of the extra sweeps, each block sleeps MS milliseconds per "
                         "iteration inside its entry method (emulated work: the timings do "
                         "not depend on what else the machine runs)")
    ap.add_argument("--json", help="write the results and every reading here")
    args = ap.parse_args()
    if args.n % args.blocks:
        raise shoal.UsageError(f"--n {args.n} must be a multiple of --blocks {args.blocks}")
    if min(args.iters, args.sweeps, args.blocks) < 1 or args.sync_every < 0:
        raise shoal.UsageError("--iters, --sweeps and --blocks must be >= 1, "
                               "--sync-every >= 0")
    return args


if __name__ == "__main__":
    try:
        arguments = _arguments()
    except shoal.UsageError as e:
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"power_jacobi: {e}", file=sys.stderr)
        sys.exit(2)
    shoal.start(main, arguments)
