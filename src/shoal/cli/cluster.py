"""``shoal cluster``: an emulated multi-node cluster with Slurm on this machine (root, Linux),
to try multi-node runs on a laptop and to test srun, salloc and sbatch across nodes."""

from __future__ import annotations

import os
import shlex
import time
from typing import Any

import click

from shoal import units
from shoal.cluster import EmulatedCluster
from shoal.errors import UsageError

name_option = click.option("--name", default="shoal", show_default=True,
                           help="The cluster's name: several clusters of different names "
                                "can run side by side.")


@click.group()
def cluster() -> None:
    """An emulated multi-node cluster with Slurm on this machine. Nodes n1, n2... are
    network namespaces with their own hostname, address, /tmp and /dev/shm (every other
    path is shared), joined by a bridge whose links can be shaped, running a real Slurm
    (munged, slurmctld, a slurmd per node). Needs root on Linux and Slurm (`make
    cluster-deps`)."""


def _shaping(delay: str | None, loss: str | None, rate: str | None) -> dict[str, float | None]:
    return {"delay": None if delay is None else units.parse_duration(delay, "--delay"),
            "loss": None if loss is None else units.parse_fraction(loss, "--loss"),
            "rate": None if rate is None else units.parse_rate(rate, "--rate")}


def _describe(shape: dict[str, float]) -> str:
    parts = []
    if "delay" in shape:
        parts.append(f"delay {units.format_duration(shape['delay'])}")
    if "loss" in shape:
        parts.append(f"loss {shape['loss'] * 100:g}%")
    if "rate" in shape:
        parts.append(f"rate {shape['rate'] * 8 / 1e6:g} Mbit/s")
    return ", ".join(parts) or "-"


shape_options = [
    click.option("--delay", default=None,
                 help="One-way delay between two nodes, e.g. 1ms (needs netem)."),
    click.option("--loss", default=None,
                 help="Packet loss between two nodes, e.g. 1% (needs netem)."),
    click.option("--rate", default=None, help="Each node link's rate, each way, e.g. 1Gbit."),
]


def _with(options: list) -> Any:
    def apply(f: Any) -> Any:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


@cluster.command()
@click.option("-N", "--nodes", default=3, show_default=True, help="Number of nodes.")
@name_option
@_with(shape_options)
@click.option("--no-slurm", is_flag=True, help="Only the nodes and their network.")
@click.option("--share", multiple=True, metavar="DIR",
              help="A directory under /tmp that every node sees as the same (each node has "
                   "its own /tmp; every path outside it is shared already). Repeatable.")
def up(nodes: int, name: str, delay: str | None, loss: str | None, rate: str | None,
       no_slurm: bool, share: tuple[str, ...]) -> None:
    """Make the cluster and start its Slurm; prints how to use it."""
    c = EmulatedCluster(name)
    start = time.monotonic()
    status = c.up(nodes, slurm=not no_slurm, share=share, **_shaping(delay, loss, rate))
    took = time.monotonic() - start
    first, last = status["nodes"][0], status["nodes"][-1]
    click.echo(f"cluster {name!r} up in {took:.1f} s: {nodes} node(s) "
               f"{first['node']}..{last['node']} ({first['address']}..{last['address']}), "
               f"state in {status['dir']}")
    flag = "" if name == "shoal" else f" --name {name}"
    if status["slurm"]:
        click.echo(f"Slurm: slurmctld on port {status['ports']['slurmctld']}, partition "
                   "'shoal', 4 CPUs per node. Use it:")
        click.echo(f"  eval $(shoal cluster env{flag})")
        click.echo("  salloc -N 2 -n 4 shoal run -n 4 prog.py")
    click.echo(f"  shoal cluster exec{flag} n1 -- hostname    # a command inside a node")
    click.echo(f"stop it: shoal cluster down{flag}")


@cluster.command()
@name_option
def down(name: str) -> None:
    """Stop the cluster's daemons and processes, remove its namespaces and state."""
    start = time.monotonic()
    found = EmulatedCluster(name).down()
    if found:
        click.echo(f"cluster {name!r} down in {time.monotonic() - start:.1f} s")
    else:
        click.echo(f"cluster {name!r} was not up: nothing to stop")


@cluster.command()
@name_option
def status(name: str) -> None:
    """The nodes: address, slurmd, Slurm state, link and shaping."""
    from shoal.cli.render import console, table

    s = EmulatedCluster(name).status()
    rows = [[n["node"], n["address"], "running" if n["alive"] else "dead", n["slurm"],
             n["link"], _describe(n["shape"])] for n in s["nodes"]]
    console.print(table(f"cluster {name!r} ({s['subnet']})",
                        ["node", "address", "slurmd" if s["slurm"] else "holder", "Slurm",
                         "link", "shaping"], rows))
    daemons = "".join(f", {d} {'running' if up else 'dead'}" for d, up in s["daemons"].items())
    port = f" (port {s['ports']['slurmctld']})" if s["slurm"] else ""
    console.print(f"state in {s['dir']}{daemons}{port}")


@cluster.command()
@name_option
def env(name: str) -> None:
    """Print the `export` lines that point Slurm's commands at the cluster:
    eval $(shoal cluster env)."""
    for key, value in EmulatedCluster(name).env().items():
        click.echo(f"export {key}={shlex.quote(value)}")


@cluster.command("exec", context_settings={"ignore_unknown_options": True})
@name_option
@click.argument("node")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(name: str, node: str, argv: tuple[str, ...]) -> None:
    """Run a command inside NODE (its network, hostname and /tmp):
    shoal cluster exec n1 -- hostname."""
    cmd = EmulatedCluster(name).command(node, list(argv))
    os.execvp(cmd[0], cmd)


@cluster.command()
@name_option
@click.argument("node")
@click.option("--node-dies", is_flag=True,
              help="Kill its slurmd too: the whole node dies (Slurm marks it down).")
def kill(name: str, node: str, node_dies: bool) -> None:
    """SIGKILL the processes of NODE (its slurmd and slurmstepds survive unless
    --node-dies)."""
    killed = EmulatedCluster(name).kill(node, include_slurmd=node_dies)
    click.echo(f"{node}: killed {len(killed)} process(es)"
               + (f" ({' '.join(map(str, killed))})" if killed else ""))


@cluster.command()
@name_option
@click.argument("node")
@click.argument("state", type=click.Choice(["up", "down"]))
def link(name: str, node: str, state: str) -> None:
    """Take NODE's network link down (it reaches nothing, nothing reaches it) or up."""
    EmulatedCluster(name).link(node, state == "up")
    click.echo(f"{node}: link {state}")


@cluster.command()
@name_option
@click.option("--node", default=None, help="Only this node's link (default: every node).")
@_with(shape_options)
@click.option("--clear", is_flag=True, help="Remove the shaping.")
def shape(name: str, node: str | None, delay: str | None, loss: str | None,
          rate: str | None, clear: bool) -> None:
    """Shape the nodes' links (replacing their earlier shaping), or --clear it."""
    settings = _shaping(delay, loss, rate)
    given = any(v is not None for v in settings.values())
    if clear == given:
        raise UsageError("give --delay, --loss or --rate, or --clear (not both)")
    EmulatedCluster(name).shape(**settings, node=node)
    what = "cleared" if clear else _describe({k: v for k, v in settings.items() if v is not None})
    click.echo(f"{node or 'every node'}: shaping {what}")
