"""Entry point of the ``shoal`` command."""

from __future__ import annotations

import sys

import click

import shoal
from shoal.cli.gossip import gossip
from shoal.cli.mapping import map_cmd, topology
from shoal.cli.netmodel import netmodel


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(shoal.__version__, prog_name="shoal")
def cli() -> None:
    """shoal: an adaptive runtime for parallel programs on HPC clusters, and the system
    knowledge it needs: gossip-spread node state, the migratable-object runtime (`shoal
    run`), the max-rate communication model, and topology-aware process mapping."""


cli.add_command(gossip)
cli.add_command(netmodel)
cli.add_command(map_cmd)
cli.add_command(topology)


@cli.command()
@click.option("--nodes", default=1024, show_default=True, help="Simulated cluster size.")
@click.option("--ranks", default=2, show_default=True, help="MPI ranks of the live service.")
@click.option("--duration", default="3s", show_default=True, help="Run time of the service.")
@click.pass_context
def demo(ctx: click.Context, nodes: int, ranks: int, duration: str) -> None:
    """The main job: simulate gossip at the paper's settings, then run the MPI service."""
    from shoal.cli.gossip import run, simulate

    ctx.invoke(simulate, nodes=str(nodes), window="10%,20%,40%", interval="256ms")
    ctx.invoke(run, nprocs=ranks, interval="50ms", duration=duration)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("-n", "nprocs", default=2, show_default=True, help="Number of PEs (MPI ranks).")
@click.option("--timeout", default=None, help="Kill the job after this long (e.g. 10min).")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(nprocs: int, timeout: str | None, program: str, args: tuple[str, ...]) -> None:
    """Run a shoal PROGRAM on N PEs through the installed mpiexec (the embedded MPICH unless
    SHOAL_MPIEXEC names another launcher). Under srun or a site mpiexec, launch
    `python PROGRAM` directly instead."""
    from shoal.launch import run_ranks
    from shoal.units import parse_duration

    limit = None if timeout is None else parse_duration(timeout, "--timeout")
    done = run_ranks(nprocs, [program, *args], timeout=limit)
    sys.exit(done.returncode)


def main() -> None:
    """Run the CLI; a user's mistake is one line on stderr and exit code 2."""
    try:
        cli.main(standalone_mode=False)
    except shoal.ShoalError as exc:
        _fail(str(exc))
    except click.exceptions.Abort:
        _fail("aborted")
    except click.ClickException as exc:
        _fail(exc.format_message())
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def _fail(message: str) -> None:
    sys.stderr.write(f"shoal: error: {message}\n")
    sys.exit(2)
