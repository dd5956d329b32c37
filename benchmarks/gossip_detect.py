"""The gossip daemons' failure detector (shoal.gossip.health) measured: false alarms under
packet loss, then the time every daemon takes to declare a killed one dead, against the
mean age of an entry (the paper's formula; the issue's target: detection <= 3x it).

N daemons on loopback addresses 127.0.0.2.. (benchmarks/gossip_daemon.py starts them), each
dropping ``--loss`` of the packets that reach it (``SHOAL_GOSSIP_LOSS``). After ``--warmup``
the script watches every daemon for ``--watch`` seconds: nodes declared dead meanwhile are
false alarms (nobody has failed), suspicions are counted too. Then it kills one daemon
(SIGKILL) and polls every daemon until each says it is dead.

``--starve SHARE`` starves one daemon (bench2) of CPU throughout the watch: it is stopped
(SIGSTOP) for SHARE of every ``--starve-period`` and continued for the rest, as a node whose
cores another process takes (Lifeguard's case); its false alarms, about it or by it, are
counted with the others', and those it raised itself are printed apart.

    python benchmarks/gossip_detect.py --nodes 32 --interval 256ms --loss 0.05 --watch 120
    python benchmarks/gossip_detect.py --nodes 64 --loss 0 --starve 0.8 --watch 600
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from gossip_daemon import log, start, status, stop

from shoal import units
from shoal.gossip.analysis import expected_age, window_entries
from shoal.gossip.daemon import LOOKS, LOSS_ENV, PROBES, DaemonConfig
from shoal.gossip.health import Detector


def _health(states: list[Path]) -> dict[int, dict]:
    """Each daemon's detector, of those that answer now (a starved one may not)."""
    views = {k: status(s) for k, s in enumerate(states)}
    return {k: v["health"] for k, v in views.items() if v is not None}


def watch(states: list[Path], seconds: float) -> dict[str, int]:
    """Sum of every daemon's detector counts over ``seconds`` (sampled each second)."""
    first = _health(states)
    while len(first) < len(states):
        first.update({k: v for k, v in _health(states).items() if k not in first})
    end = time.monotonic() + seconds
    trouble = 0
    while time.monotonic() < end:
        time.sleep(1.0)
        trouble += sum(bool(h["local_trouble"]) for h in _health(states).values())
        log(f"  {end - time.monotonic():5.0f} s left")
    last: dict[int, dict] = {}
    while len(last) < len(states):
        last.update({k: v for k, v in _health(states).items() if k not in last})
    keys = ("suspected", "refuted", "dead", "probes")
    out = {key: sum(last[k][key] - first[k][key] for k in last) for key in keys}
    out["local_trouble_samples"] = trouble
    # the starved daemon's own alarms apart (Lifeguard's self-awareness is about those)
    out.update({f"{key}_by_bench2": last[2][key] - first[2][key] for key in keys})
    return out


def starve(pid: int, share: float, period: float, done: threading.Event) -> None:
    """Stop ``pid`` for ``share`` of every ``period`` until ``done`` (then continue it)."""
    while not done.is_set():
        os.kill(pid, signal.SIGSTOP)
        done.wait(share * period)
        os.kill(pid, signal.SIGCONT)
        done.wait((1 - share) * period)


def detect(states: list[Path], proc, name: str, limit: float) -> list[float]:
    """Kill ``proc``; seconds until each other daemon says ``name`` is dead."""
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    seen: dict[int, float] = {}
    while len(seen) < len(states) and time.monotonic() - t0 < limit:
        for k, state in enumerate(states):
            if k in seen:
                continue
            view = status(state) or {}
            if any(n["name"] == name and n["state"] == "dead" for n in view.get("nodes", [])):
                seen[k] = time.monotonic() - t0
        time.sleep(0.1)
    return [seen.get(k, float("inf")) for k in range(len(states))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--interval", default="256ms")
    ap.add_argument("--window", default="20%")
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--watch", type=float, default=120.0)
    ap.add_argument("--starve", type=float, default=0.0,
                    help="Stop daemon bench2 for this share of every --starve-period.")
    ap.add_argument("--starve-period", type=float, default=2.5)
    args = ap.parse_args()
    if not 0 <= args.starve < 1:
        raise SystemExit(f"--starve {args.starve}: give a share in [0, 1)")
    interval = units.parse_duration(args.interval, "--interval")
    w = window_entries(args.nodes, float(args.window.rstrip("%")) / 100)
    mean = expected_age(args.nodes, w) * interval
    tail = DaemonConfig(("127.0.0.1", 0), []).suspect_tail
    limit = Detector(interval, w, tail=tail, probes=PROBES,
                     probe_wait=interval / LOOKS).threshold(args.nodes)
    os.environ[LOSS_ENV] = str(args.loss)
    with tempfile.TemporaryDirectory() as tmp:
        log(f"starting {args.nodes} daemons ({args.loss:.0%} of packets dropped)...")
        procs, states = start(args.nodes, args.interval, args.window, Path(tmp), None)
        done = threading.Event()
        starver = threading.Thread(target=starve, args=(procs[2].pid, args.starve,
                                                        args.starve_period, done))
        try:
            time.sleep(args.warmup)
            log(f"watching {args.watch:.0f} s for false alarms...")
            if args.starve:
                starver.start()
            alarms = watch(states, args.watch)
            done.set()
            if args.starve:
                starver.join()
            log("killing bench1...")
            times = detect(states[:1] + states[2:], procs[1], "bench1", 30 * mean + 60)
        finally:
            done.set()
            stop(procs)
    starved = (f"; bench2 stopped {args.starve:.0%} of every {args.starve_period:g} s"
               if args.starve else "")
    print(f"N={args.nodes}, interval {args.interval}, window {w}, {args.loss:.0%} packet "
          f"loss{starved}; mean age (formula) {mean:.3f} s, suspicion after {limit:.3f} s")
    print(f"watched {args.watch:.0f} s x {args.nodes} daemons, nobody failed: "
          f"{alarms['dead']} declared dead (false alarms), {alarms['suspected']} suspicions "
          f"({alarms['refuted']} refuted), {alarms['probes']} probes, local trouble in "
          f"{alarms['local_trouble_samples']} samples")
    print(f"  of which by bench2{' (the starved one)' if args.starve else ''}: "
          f"{alarms['dead_by_bench2']} declared dead, {alarms['suspected_by_bench2']} "
          f"suspicions")
    done = [t for t in times if t != float("inf")]
    print(f"a killed daemon declared dead by {len(done)} of {len(times)} daemons: median "
          f"{statistics.median(times):.2f} s ({statistics.median(times) / mean:.2f}x the mean "
          f"age), slowest {max(times):.2f} s ({max(times) / mean:.2f}x); target <= 3x")


if __name__ == "__main__":
    sys.exit(main())
