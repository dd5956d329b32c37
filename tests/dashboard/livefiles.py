"""Live files written by hand in the format of shoal.live (job.json, pe-N.jsonl,
events.jsonl) in a registry of the tests' own: a job whose PEs are unevenly loaded until a
load balancing step, then even, with a checkpoint; the utilisation of each PE is known."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from shoal import live

METHODS = ("Cell.compute", "Cell.exchange", "Main.step")


def pe_load(pe: int, npes: int, balanced: bool) -> float:
    """PE ``pe``'s busy share: spread from 0.3 to 0.9 before the step, 0.6 after."""
    if balanced:
        return 0.6
    return 0.3 + 0.6 * pe / max(npes - 1, 1)


def row(pe: int, t: float, dt: float, busy: float, host: str) -> dict:
    shares = (0.7, 0.2, 0.1)
    entries = {m: [10 + pe, round(busy * dt * s, 6)] for m, s in zip(METHODS, shares, strict=True)}
    overhead = 0.02 * dt
    return {"t": round(t, 6), "dt": dt, "pe": pe, "host": host, "entries": entries,
            "idle": max(0.0, dt - busy * dt - overhead), "overhead": overhead,
            "sent": 100 * (pe + 1), "received": 90 * (pe + 1), "bytes_sent": 4096 * (pe + 1),
            "bytes_received": 4000 * (pe + 1), "rss": (80 + pe) << 20, "queue": pe,
            "elements": 8 + pe}


def write_job(root: Path, job_id: str = "job-1", npes: int = 4, periods: int = 20,
              period: float = 0.5, lb_at: int = 10, start: float = 1_700_000_000.0,
              state: str = "done", hosts: list[str] | None = None) -> Path:
    """A job of ``npes`` PEs with ``periods`` rows each, balanced at period ``lb_at``;
    its registry entry holds the live files (as a finished job's does). Returns it."""
    folder = root / live.JOBS / job_id
    folder.mkdir(parents=True, exist_ok=True)
    hosts = hosts or [f"node{pe // 2 + 1}" for pe in range(npes)]
    end = start + periods * period if state != "running" else None
    job = {"id": job_id, "name": "leanmd.py", "argv": ["leanmd.py", "--steps", "40"],
           "npes": npes, "hosts": hosts, "start": start, "end": end, "state": state,
           "pid": os.getpid(), "host": socket.gethostname(), "jobdir": str(folder),
           "period": period}
    (folder / live.JOB).write_text(json.dumps(job))
    for pe in range(npes):
        lines = [row(pe, start + (k + 1) * period, period, pe_load(pe, npes, k >= lb_at),
                     hosts[pe]) for k in range(periods)]
        (folder / live.pe_file(pe)).write_text("".join(json.dumps(r) + "\n" for r in lines))
    before = pe_load(npes - 1, npes, False) / (sum(pe_load(p, npes, False)
                                                    for p in range(npes)) / npes)
    events = [{"t": start + lb_at * period, "kind": "lb", "step": 1, "strategy": "greedy",
               "before": round(before, 4), "after": 1.0, "predicted": 1.0,
               "migrations": 12, "seconds": 0.01},
              {"t": start + (lb_at + 2) * period, "kind": "checkpoint", "generation": 1,
               "bytes": 1 << 20, "seconds": 0.05, "path": str(folder / "ckpt")}]
    events = [e for e in events if e["t"] <= start + periods * period]  # (within the run)
    (folder / live.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


def expected_utilisation(npes: int, periods: int, lb_at: int) -> list[float]:
    """What each PE's rows give over the whole run (entry seconds over covered time)."""
    return [(lb_at * pe_load(pe, npes, False) + (periods - lb_at) * 0.6) / periods
            for pe in range(npes)]
