"""``shoal profile``: Projections-style figures for papers (issue 29, item 4): the time
profile (utilisation over time stacked by entry method) and the usage profile (each PE's
utilisation) of a trace (``shoal run --trace``) or of a job's live data, as PNG, SVG or PDF.
``shoal lb plot`` draws each PE's load per iteration from the same trace; the numbers of
both come from ``shoal.views``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from shoal.errors import UsageError

TOP_METHODS = 8  # methods with their own colour; the rest is "other"
VIEWS = ("both", "time", "usage")


def load(source: str, registry: str | None, bins: int | None) -> Any:
    """The profile of ``source``: a trace file, else a job directory or job id."""
    from shoal import views

    p = Path(source)
    if p.is_file():
        from shoal.runtime.trace import read

        doc = read(p)
        try:
            return views.trace_profile(doc, bins)
        except UsageError as exc:
            raise UsageError(f"{source}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{source} is not a trace written by shoal run --trace (an "
                             f"event without {exc})") from None
    from shoal import live
    from shoal.cli.top import resolve

    folder = resolve(source, registry)
    try:
        return views.live_profile(live.load(folder), bins)
    except UsageError as exc:
        raise UsageError(f"{source}: {exc}") from None


def _axis(seconds: float) -> tuple[float, str]:
    """A scale and unit for a time axis of ``seconds``."""
    if seconds < 2e-3:
        return 1e6, "µs"
    if seconds < 2.0:
        return 1e3, "ms"
    return 1.0, "s"


def _colours(methods: list[str]) -> tuple[list[str], dict[str, Any]]:
    import matplotlib

    shown = methods[:TOP_METHODS] + (["other"] if len(methods) > TOP_METHODS else [])
    cmap = matplotlib.colormaps["tab10"]
    colours: dict[str, Any] = {m: cmap(k) for k, m in enumerate(methods[:TOP_METHODS])}
    colours["other"] = "#999999"
    colours["overhead"] = "#d8b365"
    return shown, colours


def _stack(values: Any, methods: list[str], shown: list[str]) -> list[Any]:
    """``values[..., m]`` regrouped as the shown methods (the rest summed as other)."""
    out = [values[..., k] for k in range(min(TOP_METHODS, len(methods)))]
    if len(methods) > TOP_METHODS:
        out.append(values[..., TOP_METHODS:].sum(axis=-1))
    return out


def _layers(busy: Any, overhead: Any, whole: Any, methods: list[str], shown: list[str],
            with_overhead: bool, np: Any) -> tuple[list[str], list[Any]]:
    """The stacked layers of a panel, in percent of ``whole`` (per bin or per PE; 0 where
    it is 0): the shown methods' ``busy``, then ``overhead`` when drawn."""
    share = np.divide(busy, whole[:, None], out=np.zeros_like(busy),
                      where=whole[:, None] > 0) * 100
    layers = _stack(share, methods, shown)
    if with_overhead:
        layers.append(np.divide(overhead, whole, out=np.zeros_like(whole),
                                where=whole > 0) * 100)
    return shown + (["overhead"] if with_overhead else []), layers


