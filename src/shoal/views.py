"""Projections-style views of a run, computed once for the terminal and for figures: the
time profile (utilisation over time stacked by entry method) and the usage profile (each
PE's utilisation) from a trace (``shoal run --trace``, format in ``shoal.runtime.trace``)
or from a job's live rows (``shoal.live``), and the job view of ``shoal top`` (per-PE
utilisation, rates, memory, queue, elements, the top entry methods, the recent events).

Both sources become the same thing: amounts of time spread uniformly over intervals. A
trace's entry method is an interval of its own duration; a live row (one PE, one period)
spreads each entry method's seconds, the overhead and the period itself over
``[t - dt, t]`` (the rows say how much, not when within the period). :func:`spread`
adds them to the bins of a time axis exactly (an interval over several bins gives each
its overlap), so a bin's busy time over its capacity (PE-seconds covered) is its
utilisation.

The job summary of a job (state, uptime) is :func:`shoal.dashboard.data.job_summary`'s,
so the terminal and the web page say the same; the live files are read by ``shoal.live``.
numpy loads only when a profile is computed (``shoal top`` does not need it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal import live
from shoal.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

MAX_BINS = 200
OVERHEAD = "overhead"


# ------------------------------------------------------------------ bins
def nice_width(span: float, most: int = MAX_BINS) -> float:
    """The smallest of 1, 2, 5 x 10^k seconds that cuts ``span`` into at most ``most``
    bins: 80 to 200 of them with the default, each a round length (10 ms, 20 ms, 50 ms)."""
    if not span > 0:
        return 1.0
    lower = span / most
    k = math.floor(math.log10(lower))
    for step in (1, 2, 5, 10):
        width = step * 10.0 ** k
        if width >= lower * (1 - 1e-12):
            return width
    return 10.0 ** (k + 1)  # (not reached)


def edges_for(t0: float, t1: float, bins: int | None = None,
              least_width: float = 0.0) -> np.ndarray:
    """The bin edges of ``[t0, t1]``: ``bins`` equal bins when given, else round widths
    (:func:`nice_width`) no shorter than ``least_width`` (a live job's period: its rows
    cannot say more) ending at or after ``t1``."""
    import numpy as np

    span = max(t1 - t0, 1e-9)
    if bins is not None:
        return np.linspace(t0, t0 + span, bins + 1)
    width = max(nice_width(span), least_width)
    count = max(1, math.ceil(span / width - 1e-9))
    return t0 + width * np.arange(count + 1)


def spread(starts: Any, ends: Any, amounts: Any, keys: Any, edges: Any,
           nkeys: int) -> np.ndarray:
    """``out[b, k]``: the part of each interval's amount that falls into bin ``b`` (its
    overlap with the bin over its length: uniform over the interval), summed by key. An
    interval of zero length gives all of its amount to the bin holding it; parts outside
    ``[edges[0], edges[-1]]`` are dropped. Exact up to rounding, in O(intervals + bins)."""
    import numpy as np

    edges = np.asarray(edges, np.float64)
    nbins = len(edges) - 1
    out = np.zeros((nbins, nkeys))
    starts = np.asarray(starts, np.float64)
    if nbins < 1 or starts.size == 0:
        return out
    ends = np.asarray(ends, np.float64)
    amounts = np.asarray(amounts, np.float64)
    keys = np.asarray(keys, np.int64)
    lo, hi = edges[0], edges[-1]
    keep = (ends >= lo) & (starts <= hi)
    starts, ends, amounts, keys = starts[keep], ends[keep], amounts[keep], keys[keep]
    length = ends - starts
    point = length <= 0
    if point.any():  # an instant: all of it where it is
        b = np.clip(np.searchsorted(edges, starts[point], "right") - 1, 0, nbins - 1)
        np.add.at(out, (b, keys[point]), amounts[point])
    starts, ends, amounts, keys, length = (a[~point] for a in (starts, ends, amounts, keys,
                                                              length))
    if starts.size == 0:
        return out
    s, e = np.maximum(starts, lo), np.minimum(ends, hi)
    first = np.clip(np.searchsorted(edges, s, "right") - 1, 0, nbins - 1)
    last = np.clip(np.searchsorted(edges, e, "left") - 1, 0, nbins - 1)
    last = np.maximum(last, first)
    one = first == last
    # (an interval within one bin adds the share of its amount it has there: a fraction
    # of at most 1, where a density of a subnormal length would overflow to inf)
    np.add.at(out, (first[one], keys[one]), amounts[one] * ((e - s)[one] / length[one]))
    many = ~one  # (these span two bins or more: a length of at least a bin's edge gap)
    f, la, k = first[many], last[many], keys[many]
    d = amounts[many] / length[many]
    np.add.at(out, (f, k), (edges[f + 1] - s[many]) * d)
    np.add.at(out, (la, k), (e[many] - edges[la]) * d)
    # whole bins between: a difference array of densities, times each bin's width
    diff = np.zeros((nbins + 1, nkeys))
    np.add.at(diff, (f + 1, k), d)
    np.add.at(diff, (la, k), -d)
    whole = np.cumsum(diff, axis=0)[:nbins]
    if d.size:  # a density added and taken off again leaves rounding, not a negative amount
        whole[np.abs(whole) <= 1e-12 * np.abs(d).max()] = 0.0
    out += whole * np.diff(edges)[:, None]
    return out


# ------------------------------------------------------------------ profiles
@dataclass
class Profile:
    """A run's time profile and usage profile.

    ``edges``: bin edges (seconds from the start of the first entry method, or of the
    first live row); ``methods``: entry methods, most time first; ``busy[b, m]``: seconds
    of method ``m`` in bin ``b`` over every PE; ``overhead[b]`` (live rows only, else
    zeros); ``capacity[b]``: PE-seconds bin ``b`` covers; ``pe_busy[p, m]``,
    ``pe_overhead[p]``, ``pe_span[p]``: the same per PE over the whole run; ``events``:
    (seconds from the start, kind, text) to mark."""

    edges: np.ndarray
    methods: list[str]
    busy: np.ndarray
    overhead: np.ndarray
    capacity: np.ndarray
    pe_busy: np.ndarray
    pe_overhead: np.ndarray
    pe_span: np.ndarray
    events: list[tuple[float, str, str]] = field(default_factory=list)
    source: str = ""

    @property
    def utilisation(self) -> np.ndarray:
        """Each bin's share of its PE-time in entry methods (0 where it covers none)."""
        import numpy as np

        total = self.busy.sum(axis=1)
        return np.divide(total, self.capacity, out=np.zeros_like(total),
                         where=self.capacity > 0)

    @property
    def pe_utilisation(self) -> np.ndarray:
        import numpy as np

        total = self.pe_busy.sum(axis=1)
        return np.divide(total, self.pe_span, out=np.zeros_like(total),
                         where=self.pe_span > 0)


