"""The cloud figures of the Charm++ paper (Acun14, Section IV-F, Figs. 16-17) on a 4-node
emulated cluster (:mod:`shoal.cluster.emulated`): network namespaces with a real Slurm, each
node's link shaped to ``--rate`` (1 Gbit/s: the paper's private cloud had 1 Gigabit
Ethernet) by ``tc tbf``, MPI between nodes over TCP through those links (MPICH's OFI netmod,
``tcp`` provider on ``eth0``: ``OVER_LINKS``; UCX, the wheel's default, would pass messages
through shared memory, the emulated nodes sharing one kernel, and UCX's own TCP
(``UCX_TLS=tcp,self``) often failed in ``MPI_Init`` here, see the module). This kernel has no
``netem`` qdisc: the links get no added delay or loss (the issue's 50-100 us), only the
rate; their latency is that of a veth pair and a bridge (about 10-40 us one-way for MPI).

Every job is ``srun -N 4 -n 4 --ntasks-per-node=1 --mpi=pmi2``: one PE per node.

(a) Over-decomposition: examples/stencil2d.py (``--n`` cells a side, an allreduce every
    iteration) with 1 chare per PE (2x2 blocks) against 8 (8x4 blocks): ms per iteration.
    The paper: 4k x 4k on 32 VMs, 77 -> 32 ms (2.4x).
(b) Fig. 16: a Jacobi stencil (this file's job, 8 chares per PE, a sync point every
    ``--lb-every`` iterations) and a CPU hog started on node n4, inside its namespaces
    (``EmulatedCluster.exec``), once iteration ``--onset`` has ended. The machine has 2
    cores for 4 PEs: each PE is pinned, n1 and n2 to core 0, n3 and n4 to core 1 (two
    "VMs" per "physical host", as the paper's 32 VMs on 8 nodes), and the hog to n4's core,
    so it takes a third of core 1 from n3 and n4 both (the paper's interfering VM slowed
    every VM of its node). ``--lb`` (default greedy_refine: it weighs each PE by the share
    of its core the PE got, from wall time minus CPU time, so time the hog takes is not
    read as the blocks' load) against ``none`` (the same sync points, no balancing):
    iteration times over the run, and the mean after the onset.
(c) Fig. 17: LeanMD (shoal.apps.leanmd, uniform atoms) with node n4 at 0.7x speed: the
    runtime's EMULATED frequency (:mod:`shoal.runtime.power`: PE n4's entry methods
    duty-cycle, sleeping 3/7 of their time after they ran; ``power_monitor`` on, so the
    balancer knows the PE's speed exactly); no cgroup quota. With and without balancing
    (a sync point every ``--md-lb-every`` steps either way), and the homogeneous case:
    ms per step. (Its jobs over the links hung on 4 of 5 starts until small envelopes
    across nodes went by ``MPI_Isend``: see :mod:`shoal.runtime.wire.transport`.)
    The paper prints Fig. 17 without numbers: with heterogeneity-aware
    balancing LeanMD ran close to the homogeneous case.

The absolute figures cannot match the paper's: 4 emulated nodes share 2 cores (and whatever
else runs on the machine; the load average is printed before and after), not 32 VMs on 8
hosts. What is reproduced is the form: over-decomposition speeds up the stencil, and
balancing recovers much of what interference or a slow node costs. Figures are medians of
``--runs`` runs with their min-max; the variants alternate within each round.

Usage (as root, Slurm installed: make cluster-deps):
    python benchmarks/cloud.py [--runs 3] [--n 4096] [--iters 200] [--onset 100]
        [--lb-every 20] [--lb greedy_refine] [--steps 80] [--quick] [--json out.json]
Progress goes to stderr; the figures to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import shoal

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STENCIL = ROOT / "examples" / "stencil2d.py"
NODES = 4
START_FAILED = "internal_Init_thread"
"""In a job's stderr: the MPI library failed in MPI_Init (on this machine, its PMI-2 start)."""
SLOW_NODE = "n4"
SLOW = 0.7

PAPER_A = {"1 chare/PE": 77.0, "8 chares/PE": 32.0}  # ms per iteration, 32 VMs, 4k x 4k
PAPER_16 = ("Fig. 16 (32 VMs, interfering VM on one node after iteration 100, LB every 20 "
            "iterations): without balancing the iteration time stays up after the onset; "
            "with heterogeneity-aware balancing it comes back down near the time before, "
            "with a spike at every LB step (the figure prints no numbers)")