def draw(profile: Any, path: str, view: str, title: str | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from shoal.files import save_figure

    panels = ["time", "usage"] if view == "both" else [view]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.4 * len(panels)), squeeze=False)
    shown, colours = _colours(profile.methods)
    with_overhead = bool(profile.pe_overhead.any())
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        if panel == "time":
            _time_panel(ax, profile, shown, colours, with_overhead, np)
        else:
            _usage_panel(ax, profile, shown, colours, with_overhead, np)
    handles = [matplotlib.patches.Patch(color=colours[m], label=m) for m in shown]
    if with_overhead:
        handles.append(matplotlib.patches.Patch(color=colours["overhead"], label="overhead"))
    fig.legend(handles=handles, loc="upper center", ncol=min(4, len(handles)),
               fontsize="small", frameon=False)
    if title:
        fig.suptitle(title, y=0.995, fontsize="medium")
    top = 1 - (0.05 + 0.035 * ((len(handles) + 3) // 4)) / len(panels)
    fig.tight_layout(rect=(0, 0, 1, top))
    save_figure(fig, path)


def _time_panel(ax: Any, profile: Any, shown: list[str], colours: dict[str, Any],
                with_overhead: bool, np: Any) -> None:
    scale, unit = _axis(float(profile.edges[-1]))
    edges = profile.edges * scale
    names, layers = _layers(profile.busy, profile.overhead, profile.capacity, profile.methods,
                            shown, with_overhead, np)
    base = np.zeros(len(edges) - 1)
    for name, layer in zip(names, layers, strict=True):
        ax.stairs(base + layer, edges, baseline=base, fill=True, color=colours[name], lw=0)
        base = base + layer
    ax.stairs(profile.utilisation * 100, edges, color="k", lw=0.6)
    for k, (t, kind, _) in enumerate(e for e in profile.events if e[1] in ("lb", "resize",
                                                                          "failure")):
        ax.axvline(t * scale, color="k" if kind == "lb" else "r", lw=0.6, ls=":",
                   label="LB step" if k == 0 and kind == "lb" else None)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(0, 100)
    width = (profile.edges[1] - profile.edges[0]) * scale
    since = "the first entry method" if profile.source == "trace" else "the first row"
    ax.set_xlabel(f"time from {since} ({unit}; {len(edges) - 1} bins of {width:.3g} {unit})")
    ax.set_ylabel("utilisation (% of PE time)")
    ax.set_title("time profile", fontsize="medium", loc="left")


def _usage_panel(ax: Any, profile: Any, shown: list[str], colours: dict[str, Any],
                 with_overhead: bool, np: Any) -> None:
    span = profile.pe_span
    names, layers = _layers(profile.pe_busy, profile.pe_overhead, span, profile.methods, shown,
                            with_overhead, np)
    x = np.arange(len(span))
    base = np.zeros(len(span))
    for name, layer in zip(names, layers, strict=True):
        ax.bar(x, layer, bottom=base, color=colours[name], width=0.8 if len(x) > 1 else 0.5)
        base = base + layer
    ax.set_xlim(-0.6, len(x) - 0.4)
    ax.set_ylim(0, 100)
    if len(x) <= 32:
        ax.set_xticks(x)
    ax.set_xlabel("PE")
    ax.set_ylabel("utilisation (% of run)")
    ax.set_title("usage profile", fontsize="medium", loc="left")


@click.command("profile")
@click.argument("source", metavar="TRACE|JOB")
@click.option("--out", required=True, metavar="FIGURE",
              help="Write the figure here; its suffix names the format (.png, .svg, .pdf).")
@click.option("--view", type=click.Choice(VIEWS), default="both", show_default=True,
              help="The time profile, the usage profile (per PE), or both stacked.")
@click.option("--bins", default=None, type=click.IntRange(1, 100000),
              help="Bins of the time profile (default: round widths, 80-200 bins over the "
                   "run; for live data no shorter than the publication period).")
@click.option("--csv", "csv_path", default=None,
              help="Also write the time profile (one row per bin and entry method) to this "
                   "CSV file.")
@click.option("--title", default=None, help="A title over the figure.")
@click.option("--registry", default=None, metavar="DIR",
              help="Where shoal run registers jobs, for a JOB id (default $SHOAL_STATE_DIR, "
                   "else ~/.local/state/shoal).")
def profile(source: str, out: str, view: str, bins: int | None, csv_path: str | None,
            title: str | None, registry: str | None) -> None:
    """Projections-style figures of a run: the time profile (the PEs' utilisation over
    time, stacked by entry method, load balancing steps marked) and the usage profile (each
    PE's utilisation over the run, stacked by entry method). TRACE|JOB is a trace written by
    `shoal run --trace` or a job directory or job id whose live data to use (running or
    finished). `shoal lb plot` draws each PE's load per iteration from a trace."""
    from shoal.cli.render import console, csv_outputs, write_csv
    from shoal.files import check_outputs, figure

    check_outputs({"--out": figure(out), "--csv": csv_outputs(csv_path)})
    prof = load(source, registry, bins)
    draw(prof, out, view, title)
    util = prof.pe_utilisation
    console.print(f"wrote {out}: {len(prof.edges) - 1} bins of "
                  f"{prof.edges[1] - prof.edges[0]:.3g} s, {len(util)} PEs "
                  f"(utilisation {util.min():.1%}-{util.max():.1%}), "
                  f"{len(prof.methods)} entry methods")
    if csv_path is not None:
        rows = [{"bin": b, "start_s": float(prof.edges[b]), "end_s": float(prof.edges[b + 1]),
                 "method": m, "seconds": float(prof.busy[b, k]),
                 "capacity_s": float(prof.capacity[b])}
                for b in range(len(prof.edges) - 1) for k, m in enumerate(prof.methods)]
        write_csv(csv_path, rows, {"source": source, "view": "time profile"})
        console.print(f"wrote {csv_path}")
