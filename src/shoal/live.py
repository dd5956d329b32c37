"""A job's live data: what its PEs publish while it runs, and where finished jobs are kept.

The format (the contract with the dashboard, /work/shared-notes/live-format.md in the
session that made it) in one place:

- ``<live>/job.json``: the job (id, program, argv, PEs, hosts, start, end, state, the
  supervisor's pid and host, the job directory, the publication period);
- ``<live>/pe-N.jsonl``: one JSON object a line, one line per publication period of PE N
  (time per entry method, idle, overhead, messages and bytes, RSS, queue, elements);
- ``<live>/events.jsonl``: PE 0's events (balancer steps, checkpoints, resizes, failures);
  a balancing step is appended when it ends (``after`` null) and again, same ``step``, once
  the next step has measured its result: :func:`load` gives the two as one event.

A running job writes them into ``<jobdir>/live``; the supervisor registers it in the registry
(``$SHOAL_STATE_DIR``, default ``~/.local/state/shoal``) as ``jobs/<id>/job.json``, whose
``jobdir`` says where the files are. At the end of the job the supervisor copies the live
files into ``jobs/<id>/`` for post mortem: they outlive the job directory, which is removed
(the node-local ``/tmp`` one, or the ``.shoal/job-*`` of a multi-node job; of a
``--jobdir`` of the user's, what shoal wrote there).

This module only reads (the writers are ``runtime/publish.py`` and ``supervise.py``), and
imports nothing heavy: ``shoal top`` and the dashboard load it alone.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from shoal.jobdir import alive as pid_alive
from shoal.jobdir import read_json

LIVE = "live"  # the folder of the job directory the live files go to
JOB = "job.json"
EVENTS = "events.jsonl"
PE_PREFIX, PE_SUFFIX = "pe-", ".jsonl"
STATE_ENV = "SHOAL_STATE_DIR"
JOBS = "jobs"  # the registry's folder of jobs
RUNNING, DONE, FAILED = "running", "done", "failed"
EVENT_KINDS = ("lb", "checkpoint", "resize", "restart", "failure")
ROW_KEYS = ("t", "dt", "pe", "host", "entries", "idle", "overhead", "sent", "received",
            "bytes_sent", "bytes_received", "rss", "queue", "elements")


def pe_file(pe: int) -> str:
    """The name of PE ``pe``'s rows."""
    return f"{PE_PREFIX}{pe}{PE_SUFFIX}"


def root(given: str | os.PathLike[str] | None = None) -> Path:
    """The registry: ``given``, else ``$SHOAL_STATE_DIR``, else ``~/.local/state/shoal``."""
    if given is not None:
        return Path(given)
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else Path.home() / ".local" / "state" / "shoal"


def registry_dir(job_id: str, given: str | os.PathLike[str] | None = None) -> Path:
    """Where job ``job_id`` is registered (and its live files kept once it ended)."""
    return root(given) / JOBS / job_id