PAPER_17 = ("Fig. 17 (LeanMD on Grid'5000, one node at 0.7x effective frequency): with "
            "heterogeneity-aware balancing, close to the homogeneous case; without, slower "
            "(the figure prints no numbers)")

# The hog: a bare interpreter pinned to a core, looping. In a session of its own (Linux
# shares a core equally between sessions' autogroups), so it takes a PE's fair share.
BURN = "import os\nos.sched_setaffinity(0, {%d})\nwhile True:\n    pass\n"


def say(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} cores"


def core_of(host: str, cpus: int) -> int | None:
    """The core the PE of node ``host`` (n1..n4) is pinned to: the nodes split evenly over
    the cores (2 cores: n1, n2 on 0, n3, n4 on 1); None if ``host`` is no node's."""
    m = re.fullmatch(r"n(\d+)", host)
    if not m or cpus < 2:
        return None
    return (int(m.group(1)) - 1) * cpus // NODES


# ----------------------------------------------------------------------- (b): the job

class Block(shoal.Chare):
    """A block of the grid (b): ghosts through channels, a Jacobi sweep, a contribution to
    the clock per iteration, a sync point every ``lb_every`` iterations."""

    def __init__(self, n, rows, cols, iters, lb_every, clock):
        i, j = self.thisIndex
        self.iters, self.lb_every, self.clock = iters, lb_every, clock
        h, w = n // rows, n // cols
        self.u = np.zeros((h + 2, w + 2))
        if i == 0:
            self.u[0, :] = 1.0
        links = []
        if i > 0:
            links.append(((i - 1, j), (1, slice(1, -1)), (0, slice(1, -1))))
        if i < rows - 1:
            links.append(((i + 1, j), (-2, slice(1, -1)), (-1, slice(1, -1))))
        if j > 0:
            links.append(((i, j - 1), (slice(1, -1), 1), (slice(1, -1), 0)))
        if j < cols - 1:
            links.append(((i, j + 1), (slice(1, -1), -2), (slice(1, -1), -1)))
        # channels name the elements: they work wherever the blocks move
        self.links = [(shoal.Channel(self, self.thisProxy[k]), src, dst)
                      for k, src, dst in links]
        self.it = 0

    async def step(self):
        u = self.u
        for ch, src, _ in self.links:
            ch.send(u[src].copy())
        for ch, _, dst in self.links:
            u[dst] = await ch.recv()
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        self.it += 1
        self.contribute(0, shoal.Reducer.sum, self.clock[0].tick)
        if self.it == self.iters:
            return
        if self.it % self.lb_every == 0:
            self.at_sync()
        else:
            self.thisProxy[self.thisIndex].step()

    def resume_from_sync(self):
        self.thisProxy[self.thisIndex].step()


class Clock(shoal.Chare):
    """On PE 0: when each iteration ended; signals the onset to the driver."""

    def __init__(self, iters, onset, signal, done):
        self.iters, self.onset, self.signal, self.done = iters, onset, signal, done
        self.ends = [time.perf_counter()]

    def tick(self, _):
        self.ends.append(time.perf_counter())
        k = len(self.ends) - 1
        if k == self.onset:
            Path(self.signal).write_text("onset\n")
        if k == self.iters:
            self.done.send(np.diff(self.ends).tolist())


def stencil_job(a: argparse.Namespace) -> None:
    """Under srun: the stencil of (b), printing its iteration times (``TIMES``) and the
    balancer's migrations (``MOVED``); at the end of iteration ``onset`` it creates the file
    ``a.signal`` (the driver then starts the hog)."""
    async def main():
        done = shoal.future()
        clock = shoal.Array(Clock, 1, args=(a.iters, a.onset, a.signal, done))
        blocks = shoal.Array(Block, (a.rows, a.cols), at_sync=True,
                             args=(a.n, a.rows, a.cols, a.iters, a.lb_every, clock))
        blocks.step()
        times = await done
        steps = shoal.lb_history()
        print("TIMES", " ".join(f"{t:.6f}" for t in times), flush=True)
        print("MOVED", sum(s["migrations"] for s in steps), len(steps), flush=True)

    core = core_of(socket.gethostname().split(".")[0], os.cpu_count() or 1)
    if core is not None:
        os.sched_setaffinity(0, {core})
    shoal.start(main)


