"""One-way time of a numpy array between 2 PEs by size: shoal (large buffers through shared
memory), shoal-mpi (``shm_bytes=0``: every buffer by MPI, as between nodes) and raw mpi4py
``Send``/``Recv`` into a buffer it keeps; and ``memcpy``, one ``np.copyto`` of the same size
in one process: the floor of any transfer that moves the bytes once. Ping-pong / 2, jobs
interleaved, medians, and the spread over runs (see runtime_messaging.py).

A buffer larger than a PE's shared segment (``shm_bytes``, 32 MiB by default) goes by MPI
even between PEs of a node: the 256 MiB row is MPI's path in both shoal columns unless
``--shm-bytes`` makes room for it; and a buffer received by MPI that is larger than the
pool of receive buffers (``pool_bytes``, 64 MiB) is fresh memory on every message (its
pages are faulted in and zeroed by the kernel), where mpi4py's column receives into one
buffer it keeps: ``--pool-bytes`` sets it.

Usage: python benchmarks/runtime_sizes.py
           [--sizes 8B,1KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,256MiB]
           [--runs 3] [--repeat 3] [--shm-bytes 32MiB] [--pool-bytes 64MiB]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from runtime_messaging import Pong, mpi_pingpong, print_spread  # the same ping-pong

import shoal
from shoal.units import format_bytes, parse_size


def pings(nbytes: int) -> int:
    """Round trips per measurement: about a gigabyte moved per measurement above 4 MiB."""
    if nbytes <= 64 << 10:
        return 2000
    return 200 if nbytes <= 4 << 20 else max(4, (1 << 30) // (2 * nbytes))


def shoal_job(sizes, repeat, shm_bytes, pool_bytes):
    async def main():
        arr = shoal.Array(Pong, 2)
        out = {n: [] for n in sizes}
        for _ in range(repeat):
            for n in sizes:
                fut = shoal.future()
                arr[0].start(pings(n), np.ones(n, np.uint8), fut)
                out[n].append(await fut)
        print(json.dumps(out))

    shoal.start(main, shm_bytes=shm_bytes, pool_bytes=pool_bytes)


def mpi4py_job(sizes, repeat):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = {n: [] for n in sizes}
    for _ in range(repeat):
        for n in sizes:
            data, buf = np.ones(n, np.uint8), np.empty(n, np.uint8)
            out[n].append(mpi_pingpong(comm, data, buf, pings(n)))
    if comm.Get_rank() == 0:
        print(json.dumps(out))


def memcpy_job(sizes, repeat):
    """Rank 0 copies each size ``pings`` times (rank 1 does nothing): seconds per copy."""
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank():
        return
    out = {n: [] for n in sizes}
    for _ in range(repeat):
        for n in sizes:
            data, buf = np.ones(n, np.uint8), np.zeros(n, np.uint8)  # (both paged in)
            k = pings(n)
            t0 = time.perf_counter()
            for _ in range(k):
                np.copyto(buf, data)
            out[n].append((time.perf_counter() - t0) / k)
    print(json.dumps(out))


JOBS = {"shoal": shoal_job, "shoal-mpi": lambda s, r, shm, pool: shoal_job(s, r, 0, pool),
        "mpi4py": lambda s, r, shm, pool: mpi4py_job(s, r),
        "memcpy": lambda s, r, shm, pool: memcpy_job(s, r)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8B,1KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,256MiB")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per job and size")
    ap.add_argument("--runs", type=int, default=3, help="jobs per implementation")
    ap.add_argument("--shm-bytes", default="32MiB", help="shoal's shared segment per PE")
    ap.add_argument("--pool-bytes", default="64MiB",
                    help="shoal's pool of receive buffers per PE (a larger buffer is fresh "
                         "memory on every message)")
    ap.add_argument("--job", choices=sorted(JOBS))
    args = ap.parse_args()
    sizes = [parse_size(s, "--sizes") for s in args.sizes.split(",")]
    if args.job:
        JOBS[args.job](sizes, args.repeat, parse_size(args.shm_bytes, "--shm-bytes"),
                       parse_size(args.pool_bytes, "--pool-bytes"))
        return
    from shoal.launch import mpiexec

    load = os.getloadavg()
    res = {impl: {n: [] for n in sizes} for impl in JOBS}  # one list per run
    for _ in range(args.runs):
        for impl in JOBS:
            cmd = [*mpiexec(), "-n", "2", sys.executable, __file__, "--job", impl,
                   "--sizes", args.sizes, "--repeat", str(args.repeat),
                   "--shm-bytes", args.shm_bytes, "--pool-bytes", args.pool_bytes]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                raise RuntimeError(f"{impl} failed:\n{out.stderr[-2000:]}")
            line = next(x for x in out.stdout.splitlines() if x.startswith("{"))
            for n, values in json.loads(line).items():
                res[impl][int(n)].append(values)
    print(f"one-way time (us), 2 PEs, medians of {args.runs} jobs x {args.repeat}")
    print(f"{'size':>10}" + "".join(f"{i:>12}" for i in JOBS)
          + "  shoal/mpi4py  shoal-mpi/mpi4py  shoal/memcpy  mpi4py/memcpy")
    for n in sizes:
        med = {i: statistics.median(v for run in res[i][n] for v in run) for i in JOBS}
        print(f"{format_bytes(n):>10}" + "".join(f"{med[i] * 1e6:12.1f}" for i in JOBS)
              + f"  {med['shoal'] / med['mpi4py']:12.2f}"
              + f"  {med['shoal-mpi'] / med['mpi4py']:16.2f}"
              + f"  {med['shoal'] / med['memcpy']:12.2f}"
              + f"  {med['mpi4py'] / med['memcpy']:13.2f}")
    print_spread(res, [(f"{format_bytes(n)} (us)", n, 1e6) for n in sizes], load)


if __name__ == "__main__":
    main()
