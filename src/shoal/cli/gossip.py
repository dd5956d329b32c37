"""``shoal gossip``: simulate the windowed gossip algorithm and run it as an MPI service."""

from __future__ import annotations

import itertools
import sys

import click
import numpy as np
from rich.progress import Progress

from shoal import memory, units
from shoal.cli.relaunch import nprocs_option, relaunch
from shoal.cli.render import console, csv_outputs, table, write_csv
from shoal.errors import UsageError
from shoal.files import check_outputs, figure


def _share(text: str, flag: str, minimum: int) -> float | int:
    """``20%`` -> 0.2 (a fraction of N); ``204`` -> 204 (a count, at least ``minimum``)."""
    if text.strip().endswith("%"):
        frac = units.parse_fraction(text, flag)
        if frac == 0 and minimum > 0:
            raise UsageError(f"{flag} must be larger than 0%")
        return frac
    return units.parse_count(text, f"{flag} (a count, or a percentage)", minimum)


def _window(text: str) -> float | int:
    """``20%`` -> 0.2 of N; ``204`` -> 204 entries."""
    return _share(text, "--window", 1)


def _interval(text: str) -> float:
    """The unit of time in seconds, which must be positive."""
    seconds = units.parse_duration(text, "--interval")
    if seconds <= 0:
        raise UsageError("--interval must be positive")
    return seconds


@click.group()
def gossip() -> None:
    """Decentralized gossip of node state (Amar et al.; Levy14, Fig. 1)."""


@gossip.command()
@click.option("--nodes", default="1024", show_default=True,
              help="Cluster size N; a list 1024,2048 or a range 1024:4096:1024 sweeps.")
@click.option("--window", default="20%", show_default=True,
              help="Window: a percentage of N or a count of entries; sweeps like --nodes "
                   "(10%:100%:10%).")
@click.option("--interval", default="1s", show_default=True,
              help="Unit of time, to print ages in seconds too (256ms, 1s).")
@click.option("--units", "n_units", default=200, show_default=True,
              help="Units of time simulated per run, warm-up included.")
@click.option("--warmup", default=None, type=int, help="Units before measuring "
              "[default: a quarter of --units, at least 20].")
@click.option("--latency", default="0s", show_default=True,
              help="One-way network latency (a duration, converted with --interval).")
@click.option("--loss", default="0%", show_default=True, help="Probability a message is lost.")
@click.option("--dead", default="0%", show_default=True,
              help="Nodes that fail (percentage or count) when the measurement starts.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Random seed of the first run.")
@click.option("--csv", "csv_path", default=None, help="Write one row per run to this CSV "
              "file (plus a .json sidecar).")
@click.option("--plot", default=None, help="Write average age vs window (Fig. 2) to this PNG.")
def simulate(nodes: str, window: str, interval: str, n_units: int, warmup: int | None,
             latency: str, loss: str, dead: str, seed: int, csv_path: str | None,
             plot: str | None) -> None:
    """Simulate Fig. 1 and compare the average age with expected_age(N, W)."""
    from shoal.gossip.analysis import window_entries
    from shoal.gossip.sim import memory_bytes

    check_outputs({"--csv": csv_outputs(csv_path), "--plot": figure(plot)})
    sizes = [units.parse_count(x, "--nodes", 2) for x in units.expand_sweep(nodes)]
    windows = [_window(x) for x in units.expand_sweep(window)]
    unit = _interval(interval)
    lat = units.parse_duration(latency, "--latency") / unit
    p_loss = units.parse_fraction(loss, "--loss")
    if p_loss >= 1:
        raise UsageError("--loss must be below 100%")
    n_dead = _share(dead, "--dead", 0)
    if n_units < 1:
        raise UsageError("--units must be at least 1")
    configs = list(itertools.product(sizes, windows))
    for n, w in configs:  # refuse bad input before any work
        memory.require(memory_bytes(n, window_entries(n, w), n_units),
                       f"simulating {n} nodes for {n_units} units",
                       "simulate fewer --nodes or --units")
    results = _simulate_all(configs, n_units, warmup, lat, p_loss, n_dead, seed)
    _print_simulations(results, unit, n_units, extra=bool(p_loss > 0 or n_dead))
    if n_dead:
        _print_dead_trails(results)
    if csv_path:
        write_csv(csv_path, [r.row(unit) for r in results],
                  {"interval_s": unit, "units": n_units})
    if plot:
        from shoal.gossip.plots import age_vs_window

        age_vs_window(results, plot, interval=None)
        console.print(f"wrote {plot}")