def _order(totals: Mapping[str, float]) -> list[str]:
    return sorted(totals, key=lambda m: (-totals[m], m))


def trace_profile(doc: Mapping[str, Any], bins: int | None = None) -> Profile:
    """The profile of a trace read by ``shoal.runtime.trace.read``: times from the start
    of the first entry method of any PE (what came before, start-up and compiling, is no
    part of the run's profile) to the end of the last event; every PE counts for all of
    that span."""
    import numpy as np

    npes = int(doc["shoal"]["npes"])
    events = doc["traceEvents"]
    entries = [e for e in events if e.get("cat") == "entry" and e.get("ph") == "X"]
    if not entries:
        raise UsageError("the trace holds no entry methods: nothing to profile")
    origin = min(float(e["ts"]) for e in entries)
    # (each end from the origin, then its duration: ts + dur rounds to the ulp of ts, and a
    # run shorter than that had a PE busy 113% of it)
    ends = [(float(e["ts"]) - origin) + float(e.get("dur", 0.0)) for e in events]
    t1 = max(ends) * 1e-6
    totals: dict[str, float] = {}
    for e in entries:
        totals[e["name"]] = totals.get(e["name"], 0.0) + float(e["dur"])
    methods = _order(totals)
    index = {m: k for k, m in enumerate(methods)}
    ts = (np.array([float(e["ts"]) for e in entries]) - origin) * 1e-6
    dur = np.array([float(e["dur"]) for e in entries]) * 1e-6
    keys = np.array([index[e["name"]] for e in entries])
    pes = np.array([int(e["pid"]) for e in entries])
    edges = edges_for(0.0, t1, bins)
    busy = spread(ts, ts + dur, dur, keys, edges, len(methods))
    capacity = np.diff(edges) * npes
    capacity[-1] = (min(edges[-1], t1) - edges[-2]) * npes  # (the last bin may go past t1)
    pe_busy = np.zeros((npes, len(methods)))
    np.add.at(pe_busy, (pes, keys), dur)
    marks = []
    for e in events:
        if e.get("name") == "lb step" and e.get("cat") == "lb":
            marks.append(((float(e["ts"]) - origin) * 1e-6, "lb",
                          _lb_text(e.get("args") or {})))
    return Profile(edges=edges, methods=methods, busy=busy, overhead=np.zeros(len(edges) - 1),
                   capacity=capacity, pe_busy=pe_busy, pe_overhead=np.zeros(npes),
                   pe_span=np.full(npes, t1), events=marks, source="trace")


