"""``shoal run``: start a program of the migratable-object runtime on N PEs."""

from __future__ import annotations

import os
import sys

import click


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("-n", "nprocs", default=2, show_default=True, help="Number of PEs (MPI ranks).")
@click.option("--timeout", default=None, help="Kill the job after this long (e.g. 10min).")
@click.option("--lb", "strategy", default=None,
              help="Load-balancing strategy, or a chain (greedy, refine, greedy_refine, "
                   "metis, orb, hierarchical, distributed; e.g. metis,refine). Default "
                   "greedy_refine when balancing happens.")
@click.option("--lb-period", default=None,
              help="Also balance every so long (e.g. 500ms), elements moving between "
                   "entry methods.")
@click.option("--lb-dump", default=None, type=click.Path(file_okay=False),
              help="Write each balancing step's database into this directory "
                   "(step-0001.npz, ...; read them with shoal lb simulate).")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(nprocs: int, timeout: str | None, strategy: str | None, lb_period: str | None,
        lb_dump: str | None, program: str, args: tuple[str, ...]) -> None:
    """Run a shoal PROGRAM on N PEs through the installed mpiexec (the embedded MPICH unless
    SHOAL_MPIEXEC names another launcher). Under srun or a site mpiexec, launch
    `python PROGRAM` directly instead (set SHOAL_LB, SHOAL_LB_PERIOD and SHOAL_LB_DUMP, or
    pass lb=, lb_period= and lb_dump= to shoal.start)."""
    from shoal.launch import run_ranks
    from shoal.units import parse_duration

    limit = None if timeout is None else parse_duration(timeout, "--timeout")
    env = dict(os.environ)
    if strategy is not None:
        from shoal.runtime.lb.strategies import chain

        chain(strategy)  # an unknown name is the user's error, said here
        env["SHOAL_LB"] = strategy
    if lb_period is not None:
        env["SHOAL_LB_PERIOD"] = repr(parse_duration(lb_period, "--lb-period"))
    if lb_dump is not None:
        env["SHOAL_LB_DUMP"] = os.path.abspath(lb_dump)
    done = run_ranks(nprocs, [program, *args], timeout=limit, env=env)
    sys.exit(done.returncode)
