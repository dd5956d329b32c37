"""What the dashboard's JSON endpoints answer: the cluster (the local gossip daemon's view,
else the nodes of the running jobs), the jobs found, and one job's live rows.

Job data come from :mod:`shoal.live` (its files and reader are described there); this module
only shapes what the reader returns for the browser. Every function returns plain JSON-able
values and takes its sources as arguments (a registry root, a gossip state directory), so the
tests call them without a server.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from shoal.errors import UsageError

_reading = threading.Lock()
"""The server answers in threads; ``shoal.live`` keeps how far it read each file, so one
thread reads at a time."""


def _live() -> Any:
    from shoal import live  # the reader of the live files (another part of shoal)

    return live


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a float becomes None, containers are walked."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def finite_json(value: Any) -> bytes:
    """``value`` as compact JSON; a NaN or infinity anywhere (JSON has none) becomes null.
    The walk that replaces them costs more than the encoding, so it runs only when the
    plain encoding refuses."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), separators=(",", ":"), allow_nan=False)
    return text.encode()


# -- the cluster --------------------------------------------------------------------------
def cluster(gossip_dir: str | os.PathLike[str] | None, root: Any = None) -> dict[str, Any]:
    """The local gossip daemon's status (nodes with state and age, groups with their
    summaries), or, where no daemon answers, the hosts of the running jobs with their PEs."""
    from shoal.gossip import control

    where = Path(gossip_dir) if gossip_dir is not None else control.default_state_dir()
    try:
        status = control.request(where, {"op": "status"}, timeout=1.0)
    except UsageError:
        out = _job_hosts(root)
        out["reason"] = (f"none answers at {where / control.CONTROL}: start one with `shoal "
                         "gossip daemon`, or give the dashboard its --gossip-state-dir")
        return _finite(out)
    daemon = {key: status.get(key) for key in ("name", "addr", "group", "interval", "window",
                                                "uptime", "mean_age")}
    health = status.get("health") or {}
    return _finite({"source": "gossip", "state_dir": str(where), "daemon": daemon,
                    "suspect_after": health.get("suspect_after"),
                    "nodes": status.get("nodes", []), "groups": status.get("groups", []),
                    "now": time.time()})


def _job_hosts(root: Any) -> dict[str, Any]:
    """No daemon: the hosts of the running jobs, each with its PEs and jobs."""
    hosts: dict[str, dict[str, Any]] = {}
    try:
        with _reading:
            found = _live().jobs(root)
    except (ImportError, OSError):
        found = []
    for job in found:
        if not job.get("alive"):
            continue
        for host in job.get("hosts") or []:
            entry = hosts.setdefault(str(host), {"name": str(host), "pes": 0, "jobs": []})
            entry["pes"] += 1
            if job.get("id") not in entry["jobs"]:
                entry["jobs"].append(job.get("id"))
    return {"source": "jobs", "nodes": sorted(hosts.values(), key=lambda h: h["name"]),
            "groups": [], "now": time.time()}


# -- the jobs -----------------------------------------------------------------------------
STATES = ("running", "done", "failed")


def job_state(job: dict[str, Any]) -> str:
    """``running``, ``done`` or ``failed`` as the job says; ``lost`` when it says running
    but its supervisor is gone (killed before it could write its end)."""
    state = str(job.get("state", "running"))
    if state == "running" and not job.get("alive", False):
        return "lost"
    return state


def job_summary(job: dict[str, Any], now: float) -> dict[str, Any]:
    """One row of the jobs page: who, how big, where, since when, how it stands."""
    start = job.get("start")
    end = job.get("end")
    hosts = [str(h) for h in job.get("hosts") or []]
    uptime = None
    if isinstance(start, (int, float)):
        uptime = (end if isinstance(end, (int, float)) else now) - start
    return {"id": str(job.get("id")), "name": job.get("name"), "argv": job.get("argv") or [],
            "npes": job.get("npes"), "nodes": len(set(hosts)), "hosts": hosts,
            "start": start, "end": end, "uptime": uptime, "state": job_state(job),
            "alive": bool(job.get("alive")), "period": job.get("period"),
            "path": job.get("path")}


def jobs(root: Any = None) -> dict[str, Any]:
    """Every job the registry holds, newest first (``shoal.live.jobs``)."""
    with _reading:
        found = _live().jobs(root)
    now = time.time()
    return _finite({"jobs": [job_summary(j, now) for j in found], "now": now})


def find_job(root: Any, ident: str) -> dict[str, Any]:
    """The registry's entry of job ``ident``; UsageError (a 404) when there is none."""
    with _reading:
        found = _live().jobs(root)
    for job in found:
        if str(job.get("id")) == ident:
            return dict(job)
    raise UsageError(f"no job {ident!r} in the registry (see /api/jobs for those there are)")


def job(root: Any, ident: str, since: float = 0.0) -> dict[str, Any]:
    """Job ``ident``: its summary and what its live files hold newer than ``since``: the rows
    of every PE (``pes``: PE number as a string -> rows by time) and its events."""
    found = find_job(root, ident)
    with _reading:
        loaded = _live().load(found["path"], since=since)
    meta = dict(found)
    meta.update(loaded.get("job") or {})
    meta["alive"] = found.get("alive", False)
    now = time.time()
    pes = {str(pe): rows for pe, rows in sorted(loaded.get("pes", {}).items())}
    return {"job": _finite(job_summary(meta, now)), "since": since, "now": now, "pes": pes,
            "events": loaded.get("events", [])}  # (rows as read: see finite_json)
