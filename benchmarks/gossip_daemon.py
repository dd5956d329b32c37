"""N gossip daemons (``shoal gossip daemon``) on loopback addresses 127.0.0.2.. of this
machine: the average age they measure against the paper's formula and the simulator at that
N, each daemon's CPU share and bytes/s.

Every daemon joins through the first; after --warmup the script samples every daemon's
status once per --sample (through its control socket) for --duration and prints one table.
Ages are the daemons' own mean age of the other nodes' entries (seconds), averaged over the
samples and the daemons; CPU is the daemon's process time over the measured wall time.
Progress goes to stderr; every daemon is stopped with SIGTERM (killed after 10 s) at the end.

With ``--groups G`` the daemons gossip hierarchically (``--group``: G groups of N/G, daemon k
in group k // (N/G)): the ages are those of the own group's records (against the formula and
the simulator at N/G) and of the other groups' summaries (against
:func:`shoal.gossip.hier.simulate_summaries`, the simulator of the summary layer).

    python benchmarks/gossip_daemon.py --nodes 16 --interval 256ms --window 20%
    python benchmarks/gossip_daemon.py --nodes 64 --groups 8
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shoal import units
from shoal.errors import UsageError
from shoal.gossip.analysis import expected_age, window_entries
from shoal.gossip.control import request

CLI = [sys.executable, "-c", "from shoal.cli.main import main; main()"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port(hosts: list[str]) -> int:
    """A UDP port free on every one of ``hosts``."""
    for port in range(17946, 18946):
        try:
            for h in hosts:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.bind((h, port))
            return port
        except OSError:
            continue
    raise SystemExit("no free UDP port in 17946-18945")


def status(state: Path) -> dict | None:
    try:
        return request(state, {"op": "status"}, timeout=2.0)
    except UsageError:
        return None


def start(n: int, interval: str, window: str, root: Path, groups: int | None
          ) -> tuple[list, list[Path]]:
    hosts = [f"127.0.0.{k + 2}" for k in range(n)]
    port = free_port(hosts)
    procs, states = [], []
    for k, host in enumerate(hosts):
        state = root / f"d{k}"
        args = [*CLI, "gossip", "daemon", "--bind", f"{host}:{port}", "--interval", interval,
                "--window", window, "--state-dir", str(state), "--name", f"bench{k}"]
        if k:
            args += ["--join", f"{hosts[0]}:{port}"]
        if groups:
            args += ["--group", f"g{k // (n // groups)}"]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        states.append(state)
    end = time.monotonic() + 60 + 2 * n
    for k, state in enumerate(states):
        while status(state) is None:
            if time.monotonic() > end or procs[k].poll() is not None:
                raise SystemExit(f"daemon {k} did not start")
            time.sleep(0.1)
    return procs, states


def measure(states: list[Path], n: int, duration: float, sample: float) -> dict:
    first = [status(s) for s in states]
    t0 = time.monotonic()
    ages: list[list[float]] = [[] for _ in states]
    summary_ages: list[float] = []
    known: list[int] = []
    groups: list[int] = []
    while time.monotonic() - t0 < duration:
        for k, s in enumerate(states):
            view = status(s)
            if view and view["mean_age"] is not None:
                ages[k].append(view["mean_age"])
                known.append(len(view["nodes"]))
            others = [g["age"] for g in (view or {}).get("groups", []) if not g["own"]]
            if view and view.get("groups"):
                groups.append(len(view["groups"]))
            if others:
                summary_ages.append(statistics.mean(others))
        time.sleep(sample)
    last = [status(s) for s in states]
    wall = time.monotonic() - t0
    pairs = list(zip(first, last, strict=True))
    cpu = [(b["cpu_seconds"] - a["cpu_seconds"]) / wall for a, b in pairs]
    sent = [(b["stats"]["bytes_sent"] - a["stats"]["bytes_sent"]) / wall for a, b in pairs]
    pkts = [(b["stats"]["sent"] - a["stats"]["sent"]) / wall for a, b in pairs]
    return {"age": statistics.mean(statistics.mean(a) for a in ages if a),
            "summary_age": statistics.mean(summary_ages) if summary_ages else None,
            "groups": min(groups) if groups else 0,
            "known": min(known) if known else 0, "cpu": cpu, "bytes": sent, "packets": pkts,
            "malformed": sum(b["stats"]["malformed"] for b in last)}


def stop(procs: list) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--interval", default="256ms")
    ap.add_argument("--window", default="20%")
    ap.add_argument("--warmup", default="20s")
    ap.add_argument("--duration", default="40s")
    ap.add_argument("--sample", default="1s")
    ap.add_argument("--groups", type=int, default=None,
                    help="Hierarchical gossip in this many groups of equal size.")
    args = ap.parse_args()
    n, unit, g = args.nodes, units.parse_duration(args.interval), args.groups
    if g is not None and (g < 2 or n % g or n // g < 2):
        raise SystemExit(f"--groups {g}: give at least 2 groups of at least 2 of the {n} nodes")
    size = n if g is None else n // g  # the nodes whose records each daemon holds
    frac = units.parse_fraction(args.window)
    w = window_entries(size, frac)
    formula = expected_age(size, w) * unit
    log(f"simulating N={size}, W={w} ...")
    from shoal.gossip.hier import simulate_summaries
    from shoal.gossip.sim import simulate

    sim = simulate(size, w, units=400, seed=1).mean_age * unit
    w_out = None if g is None else max(2, window_entries(g, frac))
    summaries = (None if g is None else
                 simulate_summaries(n, size, w_out, units=400, seed=1).mean_age * unit)
    with tempfile.TemporaryDirectory(prefix="gossipd-bench-") as root:
        log(f"starting {n} daemons ...")
        procs, states = start(n, args.interval, args.window, Path(root), g)
        try:
            log(f"warming up for {args.warmup} ...")
            time.sleep(units.parse_duration(args.warmup))
            log(f"measuring for {args.duration} ...")
            m = measure(states, n, units.parse_duration(args.duration),
                        units.parse_duration(args.sample))
        finally:
            stop(procs)
    layout = "flat" if g is None else f"{g} groups of {size} (summary window {w_out})"
    print(f"gossip daemons on loopback: N={n}, {layout}, interval {args.interval}, window "
          f"{args.window} (W={w}), {os.cpu_count()} cores")
    print(f"  average age measured  {m['age']:.3f} s  ({m['age'] / unit:.2f} units; "
          f"every daemon knew >= {m['known']} of {size} nodes)")
    print(f"  formula A_v           {formula:.3f} s  ({formula / unit:.2f} units); measured/"
          f"formula = {m['age'] / formula:.3f}")
    print(f"  simulator             {sim:.3f} s  ({sim / unit:.2f} units); measured/sim = "
          f"{m['age'] / sim:.3f}")
    if summaries is not None and m["summary_age"] is not None:
        print(f"  summaries measured    {m['summary_age']:.3f} s  ("
              f"{m['summary_age'] / unit:.2f} units; every daemon knew >= {m['groups']} of "
              f"{g} groups)")
        print(f"  summary simulator     {summaries:.3f} s  ({summaries / unit:.2f} units); "
              f"measured/sim = {m['summary_age'] / summaries:.3f}")
    print(f"  CPU per daemon        mean {100 * statistics.mean(m['cpu']):.2f}%, max "
          f"{100 * max(m['cpu']):.2f}% of one core")
    print(f"  sent per daemon       mean {statistics.mean(m['bytes']):.0f} B/s, "
          f"{statistics.mean(m['packets']):.2f} packets/s; malformed {m['malformed']}")


if __name__ == "__main__":
    main()
