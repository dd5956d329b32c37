"""``shoal map`` and ``shoal topology``: contention of process mappings on a torus."""

from __future__ import annotations

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from shoal import units
from shoal.cli.render import console, table
from shoal.errors import UsageError
from shoal.files import check_outputs


@click.command("map")
@click.option("--torus", "shape", required=True, help="Nodes per dimension, e.g. 8x16x32.")
@click.option("--cores", default=1, show_default=True, help="Processes per node (T).")
@click.option("--mesh", is_flag=True, help="No wrap-around links (a mesh).")
@click.option("--pattern", required=True,
              help="e.g. 'grid 128x128 stencil=star bytes=1MiB' or @pattern.toml.")
@click.option("--mappings", default="all", show_default=True,
              help="Candidates: 'orderings' (T and the dimensions in every order), 'tiles' "
                   "(tiled mappings of a grid pattern), 'all' (both) or a list such as "
                   "TXYZ,TZXY,tile2x2:XY.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=1),
              help="Rows of the table (the best candidates).")
@click.option("--routing", type=click.Choice(["adaptive", "dor", "paths"]),
              default="adaptive", show_default=True,
              help="adaptive: split equally at each hop (large messages); dor: dimension "
                   "order (small messages); paths: equal split over all minimal paths.")
@click.option("--dor-order", default=None, help="Dimension order of dor, e.g. ZYX.")
@click.option("--half", type=click.Choice(["split", "positive"]), default="split",
              show_default=True, help="A distance of half a ring: both ways or positive.")
@click.option("--metric", default="max", show_default=True,
              help="Ranking metric (max, mean, mean_used, bidir_max, streams_max, "
                   "hop_bytes, dilation, per_process).")
@click.option("--optimize", is_flag=True,
              help="Also search beyond the orderings (recursive bisection + swaps).")
@click.option("--out", default=None, help="Write the best mapping to this file.")
@click.option("--format", "fmt", type=click.Choice(["bgq", "openmpi", "slurm", "csv"]),
              default="csv", show_default=True, help="Format of --out.")
def map_cmd(shape, cores, mesh, pattern, mappings, top, routing, dor_order, half, metric,
            optimize, out, fmt) -> None:
    """Rank process mappings of a communication pattern by the link contention they cause
    (Bhatele-style analysis of Balaji11) and write the best one."""
    from shoal.mapping.mapfiles import write
    from shoal.mapping.mappings import letters
    from shoal.mapping.patterns import parse
    from shoal.mapping.select import candidates, rank
    from shoal.topology.torus import Torus

    check_outputs({"--out": out})
    torus = Torus.parse(shape, cores, mesh)
    pat = parse(pattern)
    order = None
    if dor_order:
        if routing != "dor":
            raise UsageError(f"--dor-order orders dimension-ordered routing, not {routing} "
                             f"routing: add --routing dor, or drop --dor-order")
        names = letters(torus)
        if sorted(dor_order.upper()) != sorted(names):
            raise UsageError(f"--dor-order uses each of {names} once")
        order = tuple(names.index(c) for c in dor_order.upper())
    cands = candidates(torus, pat, mappings)
    with Progress(TextColumn("judging mappings"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("map", total=len(cands))
        ranked = rank(torus, pat, cands, routing, metric, order, half, optimize, keep=1,
                      progress=lambda done, _: bar.update(task, completed=done))
    rows = [[name, units.format_bytes(r["max"]), units.format_bytes(r["mean_used"]),
             r["streams_max"], r["bidir_max"] / max(r["max"], 1e-300), r["dilation"],
             r["per_process"], units.format_bytes(r["hop_bytes"])]
            for name, r, _ in ranked[:top]]
    console.print(table(f"{pat.description} on {shape} x {cores} cores, {routing} routing, "
                        f"ranked by {metric}",
                        ["mapping", "max link", "mean used link", "max streams",
                         "bidir/max", "hops/msg", "per process", "hop-bytes"], rows))
    if len(ranked) > top:
        console.print(f"... {len(ranked) - top} more candidates (--top)")
    best, _, (node, core) = ranked[0]
    console.print(f"best: {best}")
    if out:
        write(out, fmt, torus, node, core)
        console.print(f"wrote {out} ({fmt})")


@click.group()
def topology() -> None:
    """Machine topologies (tori and meshes)."""


@topology.command()
@click.argument("shape")
@click.option("--cores", default=1, show_default=True, help="Processes per node.")
@click.option("--mesh", is_flag=True, help="No wrap-around links.")
def show(shape, cores, mesh) -> None:
    """Print the facts of a partition such as 8x16x32."""
    from shoal.topology.torus import BGP_PARTITIONS, Torus

    t = Torus.parse(shape, cores, mesh)
    rows = [["dimensions", shape + (" (mesh)" if mesh else " (torus)")],
            ["nodes", t.nodes], ["cores per node", cores], ["processes", t.processes],
            ["directed links", t.directed_links()],
            ["diameter (hops)", t.diameter()], ["mean distance (hops)", t.mean_distance()],
            ["bisection links", t.bisection_links()]]
    bgp = [f"{k} nodes" for k, v in BGP_PARTITIONS.items() if v == t.dims]
    if bgp:
        rows.append(["Argonne BG/P partition", bgp[0]])
    console.print(table(f"Topology {shape}", ["", "value"], rows))