def _simulate_all(configs, n_units, warmup, lat, p_loss, n_dead, seed) -> list:
    """One simulation per (N, window) of ``configs``, seeds counting up from ``seed``, with a
    progress bar when there are several."""
    from shoal.gossip.sim import simulate as run_sim

    results = []
    with Progress(console=console, transient=True, disable=len(configs) < 2) as bar:
        task = bar.add_task("simulating", total=len(configs))
        for k, (n, w) in enumerate(configs):
            results.append(run_sim(n, w, n_units, warmup, latency=lat, loss=p_loss,
                                   dead=n_dead, seed=seed + k))
            bar.advance(task)
    return results


def _print_simulations(results, unit: float, n_units: int, extra: bool) -> None:
    """The table of simulated ages, with message counts when ``extra`` (loss or dead
    nodes)."""
    cols = ["N", "window", "avg age", "expected", "avg age (s)", "expected (s)",
            "p90 age", "max age", "known"] + (["sent", "lost", "to dead"] if extra else [])
    rows = []
    for r in results:
        row = [r.nodes, f"{r.window} ({100 * r.window / r.nodes:.3g}%)", r.mean_age,
               r.expected, r.mean_age * unit, r.expected * unit, r.percentiles[90],
               r.max_age, f"{100 * r.known:.2f}%"]
        if extra:
            row += [r.sent, r.lost, r.to_dead]
        rows.append(row)
    console.print(table(f"Gossip simulation: ages in units of time (1 unit = "
                        f"{units.format_duration(unit)}), {n_units} units per run",
                        cols, rows))


def _print_dead_trails(results) -> None:
    """How the entries of the dead nodes aged over each run."""
    for r in results:
        trail = r.dead_age[~np.isnan(r.dead_age)]
        if len(trail):
            console.print(f"N={r.nodes}: entries of the {r.dead} dead nodes aged from "
                          f"{trail[0]:.3g} to {trail[-1]:.3g} units over the run")


@gossip.command()
@nprocs_option("Launch this many ranks through mpiexec; without it, run as one rank of an MPI "
               "job already started (mpiexec -n 4 shoal gossip run, or srun).")
@click.option("--interval", default="256ms", show_default=True, help="Unit of time.")
@click.option("--duration", default="5s", show_default=True, help="How long to gossip.")
@click.option("--window", default="20%", show_default=True,
              help="Window: a percentage of the ranks or a count.")
@click.option("--entry-size", default="1KiB", show_default=True,
              help="Size of one state record.")
@click.option("--max-outstanding", default=4, show_default=True,
              help="Sends in flight per rank; beyond it a send is dropped and counted.")
@click.option("--poll-max", default="2ms", show_default=True,
              help="Longest sleep between polls: the latency / idle-CPU trade.")
@click.option("--rows", default=32, show_default=True, type=click.IntRange(min=0),
              help="Rows of the cluster table to print.")
