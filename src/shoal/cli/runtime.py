"""``shoal run``: start a program of the migratable-object runtime on N PEs."""

from __future__ import annotations

import os
import sys

import click


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("-n", "nprocs", default=2, show_default=True, type=click.IntRange(min=1),
              help="Number of PEs (MPI ranks).")
@click.option("--timeout", default=None, help="Kill the job after this long (e.g. 10min).")
@click.option("--lb", "strategy", default=None,
              help="Load-balancing strategy, or a chain (greedy, refine, greedy_refine, "
                   "metis, topo (with --lb-machine), orb, hierarchical, distributed: "
                   "GrapevineLB over messages, no PE gathers the database; e.g. "
                   "metis,refine), auto "
                   "(greedy_refine when the MetaBalancer says a step pays) or none (sync "
                   "points resume at once: a baseline). Default greedy_refine when "
                   "balancing happens.")
@click.option("--lb-auto", is_flag=True,
              help="At every AtSync point, balance only when the predicted time lost to "
                   "imbalance exceeds the measured cost of a step (MetaBalancer).")
@click.option("--lb-period", default=None,
              help="Also balance every so long (e.g. 500ms), elements moving between "
                   "entry methods.")
@click.option("--lb-machine", default=None, metavar="TORUS[:CORES|:MAP.csv]",
              help="The torus the PEs run on, for --lb topo and hop-bytes in lb_history: "
                   "4x4x4 (PEs in launch order, filling each node), 4x4x4:2 (2 PEs per "
                   "node) or 4x4x4:map.csv (a mapping CSV of shoal map).")
@click.option("--lb-costs", default=None, metavar="PROFILE[,PROFILE]",
              help="What a message and a byte cost the balancer, from `shoal netmodel fit "
                   "--save` profiles: one for every pair of PEs, or two (within a node, "
                   "between nodes). Default: 10 us a message, 1 ns a byte.")
@click.option("--tune", default=None, metavar="POINT[,POINT]",
              help="Control points the runtime tunes while the job runs (PICS): lb_every "
                   "(balance at every k-th AtSync point), lb_period (seconds between "
                   "periodic steps) and agg_buffer (items per aggregation buffer), chosen "
                   "to lower the time per iteration; "
                   "shoal.control_history() has the decisions.")
@click.option("--lb-dump", default=None, type=click.Path(file_okay=False),
              help="Write each balancing step's database into this directory "
                   "(step-0001.npz, ...; read them with shoal lb simulate).")
@click.option("--power-threshold", default=None, metavar="TEMP",
              help="EMULATED DVFS (no real sensor or governor is used): a thermal model per "
                   "core and a controller that keeps each under TEMP (e.g. 50C or 122F) by "
                   "lowering its emulated frequency; the PE duty-cycles at that frequency "
                   "and the balancer weighs it as that speed.")
@click.option("--power-room", default=None, metavar="TEMP",
              help="The emulated room temperature (default 74F = 23.3C).")
@click.option("--power-every", default=None, metavar="TIME",
              help="How often each PE reads its emulated temperature and sets its "
                   "frequency (default 1s).")
@click.option("--power-spread", default=None, type=float,
              help="How much the cores' emulated cooling differs (fraction of the thermal "
                   "resistance, default 0.4).")
@click.option("--power-monitor", is_flag=True,
              help="Emulate the temperatures at nominal frequency, no control (a baseline).")
@click.option("--trace", default=None, type=click.Path(dir_okay=False),
              help="Write the run's per-PE timeline to this file (Chrome trace format: "
                   "open it in Perfetto; shoal lb plot draws loads per iteration from it).")
@click.option("--live-period", default=None, metavar="TIME",
              help="Each PE publishes a row of live data (time per entry method, idle, "
                   "messages, memory) this often into the job directory, for shoal "
                   "dashboard (default 0.5s; 0 turns it off).")
@click.option("--restart", default=None, type=click.Path(file_okay=False),
              help="Start from this checkpoint (a directory written by shoal.checkpoint), "
                   "on any -n; it is verified (sizes, sha256) first.")
@click.option("--restarts", default=0, show_default=True, type=click.IntRange(0),
              help="Relaunch the job this many times when it dies, from the last checkpoint "
                   "it completed (wherever the program wrote it).")
