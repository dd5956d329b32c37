"""``shoal run``: start a program of the migratable-object runtime on N PEs."""

from __future__ import annotations

import sys

import click


@click.command(context_settings={"ignore_unknown_options": True})
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