def _lb_text(args: Mapping[str, Any]) -> str:
    before, after = args.get("before"), args.get("after")
    parts = [f"{args['strategy']}"] if args.get("strategy") else []
    if isinstance(before, (int, float)) and isinstance(after, (int, float)):
        parts.append(f"max/avg {before:.3g} -> {after:.3g}")
    if isinstance(args.get("migrations"), int):
        parts.append(f"{args['migrations']} moved")
    return ", ".join(parts)


def live_profile(loaded: Mapping[str, Any], bins: int | None = None) -> Profile:
    """The profile of a job's live rows (``shoal.live.load``'s answer); bins no shorter
    than the job's publication period."""
    import numpy as np

    pes: dict[int, list[dict[str, Any]]] = dict(loaded.get("pes") or {})
    job = loaded.get("job") or {}
    rows = [r for pe_rows in pes.values() for r in pe_rows if _num(r.get("dt")) > 0]
    if not rows:
        raise UsageError("the job's live files hold no rows: nothing to profile")
    totals: dict[str, float] = {m: s for m, (_, s) in live.entry_totals(rows).items()}
    methods = _order(totals)
    index = {m: k for k, m in enumerate(methods)}
    t0 = min(_num(r.get("t")) - _num(r.get("dt")) for r in rows)
    t1 = max(_num(r.get("t")) for r in rows)
    period = _num(job.get("period"))
    edges = edges_for(0.0, t1 - t0, bins, least_width=period if bins is None else 0.0)
    starts, ends, amounts, keys = [], [], [], []
    over = len(methods)  # the key of the overhead, then of the covered time
    for r in rows:
        end = _num(r.get("t")) - t0
        start = end - _num(r.get("dt"))
        pieces = [(index[m], _num(v[1])) for m, v in (r.get("entries") or {}).items()
                  if isinstance(v, (list, tuple)) and len(v) >= 2 and m in index]
        pieces += [(over, _num(r.get("overhead"))), (over + 1, _num(r.get("dt")))]
        for key, amount in pieces:
            starts.append(start)
            ends.append(end)
            amounts.append(amount)
            keys.append(key)
    binned = spread(starts, ends, amounts, keys, edges, len(methods) + 2)
    npes = max(max(pes, default=-1) + 1, int(_num(job.get("npes"))))
    pe_busy = np.zeros((npes, len(methods)))
    pe_overhead, pe_span = np.zeros(npes), np.zeros(npes)
    for pe, pe_rows in pes.items():
        for name, (_, seconds) in live.entry_totals(pe_rows).items():
            pe_busy[pe, index[name]] += seconds
        pe_overhead[pe] = sum(_num(r.get("overhead")) for r in pe_rows)
        pe_span[pe] = sum(_num(r.get("dt")) for r in pe_rows)
    marks = [(_num(e.get("t")) - t0, str(e.get("kind")), event_text(e))
             for e in loaded.get("events") or []]
    return Profile(edges=edges, methods=methods, busy=binned[:, :over],
                   overhead=binned[:, over], capacity=binned[:, over + 1], pe_busy=pe_busy,
                   pe_overhead=pe_overhead, pe_span=pe_span, events=marks, source="live")


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


# ------------------------------------------------------------------ the job view (shoal top)
def event_text(e: Mapping[str, Any]) -> str:
    """One event of ``events.jsonl`` in words."""
    kind = e.get("kind")
    if kind == "lb":
        before, after = e.get("before"), e.get("after")
        text = f"step {e.get('step', '?')}"
        if e.get("strategy"):
            text += f" ({e['strategy']})"
        text += f": max/avg {_ratio(before)} -> {_ratio(after)}"
        if isinstance(e.get("migrations"), int):
            text += f", {e['migrations']} migrations"
        return text
    if kind == "checkpoint":
        text = f"generation {e.get('generation', '?')}"
        if isinstance(e.get("bytes"), int):
            text += f", {size(e['bytes'])}"
        if isinstance(e.get("seconds"), (int, float)):
            text += f" in {e['seconds']:.3g} s"
        return text
    if kind == "resize":
        return f"{e.get('from', '?')} -> {e.get('to', '?')} PEs"
    if kind in ("failure", "restart"):
        who = f"PE {e['pe']}" if isinstance(e.get("pe"), int) else "the job"
        detail = e.get("detail")
        return f"{who}{': ' + str(detail) if detail else ''}"
    return ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "kind"))


