"""What gossip costs the applications that share the machine (Levy14, Sections 4.2-5).

``sweep`` runs an application kernel (MPI-FFT, PTRANS, the COSMO-SPECS+FD4 proxy) next to
the gossip service (:func:`shoal.gossip.colocate.colocated`) for the baseline (gossip ranks
idle) and for every (interval, window) configuration, ``repeat`` times each, and reports per
configuration the application's time (and GB/s for PTRANS), its MPI share, the slowdown
against the baseline of the same run with its spread over repetitions, and the gossip side:
busy fraction, messages sent, received and dropped, the average age reached. A configuration
that cannot run (a window larger than the gossiping ranks) is reported as such in its row.
"""

from __future__ import annotations

import statistics

from shoal.errors import ShoalError, UsageError
from shoal.gossip.analysis import window_entries
from shoal.gossip.colocate import colocated

APPS = ("fft", "ptrans", "cosmo")


def _run_app(app: str, comm, size_hint: int | None) -> dict:
    """One run of the kernel on ``comm``: seconds, MPI fraction, and GB/s for PTRANS."""
    from mpi4py import MPI

    p = comm.Get_size()
    if app == "fft":
        from shoal.apps import fft

        n = size_hint or p * p * 32768
        return fft.benchmark(comm, n, repeat=1)
    if app == "ptrans":
        from shoal.apps import ptrans

        pp, qq = MPI.Compute_dims(p, 2)
        nb = 64
        n = size_hint or nb * pp * qq * 8
        return ptrans.benchmark(comm, n, nb, pp, qq, repeat=1)
    from shoal.apps import cosmo

    r = cosmo.run(comm, steps=size_hint or 30)
    return {"seconds": r["total"], "mpi_fraction": r["mpi_fraction"]}


def sweep(comm, app: str, every: int, intervals: list[float], windows: list,
          repeat: int = 3, entry_size: int = 1024, size_hint: int | None = None) -> list | None:
    """Baseline and every (interval, window); returns the table rows on rank 0."""
    if app not in APPS:
        raise UsageError(f"--app must be one of {', '.join(APPS)}")
    n_gossip = sum(1 for r in range(comm.Get_size()) if r % every == every - 1)
    configs = [(None, None)] + [(i, w) for i in intervals for w in windows]
    rows = []
    base = None
    with colocated(comm, every, gossip=False) as (app_comm, _):  # warm-up, not measured
        if app_comm is not None:
            _run_app(app, app_comm, size_hint)
    for interval, window in configs:
        error = _config_error(n_gossip, interval, window)
        runs, gossip = [], []
        if error is None:
            runs, gossip = _measure(comm, app, every, interval, window, repeat, entry_size,
                                    size_hint)
        if comm.Get_rank() != 0:
            continue
        row = {"app": app, "every": every, "interval_s": interval, "window": window,
               "repeat": repeat, "error": error or ""}
        if runs:
            if interval is None:
                base = statistics.median(r["seconds"] for r in runs)
            row.update(_app_figures(runs, base))
            row.update(_gossip_figures(gossip, repeat))
        rows.append(row)
    return rows if comm.Get_rank() == 0 else None


def _config_error(n_gossip: int, interval: float | None, window) -> str | None:
    """Why (interval, window) cannot run on ``n_gossip`` gossiping ranks; None if it can (the
    baseline always can)."""
    if interval is None:
        return None
    try:
        window_entries(n_gossip, window)
    except ShoalError as exc:
        return str(exc)
    return None


def _measure(comm, app: str, every: int, interval: float | None, window, repeat: int,
             entry_size: int, size_hint: int | None) -> tuple[list, list]:
    """``repeat`` runs of one configuration (``interval`` None: gossip ranks idle); on rank 0
    the application's result of every run and, per run, the gossip ranks' summaries."""
    runs, gossip = [], []
    for _ in range(repeat):
        with colocated(comm, every, interval or 1.0, window or 0.5, entry_size,
                       gossip=interval is not None) as (app_comm, service):
            res = _run_app(app, app_comm, size_hint) if app_comm is not None else None
            app_root = app_comm is not None and app_comm.Get_rank() == 0
        parts = comm.gather((res if app_root else None,
                             service.summary() if service else None), root=0)
        if comm.Get_rank() == 0:
            runs.append(next(r for r, _ in parts if r is not None))
            gossip.append([g for _, g in parts if g is not None])
    return runs, gossip


def _app_figures(runs: list[dict], base: float | None) -> dict:
    """The application's median time (spread), MPI share, GB/s if measured, and slowdown
    against the baseline time ``base``."""
    secs = [r["seconds"] for r in runs]
    row = {"seconds": statistics.median(secs), "seconds_min": min(secs),
           "seconds_max": max(secs),
           "mpi_fraction": statistics.median(r["mpi_fraction"] for r in runs)}
    if "gbps" in runs[0]:
        row["gbps"] = statistics.median(r["gbps"] for r in runs)
    row["slowdown"] = row["seconds"] / base - 1 if base else 0.0
    row["slowdown_min"] = min(secs) / base - 1 if base else 0.0
    row["slowdown_max"] = max(secs) / base - 1 if base else 0.0
    return row


def _gossip_figures(gossip: list[list[dict]], repeat: int) -> dict:
    """The gossip ranks over all runs: mean busy fraction and age, messages per run."""
    flat = [g for run in gossip for g in run]
    if not flat:
        return {}
    return {"busy_fraction": statistics.mean(g["busy_fraction"] for g in flat),
            "sent": sum(g["sent"] for g in flat) // repeat,
            "received": sum(g["received"] for g in flat) // repeat,
            "dropped": sum(g["dropped"] for g in flat) // repeat,
            "mean_age_s": statistics.mean(g["mean_age"] for g in flat)}
