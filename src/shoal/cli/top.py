"""``shoal top``: a job's view in the terminal (issue 29, item 3): what the dashboard's job
page shows, for users who reach the cluster over ssh only. It reads the job's live files
through ``shoal.live`` and computes with ``shoal.views`` (the job summary is the
dashboard's own, ``shoal.dashboard.data.job_summary``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from shoal.errors import UsageError

BAR = 20  # characters of a PE's utilisation bar
FINISHED = ("done", "failed", "lost")


def resolve(spec: str, registry: str | None) -> Path:
    """The live folder ``spec`` names (a job directory, its ``live/``, a registry entry, a
    job id or a unique prefix of one); a :class:`UsageError` naming what was looked at."""
    from shoal import live

    found = live.find(spec, registry)
    if found is not None:
        return found
    p = Path(spec)
    if p.is_dir():
        raise UsageError(f"{spec} holds no live data of a job (no {live.LIVE}/{live.JOB} in "
                         "it, nor a job.json beside pe-N.jsonl files): give the job directory "
                         "of a shoal run, or its job id")
    where = live.root(registry) / live.JOBS
    ids = [str(j.get("id")) for j in live.jobs(registry)]
    if "/" in spec or p.exists():
        raise UsageError(f"{spec}: no such job directory (a job's directory may be removed "
                         f"when it ends: its live files are then kept in {where}/ID; "
                         f"{len(ids)} jobs there{': ' + ', '.join(ids[:5]) if ids else ''})")
    many = [i for i in ids if i.startswith(spec)]
    if len(many) > 1:
        raise UsageError(f"job id {spec!r} is ambiguous in {where}: {', '.join(many[:8])}")
    raise UsageError(f"no job {spec!r}: not a directory, nor a job id in the registry {where}"
                     f" ({len(ids)} jobs there{': ' + ', '.join(ids[:5]) if ids else ''}; "
                     "--registry or $SHOAL_STATE_DIR names another)")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _rate(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.1f}{prefix}{unit}/s"
    return f"{x:.0f}{unit}/s"


def _duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def _bar(busy: float | None, overhead: float | None) -> Text:
    """busy as █, overhead as ▒, the rest (idle) as ·"""
    if busy is None:
        return Text("no data".ljust(BAR), style="dim")
    b = round(BAR * min(max(busy, 0.0), 1.0))
    o = min(BAR - b, round(BAR * min(max(overhead or 0.0, 0.0), 1.0)))
    return Text.assemble(("█" * b, "green"), ("▒" * o, "yellow"), ("·" * (BAR - b - o), "dim"))


def render(view: Any) -> Group:
    """The job view (``shoal.views.JobView``) as rich renderables."""
    parts: list[Any] = [_head(view.summary, len(view.pes)), _pe_table(view)]
    if view.missing:
        parts.append(Text(f"no rows (yet) from PE {', '.join(map(str, view.missing))}",
                          style="yellow"))
    parts += [_method_table(view), _event_table(view)]
    return Group(*parts)


def _head(s: dict[str, Any], npes: int) -> Text:
    state = s["state"]
    style = {"running": "bold green", "failed": "bold red", "lost": "bold red"}.get(state,
                                                                                    "bold")
    return Text.assemble(
        ("job ", "dim"), (str(s["id"]), "bold"), "  ", str(s.get("name") or "?"),
        "  ", (state, style), ("  uptime ", "dim"), _duration(s.get("uptime")),
        ("  PEs ", "dim"), str(s.get("npes") if s.get("npes") is not None else npes),
        ("  nodes ", "dim"), str(s.get("nodes")),
        ("  period ", "dim"), f"{s['period']}s" if s.get("period") else "-")


def _table(title: str, columns: tuple[str, ...], left: tuple[str, ...]) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for name in columns:
        t.add_column(name, justify="left" if name in left else "right")
    return t


def _pe_table(view: Any) -> Table:
    from shoal.views import rows_total, size

    pes = _table(f"PEs (last {view.window:g} s; █ busy ▒ overhead · idle; run: whole run)",
                 ("PE", "host", "utilisation", "busy", "idle", "ovh", "run", "msg out",
                  "msg in", "bytes out", "bytes in", "RSS", "queue", "elements"),
                 ("host", "utilisation"))
    for p in view.pes:
        pes.add_row(str(p.pe), p.host, _bar(p.busy, p.overhead), _pct(p.busy), _pct(p.idle),
                    _pct(p.overhead), _pct(p.utilisation), _rate(p.msgs_sent),
                    _rate(p.msgs_received), _rate(p.bytes_sent, "B"),
                    _rate(p.bytes_received, "B"), size(p.rss), _maybe(p.queue),
                    _maybe(p.elements))
    shown = [p for p in view.pes if p.busy is not None]
    if shown:
        mean = sum(p.busy for p in shown) / len(shown)
        pes.add_row("all", "", _bar(mean, sum(p.overhead or 0 for p in shown) / len(shown)),
                    _pct(mean), "", "", "", _rate(rows_total(shown, "msgs_sent")),
                    _rate(rows_total(shown, "msgs_received")),
                    _rate(rows_total(shown, "bytes_sent"), "B"),
                    _rate(rows_total(shown, "bytes_received"), "B"),
                    size(sum(p.rss or 0 for p in shown)), str(sum(p.queue or 0 for p in shown)),
                    str(sum(p.elements or 0 for p in shown)), style="bold")
    return pes


def _maybe(value: int | None) -> str:
    return "-" if value is None else str(value)


def _method_table(view: Any) -> Table:
    methods = _table("entry methods (whole run)", ("method", "calls", "seconds", "share"),
                     ("method",))
    for name, calls, seconds, share in view.methods:
        methods.add_row(name, str(calls), f"{seconds:.3f}", _pct(share))
    if not view.methods:
        methods.add_row("(none yet)", "", "", "")
    return methods


def _event_table(view: Any) -> Table:
    from shoal.views import event_text

    events = _table("recent events", ("at", "kind", "what"), ("kind", "what"))
    start = view.summary.get("start")
    for e in view.events:
        at = e.get("t")
        when = _duration(at - start) if isinstance(at, (int, float)) and \
            isinstance(start, (int, float)) else "-"
        events.add_row(when, str(e.get("kind")), event_text(e))
    if not view.events:
        events.add_row("", "(none)", "")
    return events


def snapshot(folder: Path, window: float, top_n: int) -> Any:
    from shoal import live, views

    return views.job_view(live.load(folder), time.time(), window=window, top=top_n)


def follow(folder: Path, ident: str, registry: str | None) -> Path | None:
    """Where job ``ident``'s live files are now: ``folder`` while its ``job.json`` is
    there, else the registry's entry (the job ended and its directory was removed, the
    files kept in the registry), else None."""
    from shoal import live
    from shoal.jobdir import read_json

    if read_json(folder / live.JOB) is not None:
        return folder
    return live.find(ident, registry) if ident else None


def _refresh(folder: Path, ident: str, registry: str | None, window: float,
             top_n: int) -> tuple[Path, Any] | None:
    """The job's view now, from wherever its files are (they move to the registry when
    its directory is removed at its end, possibly between finding and reading them)."""
    for _ in range(3):
        moved = follow(folder, ident, registry)
        if moved is None:
            return None
        view = snapshot(moved, window, top_n)
        if str(view.summary["id"]) == ident:
            return moved, view
        folder = moved
    return None


@click.command("top")
@click.argument("job", metavar="JOB")
@click.option("--once", is_flag=True,
              help="Print one snapshot as plain text and exit (for scripts); a finished "
                   "job is always shown once.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="Seconds between refreshes of the live display.")
@click.option("--window", default=5.0, show_default=True, type=click.FloatRange(0.0, None),
              help="Seconds of recent rows the per-PE shares and rates are over (at least "
                   "each PE's last row).")
@click.option("--top", "top_n", default=10, show_default=True, type=click.IntRange(1, 1000),
              help="How many entry methods to list.")
@click.option("--registry", default=None, metavar="DIR",
              help="Where shoal run registers jobs (default $SHOAL_STATE_DIR, else "
                   "~/.local/state/shoal).")
def top(job: str, once: bool, interval: float, window: float, top_n: int,
        registry: str | None) -> None:
    """A job's view in the terminal, refreshed every second while it runs: per-PE
    utilisation (busy, idle, overhead), message and byte rates, memory, queue and elements,
    the entry methods that took the most time, the recent load balancing steps (imbalance
    max/avg before and after), checkpoints, resizes and failures, the job's state and
    uptime. JOB is a job directory (--jobdir of shoal run) or a job id from the registry
    (as the dashboard lists them). A finished job is printed once (post mortem)."""
    from shoal.cli.render import console

    folder = resolve(job, registry)
    view = snapshot(folder, window, top_n)
    if once or view.summary["state"] in FINISHED or not console.is_terminal:
        out = console if not once else Console(highlight=False, color_system=None,
                                               width=console.width)
        out.print(render(view))
        return
    from rich.live import Live

    try:
        with Live(render(view), console=console, auto_refresh=False,
                  redirect_stderr=False) as display:
            while view.summary["state"] not in FINISHED:
                time.sleep(interval)
                ident = str(view.summary["id"])
                found = _refresh(folder, ident, registry, window, top_n)
                if found is None:  # gone, and not in the registry: the last view stays
                    console.print(f"the live files of job {ident} are gone from {folder}")
                    break
                folder, view = found
                display.update(render(view), refresh=True)
    except KeyboardInterrupt:
        pass