def run(nprocs: int | None, interval: str, duration: str, window: str, entry_size: str,
        max_outstanding: int, poll_max: str, rows: int) -> None:
    """Run the gossip service over MPI and print the cluster as rank 0 sees it."""
    from shoal.gossip.records import state_dtype
    from shoal.rank import require_mpi

    ival = _interval(interval)
    dur = units.parse_duration(duration, "--duration")
    esize = units.parse_size(entry_size, "--entry-size")
    state_dtype(esize)
    pmax = units.parse_duration(poll_max, "--poll-max")
    if max_outstanding < 1:
        raise UsageError(f"--max-outstanding must be at least 1 (got {max_outstanding})")
    win = _window(window)
    if nprocs is not None:
        if nprocs < 2:
            raise UsageError("gossip needs at least 2 ranks: use -n 2 or more")
        from shoal.gossip.analysis import window_entries

        window_entries(nprocs, win)
        memory.require(nprocs * nprocs * esize * (2 + max_outstanding),
                       f"{nprocs} ranks with --entry-size {units.format_bytes(esize)}",
                       "use a smaller --entry-size or fewer ranks")
        relaunch(nprocs, timeout=dur + 60 + 2 * nprocs)
        return
    require_mpi("gossip run")
    _rank_main(ival, dur, win, esize, max_outstanding, pmax, rows)


def _rank_main(ival, dur, win, esize, max_outstanding, pmax, rows) -> None:
    import socket

    from mpi4py import MPI

    from shoal.gossip.service import GossipService
    from shoal.rank import abort_on_error

    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        if comm.Get_size() < 2:
            raise UsageError("gossip needs at least 2 ranks: pass -n 2 or start it under "
                             "mpiexec")
        service = GossipService(comm, ival, win, esize, max_outstanding=max_outstanding,
                                poll_max=max(pmax, 50e-6))
        service.run(dur)
        snap = service.snapshot()
        stats = comm.gather(service.summary(), root=0)
        hosts = comm.gather(socket.gethostname(), root=0)
        service.close()
        if comm.Get_rank() == 0:
            _print_cluster(snap, stats, hosts, service, rows)
    sys.stdout.flush()


def _print_cluster(snap, stats, hosts, service, rows) -> None:
    """The cluster table (one row per node: its rank and host) and the per-rank one."""
    n = len(snap)
    cl = [[int(s["node"]), hosts[int(s["node"])], float(s["load"]),
           units.format_bytes(int(s["free_mem"])), int(s["cores"]), float(s["age"])]
          for s in snap[:rows]]
    console.print(table(f"Cluster as rank 0 sees it ({n} nodes, window {service.window}, "
                        f"interval {units.format_duration(service.interval)})",
                        ["node", "host", "load", "free memory", "cores", "age (s)"], cl))
    if n > rows:
        console.print(f"... {n - rows} more nodes (--rows)")
    st = [[s["rank"], hosts[s["rank"]], s["sent"], s["received"], s["dropped"],
           s["malformed"], units.format_bytes(s["bytes_sent"]),
           f"{100 * s['busy_fraction']:.2f}%", s["mean_age"], s["late_ticks"]] for s in stats]
    console.print(table("Per rank", ["rank", "host", "sent", "received", "dropped", "malformed",
                                     "bytes sent", "busy", "avg age (s)", "late ticks"], st))


@gossip.command()
@nprocs_option("Launch this many ranks through mpiexec; without it, run as the ranks of an MPI "
               "job already started (srun, mpiexec).")
@click.option("--app", type=click.Choice(["fft", "ptrans", "cosmo"]), default="fft",
              show_default=True, help="Application kernel.")
@click.option("--every", default=4, show_default=True,
              help="Every k-th rank gossips, the others run the application.")
@click.option("--intervals", default="1ms,4ms,16ms,64ms,256ms,1024ms", show_default=True,
              help="Gossip intervals to try.")
@click.option("--window", default="20%", show_default=True,
              help="Windows to try (percentages of the gossiping ranks or counts).")
@click.option("--repeat", default=3, show_default=True, help="Runs per configuration.")
@click.option("--size", "size_hint", type=click.IntRange(min=1), default=None,
              help="Problem size: FFT length, PTRANS N, or COSMO steps (default: small).")
