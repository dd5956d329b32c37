"""``shoal lb``: load balancing offline: synthesise databases and run the strategies on
them, or on the databases a run dumped (Acun14, Section III-A)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
import numpy as np

from shoal import units
from shoal.cli.render import console, csv_outputs, provenance, table, write_csv
from shoal.errors import UsageError
from shoal.files import check_outputs, figure, save_figure, write_text
from shoal.runtime.lb import NAMES
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.synth import GRAPHS, LOADS, PLACEMENTS

if TYPE_CHECKING:
    from shoal.runtime.lb.machine import Machine
    from shoal.runtime.lb.strategies import LBOptions, Strategy


@click.group()
def lb() -> None:
    """Load balancing offline (Acun14, Section III-A): make synthetic load-balancing
    databases and compare the strategies on them or on the databases a run dumped."""


def _count(text: str, flag: str, minimum: int) -> int:
    """A whole number >= ``minimum`` from ``1000000``, ``1e6`` or ``10^6``."""
    s = str(text).strip().replace("_", "")
    if "^" in s:
        base, _, exp = s.partition("^")
        s = f"1e{exp}" if base.strip() == "10" else s
    try:
        value = float(s)
    except ValueError:
        raise UsageError(f"{flag} must be a whole number such as 1000 or 1e6 "
                         f"(got {text!r})") from None
    if not value.is_integer():
        raise UsageError(f"{flag} must be a whole number (got {text!r})")
    if value < minimum:
        raise UsageError(f"{flag} must be at least {minimum} (got {text!r})")
    return int(value)


# ------------------------------------------------------------------------------ synth


@lb.command()
@click.option("--objects", default="100000", show_default=True, metavar="N",
              help="Number of objects (1000000, 1e6 or 10^6).")
@click.option("--pes", default="1024", show_default=True, metavar="N",
              help="Number of PEs.")
@click.option("--load", "load_kind", type=click.Choice(LOADS), default="lognormal",
              show_default=True,
              help="lognormal: exp(N(0, sigma^2)); bimodal: --heavy of the objects, at "
                   "random, --factor times heavier; hotspot: a contiguous block of the "
                   "index space (--heavy of it) --factor times heavier.")
@click.option("--graph", type=click.Choice(GRAPHS), default="none", show_default=True,
              help="Communication: stencil2d/3d: face neighbours on a near-square/cube "
                   "grid of the objects; random: --degree random neighbours each.")
@click.option("--placement", type=click.Choice(PLACEMENTS), default="block",
              show_default=True,
              help="block: object i on PE i * pes // objects; random: uniform.")
@click.option("--seed", default=0, show_default=True, help="Random seed.")
@click.option("--sigma", default=1.0, show_default=True, help="Sigma of lognormal.")
@click.option("--heavy", default="10%", show_default=True,
              help="Fraction of heavy objects (bimodal, hotspot).")
@click.option("--factor", default=10.0, show_default=True,
              help="How much heavier the heavy objects are (bimodal, hotspot).")
@click.option("--degree", default=4, show_default=True,
              help="Neighbours of each object (random graph).")
@click.option("--size", "obj_size", default="16KiB", show_default=True,
              help="Bytes of each object's state (what moving it costs).")
@click.option("--edge-bytes", default="8KiB", show_default=True,
              help="Bytes along each edge of the graph.")
@click.option("--compress", is_flag=True, help="Compress the file (smaller, slower).")
@click.option("--out", required=True, metavar="PATH",
              help="Write the database to this file (.npz format, whatever its name).")
def synth(objects: str, pes: str, load_kind: str, graph: str, placement: str, seed: int,
          sigma: float, heavy: str, factor: float, degree: int, obj_size: str,
          edge_bytes: str, compress: bool, out: str) -> None:
    """Make a synthetic load-balancing database and write it to --out (.npz, the format of
    the runtime's lb_dump) for `shoal lb simulate`."""
    from shoal.runtime.lb.synth import synthesize

    n = _count(objects, "--objects", 1)
    npes = _count(pes, "--pes", 1)
    t0 = time.perf_counter()
    try:
        db = synthesize(n, npes, load_kind, graph, placement, seed, sigma=sigma,
                        heavy=units.parse_fraction(heavy, "--heavy"), factor=factor,
                        degree=degree, size=units.parse_size(obj_size, "--size"),
                        edge_bytes=units.parse_size(edge_bytes, "--edge-bytes"))
    except MemoryError:
        raise UsageError(f"not enough memory for {n} objects on {npes} PEs with a "
                         f"{graph} graph: ask for fewer") from None
    made = time.perf_counter() - t0
    db.save(out, compress=compress)
    written = time.perf_counter() - t0 - made
    rows: list[list] = [
        ["objects", db.n], ["PEs", db.npes], ["objects per PE", db.n / db.npes],
        ["loads", _describe_load(load_kind, sigma, heavy, factor)],
        ["total load", float(db.load.sum())], ["max/avg", f"{db.imbalance():.3f}"],
        ["graph", graph], ["edges", db.src.size],
        ["communication", units.format_bytes(float(db.bytes.sum()))],
        ["edge cut", units.format_bytes(db.edge_cut())], ["placement", placement],
        ["seed", seed], ["file", f"{out} ({units.format_bytes(Path(out).stat().st_size)})"],
        ["time", f"{units.format_duration(made)} to make, "
                 f"{units.format_duration(written)} to write"]]
    console.print(table("Synthetic load-balancing database", ["", "value"], rows))


def _describe_load(kind: str, sigma: float, heavy: str, factor: float) -> str:
    if kind == "lognormal":
        return f"lognormal, sigma {sigma:g}"
    what = "at random" if kind == "bimodal" else "in one block"
    return f"{kind}: {heavy} {what}, {factor:g}x heavier"


# --------------------------------------------------------------------------- simulate


@dataclass
class _Result:
    """What one strategy did to the database."""

    name: str
    after: float
    max_load_after: float
    migrations: int
    bytes_moved: int
    cut_after: int
    hop_bytes_after: float | None
    seconds: float
    scaled_after: np.ndarray  # per-PE load / capacity, for --plot
    rounds: int | None = None  # distributed: gossip rounds, transfer phases, messages
    phases: int | None = None
    messages: int | None = None


def _strategies(text: str, options: LBOptions) -> list[tuple[str, Strategy]]:
    """Names separated by commas, ``all`` for every strategy (``topo`` only with a
    machine); ``a+b`` chains strategies."""
    from shoal.runtime.lb.strategies import STRATEGIES, chain

    known = ", ".join(STRATEGIES)
    picked: dict[str, Strategy] = {}
    for item in (part.strip() for part in text.split(",")):
        if item == "all":
            picked.update((name, chain(name, options)) for name in STRATEGIES
                          if name != "topo" or options.machine is not None)
            continue
        steps = [step.strip() for step in item.split("+")]
        unknown = [step for step in steps if step not in STRATEGIES]
        if unknown:
            raise UsageError(f"unknown strategy {unknown[0]!r} in --strategy {text!r}: "
                             f"use all, or a list of {known} (join with + to chain them)")
        picked["+".join(steps)] = chain(",".join(steps), options)
    return list(picked.items())


def _warm_up() -> None:
    """Compile the numba kernels (greedy, refine, hierarchical) before anything is timed."""
    from shoal.runtime.lb.strategies import STRATEGIES

    tiny = LBDatabase(np.array([2.0, 1.0, 1.0]), np.array([0, 0, 0]), 2)
    for name in ("greedy_refine", "refine", "hierarchical"):
        STRATEGIES[name](tiny)


def _run(db: LBDatabase, name: str, strategy: Strategy, machine: Machine | None,
         seed: int) -> _Result:
    from shoal.runtime.lb.distributed import simulate as grapevine

    assert db.migratable is not None and db.size is not None
    t0 = time.perf_counter()
    outcome = grapevine(db, seed) if name == "distributed" else None
    placement = np.asarray(strategy(db) if outcome is None else outcome.placement, np.int64)
    seconds = time.perf_counter() - t0
    placement = np.where(db.migratable, placement, db.pe)
    moved = placement != db.pe
    scaled = db.pe_loads(placement) / db.capacity()
    hops = None if machine is None else machine.hop_bytes(db, placement)
    out = _Result(name, db.imbalance(placement), float(scaled.max()), int(moved.sum()),
                  int(db.size[moved].sum()), db.edge_cut(placement), hops, seconds, scaled)
    if outcome is not None:
        out.rounds, out.phases, out.messages = (outcome.rounds, outcome.phases,
                                                outcome.messages)
    return out


def _machine(torus: str | None, cores: int, machine_file: str | None,
             npes: int) -> Machine | None:
    """The machine of --torus, --cores and --machine-file (None without --torus)."""
    from shoal.runtime.lb.machine import Machine
    from shoal.topology.torus import Torus

    if torus is None:
        if machine_file is not None:
            raise UsageError("--machine-file needs --torus (the torus its nodes lie on)")
        return None
    shape = Torus.parse(torus, cores)
    return (Machine.from_file(machine_file, shape) if machine_file is not None
            else Machine.block(shape, npes))


@lb.command()
@click.argument("db_path", metavar="DB")
@click.option("--strategy", "names", default="all", show_default=True,
              help=f"A list such as greedy,refine of: {', '.join(NAMES)}, all (every "
                   "one; topo only with --torus); join names with + to chain them "
                   "(metis+refine).")
@click.option("--pes", default=None, metavar="N",
              help="Re-target the database to N PEs first: the objects of PE p go to PE "
                   "p * N // npes (neighbouring PEs merge; new PEs start empty); per-PE "
                   "measurements kept for PEs below both counts, new PEs at defaults.")
@click.option("--torus", default=None, metavar="DIMS",
              help="The machine, e.g. 4x4x4: reports hop-bytes and enables topo.")
@click.option("--cores", default=1, show_default=True,
              help="PEs per torus node (PE p on node p // cores).")
@click.option("--machine-file", default=None, metavar="CSV",
              help="PE-to-node map instead: a mapping CSV (rank,node,coords,core) as "
                   "`shoal map --format csv` writes.")
@click.option("--group", default=64, show_default=True,
              help="PEs per group of hierarchical (without --torus; with it, a node).")
@click.option("--seed", default=0, show_default=True, help="Seed of distributed.")
@click.option("--csv", "csv_path", default=None,
              help="Write one row per strategy to this CSV file (plus a .json sidecar).")
@click.option("--json", "json_path", default=None,
              help="Write the settings and one record per strategy to this JSON file.")
@click.option("--plot", default=None,
              help="Write per-PE loads before and after each strategy to this PNG.")
def simulate(db_path: str, names: str, pes: str | None, torus: str | None, cores: int,
             machine_file: str | None, group: int, seed: int, csv_path: str | None,
             json_path: str | None, plot: str | None) -> None:
    """Run load-balancing strategies on the database DB (from `shoal lb synth` or a run's
    lb_dump) and compare them: max/avg load before and after, migrations, bytes moved,
    communication cut by the placement, hop-bytes on the torus (--torus), the strategy's
    own time, and for distributed its gossip rounds, transfer phases and messages."""
    from shoal.runtime.lb.strategies import LBOptions

    check_outputs({"--csv": csv_outputs(csv_path), "--json": json_path, "--plot": figure(plot)})
    npes = None if pes is None else _count(pes, "--pes", 1)
    db = LBDatabase.read(db_path, keys=False)
    in_file = db.npes
    if npes is not None and npes != db.npes:
        try:
            db = db.retarget(npes)
        except MemoryError:
            raise UsageError(f"not enough memory for --pes {npes}: ask for fewer") from None
        console.print(f"re-targeted from {in_file} to {npes} PEs (PE p -> p * {npes} // "
                      f"{in_file})")
    machine = _machine(torus, cores, machine_file, db.npes)
    if machine is not None:
        machine.check(db)
    picked = _strategies(names, LBOptions(machine=machine, group=group, seed=seed))
    if names.strip() == "all" and machine is None:
        console.print("topo left out: it needs the machine (--torus)")
    _warm_up()
    results = []
    with console.status("") as status:
        for k, (name, strategy) in enumerate(picked):
            status.update(f"running {name} ({k + 1}/{len(picked)}) on {db.n} objects")
            results.append(_run(db, name, strategy, machine, seed))
            console.print(f"{name}: done in {units.format_duration(results[-1].seconds)}")
    _print_results(db, db_path, results, machine)
    meta = {"database": db_path, "objects": db.n, "pes": db.npes, "pes_in_file": in_file,
            "edges": int(db.src.size), "total_load": float(db.load.sum()),
            "retarget": None if db.npes == in_file else "p * pes // pes_in_file",
            "torus": torus, "cores": cores if torus else None, "machine_file": machine_file,
            "group": group, "seed": seed}
    rows = [_row(db, r, machine) for r in results]
    _write(csv_path, lambda path: write_csv(path, rows, meta))
    _write(json_path, lambda path: write_text(path, json.dumps(
        provenance({**meta, "results": rows}), indent=2, default=str) + "\n"))
    if plot:
        _plot(db, results, plot)
        console.print(f"wrote {plot}")


def _write(path: str | None, write: Callable[[str], None]) -> None:
    if not path:
        return
    try:
        write(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the results ({exc.strerror or exc})") from None
    console.print(f"wrote {path}")


def _print_results(db: LBDatabase, db_path: str, results: list[_Result],
                   machine: Machine | None) -> None:
    before, cut = db.imbalance(), db.edge_cut()
    columns = ["strategy", "max/avg before", "max/avg after", "migrations", "migrated",
               "bytes moved", "edge cut before", "edge cut after"]
    if machine is not None:
        columns += ["hop-bytes before", "hop-bytes after"]
    columns += ["time", "rounds / phases / messages"]
    rows = []
    for r in results:
        row = [r.name, f"{before:.3f}", f"{r.after:.3f}", r.migrations,
               f"{100 * r.migrations / max(db.n, 1):.2f}%",
               units.format_bytes(r.bytes_moved), units.format_bytes(cut),
               units.format_bytes(r.cut_after)]
        if machine is not None:
            row += [f"{machine.hop_bytes(db):.4g}", f"{r.hop_bytes_after:.4g}"]
        row += [units.format_duration(r.seconds),
                "" if r.rounds is None else f"{r.rounds} / {r.phases} / {r.messages}"]
        rows.append(row)
    where = "" if machine is None else f", torus {'x'.join(map(str, machine.torus.dims))}"
    console.print(table(f"Strategies on {db_path}: {db.n} objects on {db.npes} PEs{where}, "
                        f"{db.src.size} edges (max/avg: busiest PE's load over the average)",
                        columns, rows))


def _row(db: LBDatabase, r: _Result, machine: Machine | None) -> dict:
    """One tidy row: loads in the database's units (seconds), bytes, seconds; hop-bytes
    empty without a machine, rounds/phases/messages empty but for distributed."""
    scaled = db.pe_loads() / db.capacity()
    return {"strategy": r.name, "objects": db.n, "pes": db.npes, "edges": int(db.src.size),
            "avg_load": float(db.load.sum() / db.npes),
            "max_load_before": float(scaled.max()), "max_load_after": r.max_load_after,
            "max_avg_before": db.imbalance(), "max_avg_after": r.after,
            "migrations": r.migrations, "migrated_fraction": r.migrations / max(db.n, 1),
            "bytes_moved": r.bytes_moved, "edge_cut_before": db.edge_cut(),
            "edge_cut_after": r.cut_after,
            "hop_bytes_before": None if machine is None else machine.hop_bytes(db),
            "hop_bytes_after": r.hop_bytes_after, "strategy_s": r.seconds,
            "rounds": r.rounds, "phases": r.phases, "messages": r.messages}


def _plot(db: LBDatabase, results: list[_Result], path: str) -> None:
    """One panel per strategy: each PE's load / capacity over the average, before (grey)
    and after; written whole or not at all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    avg = db.load.sum() / db.npes or 1.0
    before = db.pe_loads() / db.capacity() / avg
    fig, axes = plt.subplots(len(results), 1, figsize=(7.5, 2.2 * len(results) + 0.6),
                             sharex=True, squeeze=False)
    x = np.arange(db.npes)
    for ax, r in zip(axes[:, 0], results, strict=True):
        ax.step(x, before, where="mid", color="0.6", lw=0.8,
                label=f"before (max/avg {db.imbalance():.3f})")
        ax.step(x, r.scaled_after / avg, where="mid", lw=0.8,
                label=f"{r.name} (max/avg {r.after:.3f})")
        ax.axhline(1.0, color="k", lw=0.6, ls="--")
        ax.set_ylabel("load / average")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("PE")
    fig.tight_layout()
    save_figure(fig, path)


@lb.command()
@click.argument("trace_path", metavar="TRACE")
@click.option("--out", required=True, metavar="PNG",
              help="Write the figure here: each PE's load per iteration, balancing steps "
                   "marked.")
@click.option("--csv", "csv_path", default=None,
              help="Also write the loads (one row per iteration and PE) to this CSV file.")
@click.option("--bins", default=50, show_default=True, type=click.IntRange(1, 100000),
              help="Spans of time to cut a run without AtSync points into.")
def plot(trace_path: str, out: str, csv_path: str | None, bins: int) -> None:
    """Each PE's load per iteration from a trace written by `shoal run --trace` (seconds
    in entry methods between AtSync points, or in equal spans of time without them).
    `shoal profile` draws the trace's time and usage profiles."""
    from shoal.runtime.trace import loads_per_iteration, read

    check_outputs({"--out": figure(out), "--csv": csv_outputs(csv_path)})
    edges, loads, steps = loads_per_iteration(read(trace_path), bins)
    if not loads.size:
        raise UsageError(f"{trace_path} holds no entry methods: nothing to plot")
    _plot_iterations(loads, steps, out)
    console.print(f"wrote {out}: {loads.shape[0]} iterations on {loads.shape[1]} PEs, "
                  f"{len(steps)} balancing steps")
    if csv_path is not None:
        rows = [{"iteration": k, "end_us": float(edges[k]), "pe": p, "load_s": loads[k, p],
                 "step_after": k in steps}
                for k in range(loads.shape[0]) for p in range(loads.shape[1])]
        write_csv(csv_path, rows, {"trace": trace_path})
        console.print(f"wrote {csv_path}")


def _plot_iterations(loads: np.ndarray, steps: list[int], path: str) -> None:
    """Per-PE load per iteration (one line per PE up to 16, else max, average and min),
    with the balancing steps as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = np.arange(loads.shape[0])
    if loads.shape[1] <= 16:
        for p in range(loads.shape[1]):
            ax.plot(x, loads[:, p] * 1e3, lw=0.9, label=f"PE {p}")
    else:
        for curve, name in ((loads.max(1), "max"), (loads.mean(1), "average"),
                            (loads.min(1), "min")):
            ax.plot(x, curve * 1e3, lw=0.9, label=name)
    for k, step in enumerate(steps):
        ax.axvline(step + 0.5, color="k", lw=0.6, ls=":", label="LB step" if k == 0 else None)
    ax.set_xlabel("iteration")
    ax.set_ylabel("load (ms in entry methods)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize="small", ncol=2)
    fig.tight_layout()
    save_figure(fig, path)