def _ratio(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else "?"


def size(n: float | None) -> str:
    """Bytes in binary units (``-`` for none)."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # (not reached)


@dataclass
class PEView:
    """One PE in ``shoal top``: shares of its recent time (busy, idle, overhead), rates
    over the same window, and its last row's memory, queue and elements (None: no rows)."""

    pe: int
    host: str
    rows: int
    busy: float | None = None
    idle: float | None = None
    overhead: float | None = None
    msgs_sent: float | None = None
    msgs_received: float | None = None
    bytes_sent: float | None = None
    bytes_received: float | None = None
    rss: int | None = None
    queue: int | None = None
    elements: int | None = None
    utilisation: float | None = None  # over the whole run


def pe_view(pe: int, rows: Sequence[Mapping[str, Any]], window: float,
            host: str = "") -> PEView:
    """PE ``pe`` over its rows of the last ``window`` seconds (at least its last row)."""
    if not rows:
        return PEView(pe=pe, host=host, rows=0)
    last = rows[-1]
    newest = _num(last.get("t"))
    recent = [r for r in rows if _num(r.get("t")) > newest - window] or [last]
    span = sum(_num(r.get("dt")) for r in recent)

    def share(amount: float) -> float | None:
        return amount / span if span > 0 else None

    def per_second(key: str) -> float | None:
        return sum(_num(r.get(key)) for r in recent) / span if span > 0 else None

    return PEView(pe=pe, host=str(last.get("host") or host), rows=len(rows),
                  busy=share(sum(live.busy(r) for r in recent)),
                  idle=share(sum(_num(r.get("idle")) for r in recent)),
                  overhead=share(sum(_num(r.get("overhead")) for r in recent)),
                  msgs_sent=per_second("sent"), msgs_received=per_second("received"),
                  bytes_sent=per_second("bytes_sent"),
                  bytes_received=per_second("bytes_received"),
                  rss=_int(last.get("rss")), queue=_int(last.get("queue")),
                  elements=_int(last.get("elements")), utilisation=live.utilisation(rows))


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


@dataclass
class JobView:
    """What ``shoal top`` shows of a job: the summary the dashboard's jobs page gives
    (``shoal.dashboard.data.job_summary``), each PE, the top entry methods over the run
    (name, calls, seconds, share of all entry time), totals and the recent events."""

    summary: dict[str, Any]
    pes: list[PEView]
    methods: list[tuple[str, int, float, float]]
    events: list[dict[str, Any]]
    missing: list[int]  # PEs the job has that wrote no rows (yet)
    window: float


def job_view(loaded: Mapping[str, Any], now: float, window: float = 5.0, top: int = 10,
             recent_events: int = 10, alive: bool | None = None) -> JobView:
    """The job view of ``shoal.live.load``'s answer at time ``now``; ``alive`` (is the
    supervisor running) defaults to ``shoal.live.alive`` of the job."""
    from shoal.dashboard.data import job_summary

    job = dict(loaded.get("job") or {})
    job["alive"] = live.alive(job) if alive is None else alive
    summary = job_summary(job, now)
    pes_rows: dict[int, list[dict[str, Any]]] = dict(loaded.get("pes") or {})
    hosts = [str(h) for h in job.get("hosts") or []]
    npes = max(int(_num(job.get("npes"))), max(pes_rows, default=-1) + 1)
    views, missing = [], []
    for pe in range(npes):
        rows = pes_rows.get(pe, [])
        if not rows:
            missing.append(pe)
        views.append(pe_view(pe, rows, window, hosts[pe] if pe < len(hosts) else ""))
    every = [r for rows in pes_rows.values() for r in rows]
    totals = live.entry_totals(every)
    entry_time = sum(s for _, s in totals.values())
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))[:top]
    methods = [(name, calls, seconds, seconds / entry_time if entry_time > 0 else 0.0)
               for name, (calls, seconds) in ranked]
    events = list(loaded.get("events") or [])[-recent_events:]
    return JobView(summary=summary, pes=views, methods=methods, events=events,
                   missing=missing, window=window)


def rows_total(pes: Iterable[PEView], key: str) -> float | None:
    """The sum of a rate over the PEs that have it (None if none has)."""
    values = [getattr(p, key) for p in pes if getattr(p, key) is not None]
    return sum(values) if values else None