@click.option("--csv", "csv_path", default=None, help="Tidy results (+ JSON sidecar).")
@click.option("--plot", default=None, help="Figure: application time with its MPI part, "
              "and the gossip ranks' busy fraction, per configuration (PNG).")
def overhead(nprocs, app, every, intervals, window, repeat, size_hint, csv_path,
             plot) -> None:
    """Measure what gossip costs an application on the same ranks (Levy14, Table 1)."""
    from shoal.rank import require_mpi

    check_outputs({"--csv": csv_outputs(csv_path), "--plot": figure(plot)})
    ivals = [_interval(x) for x in units.expand_sweep(intervals)]
    wins = [_window(x) for x in units.expand_sweep(window)]
    if repeat < 1 or every < 2:
        raise UsageError("--repeat must be >= 1 and --every >= 2")
    if nprocs is not None:
        if nprocs < 2 * every:
            raise UsageError(f"-n {nprocs} with --every {every} leaves fewer than 2 gossiping "
                             f"ranks: use -n {2 * every} or more")
        relaunch(nprocs)
        return
    require_mpi("gossip overhead")
    from mpi4py import MPI

    from shoal.apps.overhead import sweep
    from shoal.rank import abort_on_error

    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        rows = sweep(comm, app, every, ivals, wins, repeat, size_hint=size_hint)
    if rows is None:
        return
    out = []
    for r in rows:
        ival = "baseline" if r["interval_s"] is None else units.format_duration(r["interval_s"])
        if r["error"]:
            out.append([ival, str(r["window"]), "failed: " + r["error"], "", "", "", "", "",
                        ""])
            continue
        perf = f"{r['gbps']:.3g} GB/s" if "gbps" in r else units.format_duration(r["seconds"])
        win = r["window"]
        win = "" if win is None else (f"{win:.0%}" if isinstance(win, float) else str(win))
        out.append([ival, win, perf,
                    f"{100 * r['mpi_fraction']:.0f}%",
                    f"{100 * r['slowdown']:+.1f}% ({100 * r['slowdown_min']:+.1f}.."
                    f"{100 * r['slowdown_max']:+.1f})",
                    f"{100 * r.get('busy_fraction', 0):.2f}%", r.get("sent", ""),
                    r.get("dropped", ""),
                    units.format_duration(r["mean_age_s"]) if "mean_age_s" in r else ""])
    console.print(table(f"Gossip overhead on {app} (every {every}th rank gossips, median of "
                        f"{repeat})", ["interval", "window", "application", "MPI",
                                       "slowdown (spread)", "gossip busy", "sent", "dropped",
                                       "age"], out))
    if csv_path:
        write_csv(csv_path, rows, {"app": app, "every": every, "ranks": comm.Get_size()})
    if plot:
        from shoal.gossip.plots import overhead as overhead_figure

        overhead_figure(rows, plot)


@click.command()
@click.option("--nodes", default=1024, show_default=True, help="Simulated cluster size.")
@click.option("--ranks", default=2, show_default=True, help="MPI ranks of the live service.")
@click.option("--duration", default="3s", show_default=True, help="Run time of the service.")
@click.pass_context
def demo(ctx: click.Context, nodes: int, ranks: int, duration: str) -> None:
    """The main job: simulate gossip at the paper's settings, then run the MPI service."""
    ctx.invoke(simulate, nodes=str(nodes), window="10%,20%,40%", interval="256ms")
    ctx.invoke(run, nprocs=ranks, interval="50ms", duration=duration)


def _daemon_commands() -> None:
    """The node daemon and its queries live in :mod:`shoal.cli.gossip_daemon`."""
    from shoal.cli import gossip_daemon as d

    for command in (d.daemon, d.set_key, d.unset_key, d.status, d.keys):
        gossip.add_command(command)


_daemon_commands()
