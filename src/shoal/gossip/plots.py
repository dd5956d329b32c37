"""Figures of the gossip part (matplotlib, written to files)."""

from __future__ import annotations

from collections import defaultdict

from shoal import units
from shoal.files import save_figure
from shoal.gossip.analysis import expected_age


def age_vs_window(results, path: str, interval: float | None = None) -> None:
    """Average vector age against window size, one curve per N: the shape of Fig. 2 of
    Levy14, simulated (markers) next to ``expected_age`` (dashed). Ages in units of time,
    or seconds when ``interval`` is given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = interval or 1.0
    by_n = defaultdict(list)
    for r in results:
        by_n[r.nodes].append(r)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for n, runs in sorted(by_n.items()):
        runs.sort(key=lambda r: r.window)
        pct = [100 * r.window / n for r in runs]
        line, = ax.plot(pct, [r.mean_age * scale for r in runs], "o-", label=f"N = {n}")
        ax.plot(pct, [expected_age(n, r.window) * scale for r in runs], "--",
                color=line.get_color(), alpha=0.7, label=f"expected, N = {n}")
    ax.set_xlabel("window size (% of the vector)")
    ax.set_ylabel("average age of the vector " + ("(s)" if interval else "(units of time)"))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)


def overhead(rows: list[dict], path: str) -> None:
    """What gossip costs an application on the same ranks, one bar per configuration (the
    baseline first): on the left the application's time with its MPI part (the form of
    Figures 3-5 of Levy14), on the right the gossiping ranks' busy fraction (Figure 6).
    ``rows`` are those of :func:`shoal.apps.overhead.sweep` (``interval_s`` None for the
    baseline, ``window``, ``seconds``, ``mpi_fraction``, ``busy_fraction``); rows with an
    ``error`` are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if not r["error"]]
    labels = ["baseline" if r["interval_s"] is None else
              f"{units.format_duration(r['interval_s'])} / {r['window']}" for r in ok]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 0.4 * len(ok) + 1.5), sharey=True)
    ax.barh(labels, [r["seconds"] for r in ok], color="tab:blue", label="time")
    ax.barh(labels, [r["seconds"] * r["mpi_fraction"] for r in ok], color="tab:red",
            label="MPI part")
    ax.invert_yaxis()
    ax.set_xlabel("seconds (lower is better)")
    ax.legend()
    bx.barh(labels, [100 * r.get("busy_fraction", 0.0) for r in ok], color="tab:green")
    bx.set_xlabel("gossip ranks busy (%)")
    fig.tight_layout()
    save_figure(fig, path)
