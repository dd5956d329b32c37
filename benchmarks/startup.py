"""What starting a job costs, and what a cold numba cache costs processes that start at once.

1. Start-up: a program that imports numpy, then shoal, and ends at once (``shoal.exit()``)
   on 2 PEs, launched ``--runs`` times each way, alternated: by ``shoal run`` and by the
   wheel's bare ``mpiexec``, and, for the same bare launch, with ``OPENBLAS_NUM_THREADS=1``
   as the floor the thread share aims at (shoal.threads). Printed: the median wall time of
   a job and the median CPU time of the job's processes (user + system of every process
   the launch waited for), with the least and greatest run.
2. Cold compile (``--compile``): two processes that simulate gossip start at once on an
   empty numba cache (``NUMBA_CACHE_DIR`` a fresh folder); printed: each one's CPU time.
   Under shoal.jit's compile lock one compiles the simulator's kernel and the other waits
   and loads it.

Usage: python benchmarks/startup.py [--runs 15] [--compile]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shoal.launch import _wheel_mpiexec

PROGRAM = "import numpy\nimport shoal\n\n\ndef main():\n    shoal.exit()\n\n\nshoal.start(main)\n"
SIMULATE = ("import resource\nfrom shoal.gossip.sim import simulate\n"
            "simulate(nodes=3, window=2, units=50, seed=1)\n"
            "r = resource.getrusage(resource.RUSAGE_SELF)\nprint(r.ru_utime + r.ru_stime)\n")


def measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``cmd`` (CPU: every process it waited for)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def start_up(runs: int) -> None:
    prog = Path(tempfile.mkdtemp(prefix="shoal-startup-")) / "prog.py"
    prog.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_NUM_THREADS") and not k.startswith(("SHOAL_", "SLURM_"))}
    bare = [str(_wheel_mpiexec()), "-n", "2", sys.executable, str(prog)]
    ways = {"shoal run -n 2": ([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                               env),
            "mpiexec -n 2 (bare)": (bare, env),
            "mpiexec -n 2, OPENBLAS_NUM_THREADS=1": (bare, {**env,
                                                           "OPENBLAS_NUM_THREADS": "1"})}
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for k in range(runs):
        print(f"[run {k + 1}/{runs}]", file=sys.stderr, flush=True)
        for name, (cmd, e) in ways.items():
            got[name].append(measured(cmd, e))
    print(f"start-up of a program that imports numpy and shoal and ends, 2 PEs, {runs} runs "
          "each (median, least-greatest)")
    print(f"{'launch':40s} {'wall s':>22s} {'CPU s':>22s}")
    for name, rows in got.items():
        walls, cpus = [w for w, _ in rows], [c for _, c in rows]
        print(f"{name:40s} {statistics.median(walls):8.3f} ({min(walls):.3f}-{max(walls):.3f})"
              f" {statistics.median(cpus):8.3f} ({min(cpus):.3f}-{max(cpus):.3f})")


def cold_compile() -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="shoal-numba-cold-")}
    env.pop("NUMBA_BOUNDSCHECK", None)
    t0 = time.perf_counter()
    jobs = [subprocess.Popen([sys.executable, "-c", SIMULATE], env=env,
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    cpus = [float(job.communicate(timeout=600)[0].split()[-1]) for job in jobs]
    print(f"cold numba cache, two processes simulating gossip at once: CPU "
          f"{cpus[0]:.1f} s and {cpus[1]:.1f} s, both done in {time.perf_counter() - t0:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--compile", action="store_true", help="the cold-cache compile too")
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} before, on {os.cpu_count()} cores")
    start_up(a.runs)
    if a.compile:
        cold_compile()
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