# ------------------------------------------------------------------ reading files
class _Tail:
    """The objects of one JSON-lines file read so far, and where reading stopped: a later
    read parses only what was appended since (a dashboard polls every second). A last line
    without its newline is being written and is left for the next read; a line that is not
    a JSON object (a PE killed mid-write, then restarted) is skipped."""

    __slots__ = ("ident", "objects", "offset")

    def __init__(self, ident: tuple[int, int]):
        self.ident = ident
        self.offset = 0
        self.objects: list[dict[str, Any]] = []

    def update(self, path: Path) -> None:
        with open(path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            return
        for line in data[:end].split(b"\n"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                self.objects.append(value)
        self.offset += end + 1


_tails: dict[str, _Tail] = {}


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every complete object of the JSON-lines file ``path`` (none if it is missing). The
    list is shared with later calls: copy before changing it."""
    key = str(path)
    try:
        st = os.stat(path)
    except OSError:
        _tails.pop(key, None)
        return []
    ident = (st.st_dev, st.st_ino)
    tail = _tails.get(key)
    if tail is None or tail.ident != ident or st.st_size < tail.offset:
        tail = _tails[key] = _Tail(ident)  # new, or replaced, or truncated: from the start
    if st.st_size > tail.offset:
        try:
            tail.update(path)
        except OSError:
            pass
    return tail.objects


# ------------------------------------------------------------------ finding a job's files
def live_dir(path: str | os.PathLike[str]) -> Path:
    """The folder holding the live files of ``path``: a live folder itself, a job directory
    (its ``live/``), or a registry entry (itself once the job ended, else the live folder
    of the job directory its ``job.json`` names)."""
    p = Path(path)
    if (p / LIVE).is_dir():
        return p / LIVE
    if _has_rows(p):
        return p
    job = read_json(p / JOB) or {}
    jobdir = job.get("jobdir")
    if isinstance(jobdir, str) and (Path(jobdir) / LIVE).is_dir():
        return Path(jobdir) / LIVE
    return p


def _has_rows(p: Path) -> bool:
    return (p / EVENTS).exists() or any(p.glob(f"{PE_PREFIX}*{PE_SUFFIX}"))


def is_live(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` hold a job's live data (see :func:`live_dir`)?"""
    return (live_dir(path) / JOB).is_file()


def alive(job: Mapping[str, Any]) -> bool:
    """Is the job running now: state running and its supervisor alive (checked when it
    runs on this host; a job launched from another host sharing the registry is taken at
    its word)."""
    if job.get("state") != RUNNING:
        return False
    host = job.get("host")
    if host is not None and host != socket.gethostname():
        return True
    pid = job.get("pid")
    return isinstance(pid, int) and pid > 0 and pid_alive(pid)


def jobs(given_root: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every job in the registry, newest first: its ``job.json`` plus ``path`` (the folder
    to :func:`load`) and ``alive``."""
    found = []
    folder = root(given_root) / JOBS
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        job = read_json(entry / JOB)
        if job is None:
            continue
        path = live_dir(entry)
        newer = read_json(path / JOB)  # the running job's own copy says most
        if newer is not None and newer.get("id") == job.get("id"):
            job = newer
        found.append({**job, "path": str(path), "alive": alive(job)})
    found.sort(key=lambda j: _number(j.get("start")), reverse=True)
    return found


def find(spec: str, given_root: str | os.PathLike[str] | None = None) -> Path | None:
    """The live folder that ``spec`` names: a job directory, live folder or registry entry,
    else a job id (or the one job whose id starts with ``spec``) in the registry."""
    p = Path(spec)
    if p.is_dir():
        return live_dir(p) if is_live(p) else None
    matches = [j for j in jobs(given_root) if str(j.get("id", "")).startswith(spec)]
    exact = [j for j in matches if j.get("id") == spec]
    chosen = exact or matches
    return Path(chosen[0]["path"]) if len(chosen) == 1 else None


def load(path: str | os.PathLike[str], since: float = 0.0) -> dict[str, Any]:
    """The job at ``path`` (see :func:`live_dir`): ``{"job": job.json, "pes": {pe: rows by
    t}, "events": events by t}``, rows and events only those with ``t > since``."""
    folder = live_dir(path)
    job = read_json(folder / JOB) or {}
    pes: dict[int, list[dict[str, Any]]] = {}
    for file in folder.glob(f"{PE_PREFIX}*{PE_SUFFIX}"):
        number = file.name[len(PE_PREFIX):-len(PE_SUFFIX)]
        if not number.isdigit():
            continue
        rows = [r for r in read_lines(file) if _number(r.get("t")) > since]
        rows.sort(key=lambda r: _number(r.get("t")))
        pes[int(number)] = rows
    events = [e for e in _merged(read_lines(folder / EVENTS)) if _number(e.get("t")) > since]
    events.sort(key=lambda e: _number(e.get("t")))
    return {"job": job, "pes": dict(sorted(pes.items())), "events": events}


def _merged(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events, the lines of one balancing step as one (the writer appends a step when
    it ends, and again once its result is measured: the later line's fields that are not
    null complete the first, which keeps its time)."""
    out: list[dict[str, Any]] = []
    steps: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.get("kind") != "lb" or e.get("step") is None:
            out.append(e)
            continue
        first = steps.get(e["step"])
        if first is None:
            steps[e["step"]] = first = dict(e)
            out.append(first)
        else:
            first.update({k: v for k, v in e.items() if v is not None and k != "t"})
    return out


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


# ------------------------------------------------------------------ summaries
def busy(row: Mapping[str, Any]) -> float:
    """The seconds a row's entry methods ran."""
    entries = row.get("entries") or {}
    return sum(_number(v[1]) for v in entries.values() if isinstance(v, (list, tuple))
               and len(v) >= 2)


def utilisation(rows: Iterable[Mapping[str, Any]]) -> float:
    """The part of the time the rows cover that entry methods ran (0 when none)."""
    work = span = 0.0
    for row in rows:
        work += busy(row)
        span += _number(row.get("dt"))
    return work / span if span > 0 else 0.0


def entry_totals(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, float]]:
    """Calls and seconds of each entry method over the rows."""
    totals: dict[str, tuple[int, float]] = {}
    for row in rows:
        for name, value in (row.get("entries") or {}).items():
            if not isinstance(value, (list, tuple)) or len(value) < 2:
                continue
            calls, seconds = totals.get(name, (0, 0.0))
            totals[name] = (calls + int(value[0]), seconds + _number(value[1]))
    return totals
