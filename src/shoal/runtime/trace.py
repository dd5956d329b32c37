"""A per-PE timeline of a run, in the Chrome trace event format (opens in Perfetto,
https://ui.perfetto.dev, or chrome://tracing): ``shoal run --trace trace.json`` or
``shoal.start(main, trace="trace.json")``.

Every PE records, in memory, one event per entry method (and per resumption of a coroutine)
with its class, method and element index, its idle periods of 100 µs or more, the elements
it sent away and received in a balancing step, and (PE 0) each balancing step with its
figures and each AtSync point. At the end of the run the events are gathered to PE 0, which
writes one file: ``pid`` is the PE, times are microseconds since the PEs left a common
barrier at start-up (PEs of one node share the monotonic clock; between nodes the barrier
aligns them to within its latency).

File layout (JSON object): ``traceEvents`` (list), ``displayTimeUnit`` ("ms") and
``shoal`` (``{"version": 1, "npes": P}``). Events:

==========  ====  ========================================================================
name        ph    what
==========  ====  ========================================================================
Cls.method  X     an entry method, ``cat`` "entry", ``args.index``
idle        X     an idle period, ``cat`` "idle"
lb step     X     a balancing step at PE 0, ``cat`` "lb", ``args``: its ``lb_history``
                  record
sync        i     an AtSync point at PE 0 (every element has called ``at_sync()``),
                  ``cat`` "lb", ``args.balanced``: whether a step followed
migrate     i     elements leaving this PE in a step, ``cat`` "lb", ``args.out``:
                  {destination PE: count}
==========  ====  ========================================================================

``shoal lb plot trace.json`` draws each PE's load per iteration from it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.files import check_outputs, write_text

if TYPE_CHECKING:
    from shoal.runtime.collection import Slot

IDLE_MIN = 1e-4  # shorter idle periods are not recorded (one per message otherwise)
FORMAT_VERSION = 1


class Tracer:
    """The events of one PE."""

    def __init__(self, path: str, pe: int):
        self.path = Path(path)
        check_outputs({"trace": self.path})  # on every PE: all of them fail, or none
        self.pe = pe
        self.t0 = time.perf_counter()
        # (name, cat, ph, start, duration, args); times in perf_counter seconds
        self.events: list[tuple[str, str, str, float, float, Any]] = []

    def start(self, comm: Any) -> None:
        """The common time origin: the end of a barrier of every PE."""
        comm.Barrier()
        self.t0 = time.perf_counter()

    def entry(self, slot: Slot, name: str, t0: float) -> None:
        self.events.append((f"{slot.coll.cls.__name__}.{name}", "entry", "X", t0,
                            time.perf_counter() - t0, slot.index))

    def idle(self, t0: float, duration: float) -> None:
        if duration >= IDLE_MIN:
            self.events.append(("idle", "idle", "X", t0, duration, None))

    def mark(self, name: str, t0: float, duration: float, args: Any) -> None:
        """An LB event: a span (``duration > 0``) or an instant."""
        self.events.append((name, "lb", "X" if duration > 0 else "i", t0, duration, args))

    def write(self, comm: Any) -> None:
        """Gather every PE's events to PE 0, which writes the file (atomically)."""
        mine = [_event(self.pe, self.t0, e) for e in self.events]
        parts = comm.gather(mine, root=0)
        if self.pe != 0:
            return
        doc = {"traceEvents": [e for part in parts for e in part], "displayTimeUnit": "ms",
               "shoal": {"version": FORMAT_VERSION, "npes": len(parts)}}
        write_text(self.path, json.dumps(doc, separators=(",", ":")))


def _event(pe: int, origin: float, e: tuple) -> dict[str, Any]:
    name, cat, ph, t0, duration, args = e
    out: dict[str, Any] = {"name": name, "cat": cat, "ph": ph, "pid": pe, "tid": 0,
                           "ts": round((t0 - origin) * 1e6, 3)}
    if ph == "X":
        out["dur"] = round(duration * 1e6, 3)
    else:
        out["s"] = "p"  # an instant event of the whole PE
    if cat == "entry":
        out["args"] = {"index": list(args)}
    elif args is not None:
        out["args"] = args
    return out


def read(path: str | Path) -> dict[str, Any]:
    """A trace file written by :class:`Tracer`, checked enough to plot."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{p}: no such trace file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{p} is not a trace written by shoal run --trace ({exc})") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)
            and isinstance(doc.get("shoal"), dict)):
        raise UsageError(f"{p} is not a trace written by shoal run --trace (no traceEvents "
                         "or shoal header)")
    if doc["shoal"].get("version") != FORMAT_VERSION:
        raise UsageError(f"{p}: trace format version {doc['shoal'].get('version')!r}, this "
                         f"shoal reads {FORMAT_VERSION}")
    return doc


def loads_per_iteration(doc: dict[str, Any], bins: int = 50) -> tuple[Any, Any, list[int]]:
    """Each PE's seconds in entry methods per iteration of a trace: ``(edges, loads,
    steps)``. Iterations end at the AtSync points (``sync`` events); a run without them is
    cut into ``bins`` equal spans of time. ``edges`` are the iterations' ends (µs),
    ``loads[k, p]`` PE ``p``'s load in iteration ``k`` (an entry method counts where it
    started), ``steps`` the iterations after which a balancing step ran."""
    import numpy as np

    events = doc["traceEvents"]
    npes = int(doc["shoal"]["npes"])
    entries = [(e["ts"], e["dur"], e["pid"]) for e in events
               if e.get("cat") == "entry" and e.get("ph") == "X"]
    syncs = sorted((e["ts"], bool(e.get("args", {}).get("balanced"))) for e in events
                   if e.get("name") == "sync" and e.get("cat") == "lb")
    if syncs:
        edges = np.array([t for t, _ in syncs])
        steps = [k for k, (_, balanced) in enumerate(syncs) if balanced]
    else:
        end = max((t + d for t, d, _ in entries), default=0.0)
        edges = np.linspace(0.0, end, bins + 1)[1:]
        began = [e["ts"] for e in events if e.get("name") == "lb step"]
        steps = sorted({int(k) for k in np.searchsorted(edges, began)})
    loads = np.zeros((len(edges), npes))
    if entries:
        ts, dur, pe = (np.array(c, np.float64) for c in zip(*entries, strict=True))
        k = np.searchsorted(edges, ts, side="left")
        inside = k < len(edges)
        np.add.at(loads, (k[inside], pe[inside].astype(np.int64)), dur[inside] * 1e-6)
    return edges, loads, steps