@click.option("--shrink-on-failure", "shrink", is_flag=True,
              help="Relaunch on one PE fewer after each failure.")
@click.option("--checkpoint-every", "every", default=None, metavar="TIME",
              help="The runtime takes a checkpoint at most this often (e.g. 30s), at AtSync "
                   "points and at shoal.iteration() calls of main, for --restarts to use.")
@click.option("--mtbf", default=None, metavar="TIME",
              help="Mean time between failures (e.g. 6h): --checkpoint-every is then the "
                   "first period only, the next ones follow Young's optimum sqrt(2 C MTBF) "
                   "for the measured checkpoint cost C.")
@click.option("--checkpoint-dir", default=None, type=click.Path(file_okay=False),
              help="Where --checkpoint-every writes (default: the job directory's auto/, "
                   "removed when shoal run ends), and a resize its checkpoint (default: "
                   "node-local /dev/shm, or the job directory when the PEs span nodes).")
@click.option("--ft", is_flag=True,
              help="In-job recovery: a PE that dies is replaced by a rollback of the "
                   "survivors to the last shoal.checkpoint(memory=True) (Open MPI with ULFM: "
                   "set SHOAL_FT_MPI to its prefix).")
@click.option("--kill", "kills", multiple=True, metavar="PE@TIME",
              help="Failure injection: SIGKILL PE's process TIME after it started (e.g. "
                   "1@1.5s; several allowed; first launch only).")
@click.option("--jobdir", default=None, type=click.Path(),
              help="The job directory, where shoal ctl finds the job (default: a new one "
                   "in /tmp, or under ./.shoal/ when the PEs span nodes; printed at start "
                   "and removed at the end; in a DIR given here, what shoal wrote goes at "
                   "the end, your own files stay). Every PE must see it. The live data "
                   "outlives it in the registry ($SHOAL_STATE_DIR/jobs/ID).")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(nprocs: int, timeout: str | None, strategy: str | None, lb_auto: bool,
        lb_period: str | None, lb_machine: str | None, lb_costs: str | None,
        tune: str | None, lb_dump: str | None, mtbf: str | None,
        power_threshold: str | None, power_room: str | None,
        power_every: str | None, power_spread: float | None, power_monitor: bool,
        trace: str | None, live_period: str | None, restart: str | None,
        restarts: int, shrink: bool, every: str | None, checkpoint_dir: str | None, ft: bool,
        kills: tuple[str, ...], jobdir: str | None, program: str,
        args: tuple[str, ...]) -> None:
    """Run a shoal PROGRAM on N PEs: inside a Slurm allocation with `srun --mpi=pmi2` on
    its nodes, elsewhere with the installed mpiexec (the embedded MPICH), or with the
    launcher SHOAL_MPIEXEC names. The job directory is in /tmp on one node and under
    ./.shoal/ when the PEs span nodes (every PE must see it; --jobdir names another).
    Launching `python PROGRAM` directly (srun --mpi=pmi2, mpiexec) works too: the flags below
    are then the environment variables SHOAL_LB, SHOAL_LB_AUTO=1, SHOAL_LB_PERIOD,
    SHOAL_LB_MACHINE, SHOAL_LB_DUMP, SHOAL_TUNE, SHOAL_TRACE, SHOAL_LIVE_PERIOD, SHOAL_RESTART,
    SHOAL_CHECKPOINT_EVERY, SHOAL_MTBF, SHOAL_CHECKPOINT_DIR and SHOAL_POWER_THRESHOLD,
    _ROOM, _EVERY, _SPREAD, _MONITOR=1, or the keywords of shoal.start (lb=, trace=, ...;
    see shoal.options). Everything after PROGRAM is the program's (shoal run -n 2 prog.py
    -n 3: the program sees -n 3). The job ends once the program's main has returned and no
    work is left, or at shoal.exit(). While it runs, `shoal ctl JOBDIR shrink N` / `expand
    N` moves the job to N PEs (at its next shoal.iteration() or AtSync point); the job
    directory is printed at start. A program uses chare arrays and groups, their sections
    (arr[0:8, ::2]), guarded entry methods (@shoal.when), the task pool (shoal.pool.map),
    aggregation (shoal.Aggregator) and control points (shoal.control_point): see the
    README's Runtime section. A rank that ends before shoal.start ends the job with its
    exit code; a rank killed by a signal is named by its PE and host; with --restarts, the
    hosts whose PEs srun saw killed (or Slurm declared failed) are left out of the relaunch."""
    from shoal.options import environment
    from shoal.units import parse_duration

    limit = None if timeout is None else parse_duration(timeout, "--timeout")
    _check_lb(strategy, lb_machine, nprocs)
    if lb_costs is not None:
        from shoal.runtime.lb.costs import load

        lb_costs = ",".join(os.path.abspath(p) for p in lb_costs.split(","))
        load(lb_costs)  # a missing or malformed profile: one line, exit 2
    if trace is not None:
        from shoal.files import check_outputs

        check_outputs({"--trace": trace})  # before the run, not after it
    if restart is not None:
        from shoal.runtime.shards import read_manifest

        read_manifest(restart, verify=True)  # a damaged checkpoint: one line, exit 2
    period = None if lb_period is None else parse_duration(lb_period, "--lb-period")
    power = _power_settings(power_threshold, power_room, power_every, power_spread,
                            power_monitor)
    seconds = None if every is None else parse_duration(every, "--checkpoint-every")
    live = None if live_period is None else parse_duration(live_period, "--live-period")
    failures_apart = None if mtbf is None else parse_duration(mtbf, "--mtbf")
    if failures_apart is not None and seconds is None:
        from shoal.errors import UsageError

        raise UsageError("--mtbf needs --checkpoint-every (the first period)")
    from shoal.options import parse_tune

    parse_tune(tune)  # a misspelt point: one line, exit 2
    for flag, value in (("--lb-period", period), ("--checkpoint-every", seconds),
                        ("--mtbf", failures_apart)):
        if value is not None and value <= 0:
            from shoal.errors import UsageError

            raise UsageError(f"{flag} must be longer than 0 s")
    env = {**os.environ, **environment(
        lb=strategy, lb_auto=lb_auto, lb_machine=lb_machine, lb_costs=lb_costs,
        lb_period=period, tune=tune, mtbf=failures_apart,
        lb_dump=lb_dump, trace=trace, live_period=live, restart=restart,
        checkpoint_every=seconds,
        checkpoint_dir=checkpoint_dir, **power)}
    if ft:
        from shoal.launch import ft_environment

        env.update(ft_environment())
    from shoal.supervise import parse_kill, supervise

    failures = [parse_kill(k, nprocs) for k in kills]
    from shoal.jobdir import RESIZE_DIR

    resize_dir = None if checkpoint_dir is None else os.path.join(
        os.path.abspath(checkpoint_dir), RESIZE_DIR)
    sys.exit(supervise(nprocs, [program, *args], env, restarts=restarts, shrink=shrink,
                       kills=failures, timeout=limit, jobdir=jobdir, resize_dir=resize_dir))


