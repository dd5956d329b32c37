"""Messaging between PEs on two nodes of the emulated cluster: shoal against mpi4py in the
same run, with the links as they are, then with ``tc netem`` delay and loss.

The three figures of ``runtime_messaging.py`` (8-byte one-way latency, rate of small
messages PE 0 -> PE 1, 1 MiB one-way), each job ``srun -N 2 -n 2 --mpi=pmi2`` with one PE
on ``n1`` and one on ``n2``. The emulated nodes share one kernel, so MPI (UCX) would pass
their messages through shared memory; every job runs with MPICH's OFI netmod over TCP on
``eth0`` (``OVER_LINKS``), so the traffic crosses the nodes' links
(``../shared/cluster-facts.md``; why not UCX's TCP: :mod:`shoal.cluster.emulated`).
Delay and loss need the kernel's ``netem`` queueing discipline; where it is missing they
are reported as not measured, and ``rate`` (``tbf``) shapes the links instead. Jobs of the
two
implementations alternate; each figure is the median of every measurement of every run,
with the spread of the runs' medians. Under delay and loss, a stencil (``examples/
stencil2d.py``) across the two nodes must end with the checksum it has on one node.

Targets (issue 24): 1 MiB <= 1.2x mpi4py, rate >= 0.5x, latency <= mpi4py + 12 us.

Usage: python benchmarks/cluster_messaging.py [--runs 3] [--repeat 3]
           [--conditions plain,rate=1Gbit,delay=1ms,loss=1%]
(as root, with Slurm installed: make cluster-deps)
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from shoal.cluster.emulated import OVER_LINKS, EmulatedCluster
from shoal.errors import UsageError
from shoal.units import parse_duration, parse_fraction, parse_rate

HERE = Path(__file__).resolve().parent
MESSAGING = HERE / "runtime_messaging.py"
STENCIL = HERE.parent / "examples" / "stencil2d.py"
STENCIL_ARGS = ["--n", "512", "--blocks", "4", "--iters", "20"]
ROWS = [("8-byte one-way latency (us)", "latency", 1e6),
        ("small messages PE0 -> PE1 (k msg/s)", "rate", 1e-3),
        ("1 MiB one-way (us)", "big", 1e6)]


def environment(cluster: EmulatedCluster) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SHOAL_", "UCX_"))}
    return {**env, **cluster.env(), **OVER_LINKS}


def job(cluster: EmulatedCluster, impl: str, repeat: int) -> dict:
    cmd = ["srun", "-N", "2", "-n", "2", "--ntasks-per-node=1", "-w", "n1,n2", "--mpi=pmi2",
           sys.executable, str(MESSAGING), "--job", impl, "--repeat", str(repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                         env=environment(cluster))
    if out.returncode:
        raise RuntimeError(f"{impl} failed:\n{out.stderr[-2000:]}")
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("{")))


def checksum(cluster: EmulatedCluster | None) -> str:
    """The sha256 of the stencil's final grid computed across n1 and n2 (``cluster``), or
    on this host (None); the grid goes through a directory every node sees."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as shared:
        grid = Path(shared) / "grid.npy"
        args = [str(STENCIL), *STENCIL_ARGS, "--out", str(grid)]
        if cluster is None:
            cmd, env = [sys.executable, "-m", "shoal", "run", "-n", "2", *args], None
        else:
            cmd = ["srun", "-N", "2", "-n", "2", "--ntasks-per-node=1", "-w", "n1,n2",
                   "--mpi=pmi2", sys.executable, *args]
            env = environment(cluster)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if out.returncode or not grid.exists():
            raise RuntimeError(f"the stencil failed:\n{out.stderr[-2000:]}")
        return hashlib.sha256(np.load(grid).tobytes()).hexdigest()


def condition(cluster: EmulatedCluster, spec: str) -> str:
    """Shape the links for ``spec`` (plain, rate=1Gbit, delay=1ms, loss=1%); its label.
    Raises :class:`UsageError` where the kernel cannot (no netem: delay, loss)."""
    cluster.shape()  # clear
    if spec == "plain":
        return "links as they are"
    what, _, value = spec.partition("=")
    if what == "delay":
        cluster.shape(delay=parse_duration(value, "delay"))
    elif what == "loss":
        cluster.shape(loss=parse_fraction(value, "loss"))
    elif what == "rate":
        cluster.shape(rate=parse_rate(value, "rate"))
    else:
        raise SystemExit(f"--conditions: {spec!r} is not plain, rate=R, delay=T or loss=P%")
    return f"{what} {value} on every node's link"


def measure(cluster: EmulatedCluster, runs: int, repeat: int) -> dict:
    res: dict[str, dict[str, list[list[float]]]] = {"shoal": {}, "mpi4py": {}}
    for _ in range(runs):
        for impl in res:
            for key, values in job(cluster, impl, repeat).items():
                res[impl].setdefault(key, []).append(values)
    return res


def report(label: str, res: dict, exact: bool) -> None:
    med = {i: {k: statistics.median(v for run in r for v in run) for k, r in d.items()}
           for i, d in res.items()}
    s, m = med["shoal"], med["mpi4py"]
    print(f"\n{label} (stencil checksum {'equal' if exact else 'DIFFERENT'} to one node's)")
    print(f"{'':38}{'shoal':>26}{'mpi4py':>26}   shoal vs mpi4py")
    for name, key, scale in ROWS:
        cells = ""
        for impl in ("shoal", "mpi4py"):
            meds = [statistics.median(run) * scale for run in res[impl][key]]
            cells += f" {med[impl][key] * scale:.1f} ({min(meds):.4g}-{max(meds):.4g})".rjust(26)
        if key == "latency":
            vs = f"+{(s[key] - m[key]) * 1e6:.1f} us (target <= +12 us)"
        elif key == "rate":
            vs = f"{s[key] / m[key]:.2f}x (target >= 0.5x)"
        else:
            vs = f"{s[key] / m[key]:.2f}x (target <= 1.2x)"
        print(f"{name:38}{cells}   {vs}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="jobs per implementation")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per job")
    ap.add_argument("--conditions", default="plain,rate=1Gbit,delay=1ms,loss=1%")
    ap.add_argument("--name", default=f"b{os.getpid() % 100000}",
                    help="the emulated cluster's name (brought up and down here)")
    args = ap.parse_args()
    reference = checksum(None)
    cluster = EmulatedCluster(args.name)
    t0 = time.perf_counter()
    cluster.up(nodes=2)
    links = " ".join(f"{k}={v}" for k, v in OVER_LINKS.items())
    print(f"emulated cluster {args.name}: 2 nodes up in {time.perf_counter() - t0:.1f} s; "
          f"jobs: srun -N 2 -n 2 --mpi=pmi2, {links}; medians "
          f"of {args.runs} jobs x {args.repeat} measurements (min-max of the runs' medians); load "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    try:
        for spec in args.conditions.split(","):
            try:
                label = condition(cluster, spec)
            except UsageError as exc:
                print(f"\n{spec}: not measured: {exc}")
                continue
            res = measure(cluster, args.runs, args.repeat)
            report(label, res, checksum(cluster) == reference)
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