# ----------------------------------------------------------------------- (c): the job

def _slow_down(host: str, f: float) -> str:
    """On every PE (shoal.run_on_all): the PE of node ``host`` runs at emulated speed f."""
    from shoal.runtime.power import set_frequency

    if shoal.my_host() == host:
        set_frequency(f)
    return shoal.my_host()


def leanmd_job(a: argparse.Namespace) -> None:
    """Under srun: LeanMD (uniform atoms) with node ``a.slow_host`` (if any) at speed
    ``a.freq``; prints ``RESULT {json}``."""
    from shoal.apps.leanmd import Params, simulate

    p = Params(cells=a.cells, atoms=a.atoms, steps=a.steps, lb_every=a.lb_every,
               distribution="uniform")

    async def main():
        hosts = None
        if a.slow_host:
            hosts = await shoal.run_on_all(_slow_down, a.slow_host, a.freq)
        r = await simulate(p)
        print("RESULT " + json.dumps({
            "ms_per_step": r.seconds_per_step * 1e3, "hosts": hosts,
            "migrations": sum(s["migrations"] for s in r.lb), "lb_steps": len(r.lb),
            "checksum": r.checksum()}), flush=True)

    shoal.start(main)


# ----------------------------------------------------------------------- the driver

class Bench:
    def __init__(self, a: argparse.Namespace):
        from shoal.cluster.emulated import OVER_LINKS, EmulatedCluster

        self.a = a
        self.cluster = EmulatedCluster(a.name)
        self.over_links = OVER_LINKS
        self.shared = Path(tempfile.mkdtemp(prefix="shoal-cloud-", dir="/var/tmp"))
        self.hung = 0  # jobs killed after --timeout
        self.failed_starts = 0  # jobs started again after MPI_Init failed

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The jobs' environment: the cluster's Slurm, MPI over TCP between nodes,
        ``extra``."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SHOAL_", "UCX_", "PMI_", "FI_", "MPICH_"))
               or k == "SHOAL_PURE"}
        return {**env, **self.cluster.env(), **self.over_links, **(extra or {})}

    def srun(self, argv: list[str]) -> list[str]:
        return ["srun", "-N", str(NODES), "-n", str(NODES), "--ntasks-per-node=1",
                "--mpi=pmi2", "--kill-on-bad-exit=1", sys.executable, *argv]

    def run(self, argv: list[str], extra: dict[str, str] | None = None) -> str | None:
        """Run a job; its stdout, or None if it hung (killed after ``--timeout``; tried
        twice). Raises if it failed (a job whose MPI_Init failed is started once more)."""
        for attempt in (1, 2):
            t0 = time.perf_counter()
            job = subprocess.Popen(self.srun(argv), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=self.env(extra),
                                   cwd=self.shared)
            out, err = finish(job, self.a.timeout)
            if out is None:
                self.hung += 1
                say(f"  HUNG after {self.a.timeout:g} s (attempt {attempt} of 2): "
                    f"{(err or '')[-300:]}")
                continue
            if job.returncode and attempt == 1 and START_FAILED in err:
                # (the wheel's MPI_Init failed before the program ran: its PMI-2 exchange
                # with slurmstepd, seen garbled once in CI under load; see emulated.py)
                self.failed_starts += 1
                say(f"  MPI_Init failed (attempt 1 of 2): {err[-300:]}")
                continue
            if job.returncode:
                raise RuntimeError(f"job failed ({job.returncode}): {' '.join(argv)}\n"
                                   f"{err[-3000:]}")
            say(f"  ({time.perf_counter() - t0:.1f} s)")
            return out
        return None

    # (a)
    def stencil(self, blocks: str) -> float | None:
        out = self.run([str(STENCIL), "--n", str(self.a.n), "--blocks", blocks, "--iters",
                        str(self.a.a_iters)])
        if out is None:
            return None
        m = re.search(r"([\d.]+) ms per iteration", out)
        if not m:
            raise RuntimeError(f"stencil2d printed no time:\n{out[-2000:]}")
        return float(m.group(1))

    # (b)
    def interference(self, lb: str) -> dict[str, Any] | None:
        a = self.a
        onset = self.shared / f"onset-{lb}-{time.monotonic_ns()}"
        argv = [str(Path(__file__).resolve()), "--job", "stencil", "--n", str(a.n), "--rows",
                "8", "--cols", "4", "--iters", str(a.iters), "--onset", str(a.onset),
                "--lb-every", str(a.lb_every), "--signal", str(onset)]
        t0 = time.perf_counter()
        job = subprocess.Popen(self.srun(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=self.env({"SHOAL_LB": lb}), cwd=self.shared)
        hog = None
        out: str | None = None
        try:
            deadline = time.monotonic() + a.timeout
            while job.poll() is None and not onset.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            if onset.exists():
                core = core_of(SLOW_NODE, os.cpu_count() or 1)
                hog = self.cluster.exec(
                    SLOW_NODE, [sys.executable, "-S", "-c", BURN % (core or 0)],
                    start_new_session=True, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
            out, err = finish(job, max(1.0, deadline - time.monotonic()))
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
            if hog is not None:
                hog.kill()
                hog.wait()
            onset.unlink(missing_ok=True)
        if out is None:
            self.hung += 1
            say(f"  HUNG after {a.timeout:g} s: {err[-300:]}")
            return None
        if job.returncode:
            raise RuntimeError(f"the stencil job failed ({job.returncode}):\n{err[-3000:]}")
        say(f"  ({time.perf_counter() - t0:.1f} s)")
        times = np.array([float(v) for v in
                          next(x for x in out.splitlines() if x.startswith("TIMES")).split()[1:]])
        moved, steps = (int(v) for v in
                        next(x for x in out.splitlines() if x.startswith("MOVED")).split()[1:])
        settle = min(a.settle, max(0, a.iters - a.onset - 1))
        k = np.arange(len(times))
        calm = (k % a.lb_every > 1) & (k >= a.onset + settle)  # not the 2 after a sync point
        return {"times": times.tolist(),
                "after_between": float(np.mean(times[calm])) if calm.any() else float("nan"),
                "before": float(np.mean(times[min(5, a.onset - 1):a.onset])),
                "after": float(np.mean(times[a.onset + settle:])),
                "migrations": moved, "lb_steps": steps, "hog": hog is not None}

    # (c)
    def leanmd(self, slow: bool, lb: str) -> dict[str, Any] | None:
        a = self.a
        argv = [str(Path(__file__).resolve()), "--job", "leanmd", "--cells", str(a.cells),
                "--atoms", str(a.atoms), "--steps", str(a.steps), "--lb-every",
                str(a.md_lb_every)]
        if slow:
            argv += ["--slow-host", SLOW_NODE, "--freq", str(SLOW)]
        out = self.run(argv, {"SHOAL_LB": lb, "SHOAL_POWER_MONITOR": "1"})
        if out is None:
            return None
        line = next(x for x in out.splitlines() if x.startswith("RESULT "))
        return dict(json.loads(line[len("RESULT "):]))


def finish(job: subprocess.Popen, timeout: float) -> tuple[str | None, str]:
    """Wait for an srun; after ``timeout`` s stop it (two SIGINTs: srun cancels the job
    step) and return (None, its stderr)."""
    try:
        out, err = job.communicate(timeout=timeout)
        return out, err
    except subprocess.TimeoutExpired:
        job.send_signal(signal.SIGINT)
        time.sleep(0.3)
        job.send_signal(signal.SIGINT)
        try:
            _, err = job.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            job.kill()
            _, err = job.communicate()
        return None, err


def spread(values: list[float]) -> str:
    if not values:
        return "    hung (every run)"
    return f"{statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})"


def series(times: list[float], width: int) -> str:
    """Mean ms per iteration in windows of ``width`` iterations."""
    t = np.array(times) * 1e3
    return " ".join(f"{t[k:k + width].mean():.0f}" for k in range(0, len(t), width))


def keep(values: list[Any], value: Any) -> None:
    """Add a run's figure, unless it hung (None)."""
    if value is not None:
        values.append(value)


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def figures(b: Bench, a: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {"a": {"1 chare/PE": [], "8 chares/PE": []},
                           "b": {"none": [], a.lb: []},
                           "c": {k: [] for k in ("homogeneous, no LB", "homogeneous, LB",
                                                 "n4 at 0.7x, no LB", "n4 at 0.7x, LB")}}
    c_variants = {"homogeneous, no LB": (False, "none"), "homogeneous, LB": (False, a.lb),
                  "n4 at 0.7x, no LB": (True, "none"), "n4 at 0.7x, LB": (True, a.lb)}
    for r in range(a.runs):
        if "a" in a.parts:
            for name, blocks in (("1 chare/PE", "2x2"), ("8 chares/PE", "8x4")):
                say(f"[run {r + 1}/{a.runs}] (a) stencil2d {name} ({blocks} blocks)")
                keep(res["a"][name], b.stencil(blocks))
        if "b" in a.parts:
            for lb in ("none", a.lb):
                say(f"[run {r + 1}/{a.runs}] (b) interference, lb={lb}")
                keep(res["b"][lb], b.interference(lb))
        if "c" in a.parts:
            for name, (slow, lb) in c_variants.items():
                say(f"[run {r + 1}/{a.runs}] (c) LeanMD {name}")
                keep(res["c"][name], b.leanmd(slow, lb))
    return res


def report(res: dict[str, Any], a: argparse.Namespace, setup: str) -> None:
    print(setup)
    if "a" in a.parts:
        ms = res["a"]
        print(f"\n(a) Stencil2D {a.n}x{a.n}, {a.a_iters} iterations, 4 PEs: ms per iteration, "
              f"median (min-max) of {a.runs}")
        for name, values in ms.items():
            print(f"  {name:14} {spread(values)}   paper (4k x 4k, 32 VMs): "
                  f"{PAPER_A[name]:.0f} ms")
        up = med(ms["1 chare/PE"]) / med(ms["8 chares/PE"])
        print(f"  speed-up of over-decomposition {up:.2f}x   paper: 2.4x")
    if "b" in a.parts:
        print(f"\n(b) Fig. 16: Jacobi {a.n}x{a.n}, 8x4 blocks, {a.iters} iterations, a sync "
              f"point every {a.lb_every}; CPU hog on {SLOW_NODE} (core shared with n3) after "
              f"iteration {a.onset}; mean ms per iteration, median (min-max) of {a.runs}; "
              f"'after' leaves out the first {a.settle} iterations after the onset")
        after = {}
        for lb, runs in res["b"].items():
            before = [1e3 * x["before"] for x in runs]
            aft = [1e3 * x["after"] for x in runs]
            moved = [x["migrations"] for x in runs]
            after[lb] = med(aft)
            calm = [1e3 * x["after_between"] for x in runs]
            print(f"  lb={lb:14} before {spread(before)}   after {spread(aft)}   "
                  f"migrations {med(moved):.0f} ({min(moved, default=0)}-"
                  f"{max(moved, default=0)})")
            print(f"  {'':17} after, leaving out the 2 iterations at each sync point "
                  f"(the LB steps' cost) {spread(calm)}")
        print(f"  after the onset, none / {a.lb}: {after['none'] / after[a.lb]:.2f}x")
        width = max(1, a.iters // 20)
        print(f"  iteration times over the run (ms, mean of each {width} iterations; the "
              "run of median 'after'):")
        for lb, runs in res["b"].items():
            if not runs:
                continue
            mid = sorted(runs, key=lambda x: x["after"])[len(runs) // 2]
            print(f"    {lb:14} {series(mid['times'], width)}")
        print(f"  paper: {PAPER_16}")
    if "c" in a.parts:
        print(f"\n(c) Fig. 17: LeanMD {a.cells}^3 cells x {a.atoms} atoms (uniform), "
              f"{a.steps} steps, a sync point every {a.md_lb_every}; {SLOW_NODE} at "
              f"{SLOW}x emulated speed (duty-cycled entry methods); ms per step, median "
              f"(min-max) of {a.runs}")
        step = {}
        for name, runs in res["c"].items():
            ms = [x["ms_per_step"] for x in runs]
            moved = [x["migrations"] for x in runs]
            step[name] = med(ms)
            print(f"  {name:20} {spread(ms)}   migrations {med(moved):.0f}")
        base = step["homogeneous, LB"]
        print(f"  against homogeneous with LB: slow node without LB "
              f"{step['n4 at 0.7x, no LB'] / base:.2f}x, with LB "
              f"{step['n4 at 0.7x, LB'] / base:.2f}x")
        print(f"  paper: {PAPER_17}")
    print(f"\njobs that hung (killed after {a.timeout:g} s, left out): {res['hung']}; "
          f"started again after MPI_Init failed: {res['failed_starts']}")
    print("Note: 4 emulated nodes on 2 shared cores, not 32 VMs: the absolute times cannot "
          "match the paper's; the form is what is compared.")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=4096, help="stencil grid side, cells (the "
                    "paper's 4k x 4k)")
    ap.add_argument("--a-iters", type=int, default=60, help="iterations of (a)")
    ap.add_argument("--iters", type=int, default=200, help="iterations of (b)")
    ap.add_argument("--onset", type=int, default=100, help="(b): the hog starts after it")
    ap.add_argument("--settle", type=int, default=20,
                    help="(b): iterations after the onset left out of 'after'")
    ap.add_argument("--lb-every", type=int, default=20, help="(b): iterations between sync "
                    "points")
    ap.add_argument("--lb", default="greedy_refine", help="the balancer of (b) and (c)")
    ap.add_argument("--cells", type=int, default=4, help="(c): LeanMD cells per dimension")
    ap.add_argument("--atoms", type=int, default=60, help="(c): atoms per cell")
    ap.add_argument("--steps", type=int, default=80, help="(c): LeanMD steps")
    ap.add_argument("--md-lb-every", type=int, default=10, help="(c): steps between sync "
                    "points")
    ap.add_argument("--parts", default="abc", help="which figures: any of a, b, c")
    ap.add_argument("--rate", default="1Gbit", help="each node link's rate")
    ap.add_argument("--name", default="cloud", help="the emulated cluster's name (brought "
                    "up and taken down here)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per job")
    ap.add_argument("--quick", action="store_true", help="small sizes, one run")
    ap.add_argument("--json", help="also write the measurements there")
    # the jobs (under srun)
    ap.add_argument("--job", choices=("stencil", "leanmd"), help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=8, help=argparse.SUPPRESS)
    ap.add_argument("--cols", type=int, default=4, help=argparse.SUPPRESS)
    ap.add_argument("--signal", help=argparse.SUPPRESS)
    ap.add_argument("--slow-host", help=argparse.SUPPRESS)
    ap.add_argument("--freq", type=float, default=SLOW, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.quick and not a.job:  # small sizes, where not given
        quick = {"runs": 1, "n": 512, "a_iters": 20, "iters": 60, "onset": 30, "settle": 10,
                 "lb_every": 10, "cells": 3, "atoms": 40, "steps": 30, "md_lb_every": 10}
        for key, value in quick.items():
            if getattr(a, key) == ap.get_default(key):
                setattr(a, key, value)
    if not a.job and not 0 < a.onset < a.iters:
        ap.error("--onset must lie between 0 and --iters")
    if not set(a.parts) <= set("abc") or not a.parts:
        ap.error("--parts: any of a, b, c")
    return a


def main(argv: list[str] | None = None) -> None:
    a = arguments(argv)
    if a.job == "stencil":
        stencil_job(a)
        return
    if a.job == "leanmd":
        leanmd_job(a)
        return
    from shoal.units import parse_rate

    def stop(signum: int, _: Any) -> None:  # so that the cluster comes down (finally)
        for sig in (signal.SIGTERM, signal.SIGHUP):  # once: not again while it comes down
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(f"cloud: stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    b = Bench(a)
    share = tuple(str(p) for p in (ROOT, Path(sys.prefix).resolve())
                  if p.resolve().is_relative_to("/tmp"))
    before = load()
    say(f"cloud: load {before}; bringing up cluster {a.name!r}: {NODES} nodes, {a.rate} links")
    t0 = time.perf_counter()
    try:
        b.cluster.up(nodes=NODES, rate=parse_rate(a.rate, "--rate"), share=share)
        links = " ".join(f"{k}={v}" for k, v in b.over_links.items())
        setup = (f"emulated cluster {a.name}: {NODES} nodes up in "
                 f"{time.perf_counter() - t0:.1f} s, each link {a.rate} (tc tbf; no netem "
                 f"on this kernel: no added delay or loss); jobs srun -N {NODES} -n {NODES} "
                 f"--mpi=pmi2, MPI over TCP between nodes ({links}); load before: {before}")
        res = figures(b, a)
        res["hung"] = b.hung
        res["failed_starts"] = b.failed_starts
    finally:
        b.cluster.down()
        shutil.rmtree(b.shared, ignore_errors=True)
    after = load()
    report(res, a, setup)
    print(f"load after: {after}")
    if a.json:
        Path(a.json).write_text(json.dumps({"load_before": before, "load_after": after,
                                            "args": vars(a), **res}, indent=1) + "\n")


if __name__ == "__main__":
    main()