def _power_settings(threshold: str | None, room: str | None, every: str | None,
                    spread: float | None, monitor: bool) -> dict:
    """The emulated power settings of ``shoal run``'s flags, checked here (one line, exit 2)
    rather than by every rank."""
    from shoal.errors import UsageError
    from shoal.units import parse_duration, parse_temperature

    out: dict = {"power_monitor": monitor}
    if threshold is not None:
        out["power_threshold"] = parse_temperature(threshold, "--power-threshold")
    if room is not None:
        out["power_room"] = parse_temperature(room, "--power-room")
    if every is not None:
        out["power_every"] = parse_duration(every, "--power-every")
        if out["power_every"] <= 0:
            raise UsageError("--power-every must be longer than 0 s")
    if spread is not None:
        if spread < 0:
            raise UsageError("--power-spread must be >= 0")
        out["power_spread"] = spread
    return out


def _check_lb(strategy: str | None, machine: str | None, nprocs: int) -> None:
    """A mistake in ``--lb`` or ``--lb-machine`` (an unknown strategy, topo without the
    machine, a torus too small) is said here, not by every rank."""
    if strategy is None and machine is None:
        return  # (the balancers' modules take 0.2-0.4 s to import)
    from shoal.runtime.lb.machine import Machine
    from shoal.runtime.lb.strategies import LBOptions, chain

    torus = None if machine is None else Machine.parse(machine, nprocs)
    if strategy is not None and strategy not in ("auto", "none"):
        chain(strategy, LBOptions(machine=torus))
