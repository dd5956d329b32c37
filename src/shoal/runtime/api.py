"""The functions a shoal program calls (Acun14, Section II-D; Section III-G for library
mode). Every rank runs ``shoal.start(main)``; ``main`` runs on PE 0 and the others serve.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.jobdir import JobDir
from shoal.options import Options
from shoal.rank import abort_job
from shoal.runtime.checkpoint import Pending
from shoal.runtime.context import current as _current
from shoal.runtime.control import ControlPoint
from shoal.runtime.control import point as make_point
from shoal.runtime.futures import Future
from shoal.runtime.pe import Runtime
from shoal.runtime.proxy import CollectionProxy, ElementProxy, SectionProxy
from shoal.runtime.startup import arm, handshake, ran
from shoal.threads import limit as limit_threads

if TYPE_CHECKING:
    from mpi4py import MPI

    from shoal.runtime.chare import Chare
    from shoal.runtime.maps import ArrayMap

arm()  # under shoal run: a rank that ends before shoal.start ends the job (runtime.startup)



def current() -> Runtime:
    """The running runtime, as the API sees it: the whole core, managers included (the
    rest of the runtime sees the :class:`~shoal.runtime.interfaces.Core` it satisfies)."""
    rt = _current()
    assert isinstance(rt, Runtime)
    return rt

def start(main: Callable[..., Any], *args: Any, comm: MPI.Intracomm | None = None,
          restart: str | os.PathLike[str] | None = None, **options: Any) -> None:
    """Run the runtime on every rank of ``comm`` (default MPI_COMM_WORLD) until
    :func:`exit` or until ``main`` returns; ``main(*args)`` runs on PE 0, as a coroutine if
    it is an ``async def``. ``options`` are the runtime's settings
    (:data:`shoal.options.SETTINGS`: ``lb``, ``lb_period``, ``lb_dump``, ``lb_auto``,
    ``lb_machine``, ``lb_costs``, ``tune``, ``trace``, ``checkpoint_every``,
    ``checkpoint_dir``, ``mtbf``, ``ft``, ``cpu_stats``, ``live_period``, ``poll_spin``,
    ``poll_max``, ``shm_bytes``, ``pool_bytes``); those not
    passed come from their environment variables (``SHOAL_LB``, ``SHOAL_TRACE``, ...,
    which ``shoal run --lb`` and friends set); under ``shoal run`` the automatic
    checkpoints go to the job directory's ``auto/`` by default. In library mode, pass the
    communicator of the ranks that take part: control returns when the runtime exits.
    ``restart``: a checkpoint directory (:func:`checkpoint`; default ``$SHOAL_RESTART``,
    which ``shoal run --restart`` sets) to start from, on any number of PEs; ``main`` runs
    again and finds the saved state in :func:`restored`. A missing, partial or
    version-mismatched checkpoint raises :class:`~shoal.errors.CheckpointError` here."""
    from shoal.rank import arm_kills, refuse_singleton

    refuse_singleton()  # srun without the MPI plugin: N jobs of one rank each
    from mpi4py import MPI

    from shoal.runtime.shards import read_manifest

    home = JobDir.of_rank()
    if restart is not None:
        options["restart"] = os.fspath(restart)
    opts = Options.build(options, auto_dir=None if home is None else str(home.auto))
    if opts.checkpoint.restart is not None:
        read_manifest(opts.checkpoint.restart)  # refused on every rank before the start
    if comm is None:
        comm = MPI.COMM_WORLD
        if home is not None:
            home.note_pe(comm.Get_rank())  # shoal run names it if it is killed
        handshake(comm, home)  # every rank is here, or the job ends (runtime.startup)
    else:
        ran()
    if not opts.checkpoint.ft:
        rt = _runtime(comm, opts)
        limit_threads(rt.nodes, rt.pe)  # BLAS/OpenMP: the node's cores shared by its PEs
        arm_kills(rt.pe)  # shoal run --kill: a failure injected into this PE
        rt.run(main, *args)
    else:
        rt = _run_tolerant(comm, main, args, opts)
    if rt.resized:  # shoal run relaunches the program at the new size: this process ends
        sys.exit(0)


def _runtime(comm: MPI.Intracomm, opts: Options) -> Runtime:
    """This rank's PE. A failure on some ranks only (the root loads the balancing strategy,
    which may refuse its options; the others only check its name) ends the job with that
    rank's traceback: the others would wait for it until the job's timeout."""
    try:
        return Runtime(comm, opts)
    except Exception as exc:
        if comm.Get_size() == 1:
            raise
        abort_job(comm, f"shoal: PE {comm.Get_rank()} (starting): "
                        f"{''.join(traceback.format_exception(exc))}", 1)
        raise  # (abort_job does not return)


def _run_tolerant(comm: MPI.Intracomm, main: Callable[..., Any], args: tuple,
                  opts: Options) -> Runtime:
    """``ft=True``: run; when a PE dies, recover on the survivors from the last in-memory
    checkpoint and run again (:mod:`shoal.runtime.recovery`), as often as it happens."""
    from mpi4py import MPI

    from shoal.rank import arm_kills
    from shoal.runtime.recovery import PeFailureError, recover, starting_failed

    comm.Set_errhandler(MPI.ERRORS_RETURN)
    first = True
    failed: str | None = None  # the failure recovered from, for the live events
    while True:
        try:
            rt = Runtime(comm, opts)
        except Exception as exc:
            starting_failed(exc)
            raise
        if first:
            limit_threads(rt.nodes, rt.pe)
            arm_kills(rt.pe)
            first = False
        if failed is not None:
            rt.publisher.pending.append(("failure", {"pe": None, "detail": failed}))
            rt.publisher.pending.append(("restart", {"pe": None, "detail": "recovered in "
                                         f"the job on {rt.npes} PE(s)"}))
        try:
            rt.run(main, *args)
            return rt
        except PeFailureError as exc:
            rt.publisher.abandon()
            failed = str(exc)
            comm, restart = recover(comm, rt)
            opts = replace(opts, checkpoint=replace(opts.checkpoint, restart=restart))
            comm.Set_errhandler(MPI.ERRORS_RETURN)


def exit() -> None:
    """End the job on every PE."""
    current().exit()


def Array(cls: type[Chare], dims: int | tuple[int, ...] | list[int] | None = None,  # noqa: N802
          *, ndims: int | None = None, args: Iterable[Any] = (),
          map: ArrayMap | None = None, at_sync: bool = False) -> CollectionProxy:
    """Create a chare array of ``cls`` on every PE: dense with ``dims`` (1 to 6 of them;
    element ``i`` starts on its home PE given by ``map``, default ``"block"``), or empty
    with ``ndims`` and filled by ``insert``. Each element is built with ``cls(*args)``.
    A function ``map(index, dims, npes) -> pe`` places every element, inserted ones too
    (``dims`` is None for an array filled by insertion, whose elements are otherwise placed
    by a hash of their index); see :mod:`shoal.runtime.maps`. ``at_sync=True``: the
    elements call ``self.at_sync()`` at the end of an iteration and the load balancer moves
    them while they wait (then calls ``resume_from_sync()`` on each)."""
    return current().location.create("array", cls, dims, ndims, tuple(args), map,
                                      bool(at_sync))


def Group(cls: type[Chare], *, args: Iterable[Any] = (),  # noqa: N802
          pes: Iterable[int] | None = None, onPEs: Iterable[int] | None = None,  # noqa: N803
          ) -> CollectionProxy:
    """Create one ``cls(*args)`` per PE; member ``p`` is ``group[p]`` and never migrates.
    ``pes=[...]`` (charm4py's ``onPEs``): members on those PEs only; ``group[p]`` of
    another PE is an error, broadcasts, reductions and ``ret=True`` gathers count the
    members only, and a section key selects among them (``group[::2]``: the members on even
    PEs). A checkpoint of such a group restarts on any number of PEs that still has every
    one of its PEs, and is refused on fewer."""
    rt = current()
    if onPEs is not None:
        if pes is not None:
            raise UsageError("give pes= or charm4py's onPEs=, not both")
        pes = onPEs
    return rt.location.create("group", cls, (rt.npes,), None, tuple(args), "block",
                              pes=None if pes is None else group_pes(pes, rt.npes))


def group_pes(pes: Iterable[int], npes: int) -> tuple[int, ...]:
    """The PEs of ``Group(cls, pes=...)``, checked and sorted."""
    if isinstance(pes, (str, bytes)) or not isinstance(pes, Iterable):
        raise UsageError(f"pes= takes a list of PE numbers, not {pes!r}")
    out = list(pes)
    if not out:
        raise UsageError("pes=[] names no PE: give at least one PE in [0, "
                         f"{npes}), or leave pes out for a member on every PE")
    for p in out:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < npes:
            raise UsageError(f"pes=: {p!r} is not a PE of this run: every PE must be an int "
                             f"in [0, {npes})")
    if len(set(out)) != len(out):
        twice = sorted({p for p in out if out.count(p) > 1})
        raise UsageError(f"pes= names PE(s) {twice} more than once: a group has one member "
                         "per PE")
    return tuple(sorted(out))


def combine(*proxies: CollectionProxy | SectionProxy) -> SectionProxy:
    """charm4py's ``charm.combine``: one section over every member of the arrays, groups
    and sections given (a section must have been made on this PE). A multicast reaches each
    member once, ``contribute(..., section=sec)`` in every member reduces over all of them,
    ``ret=True`` lists the values collection by collection in the order given (each in
    index order; ``Reducer.gather`` in the same order), ``awaitable=True`` waits for every
    member. Element ``i`` of two collections is two members; an element given twice counts
    once. The classes may differ: the section has the entry methods they all have."""
    return current().sections.combine(proxies)


def create(cls: type[Chare], *, args: Iterable[Any] = (), pe: int | None = None
           ) -> ElementProxy:
    """Create a single chare ``cls(*args)`` on PE ``pe`` (None: the PEs in turn, round
    robin from this one) and return its proxy, at once; the chare is built on its PE
    asynchronously (messages sent to it meanwhile wait for it). It costs one message. It
    migrates like an array element; its ``thisProxy`` is its own proxy and it takes part in
    no reduction."""
    return current().location.single(cls, tuple(args), pe)


def destroy(proxy: CollectionProxy) -> Future:
    """``await shoal.destroy(arr)``: destroy a chare array, group or single chare's
    collection on every PE, freeing its elements and everything the runtime kept for it;
    messages to it still queued or in flight are dropped, and a call to it afterwards is a
    :class:`~shoal.errors.UsageError`. Resolves once every PE has dropped it."""
    return current().location.destroy(proxy)


def future(n: int | None = None) -> Future:
    """A new future owned by this PE: pass it in a message, ``await`` it here. With ``n``,
    it resolves once ``n`` values have been sent to it, to the list of them in the order
    they arrived (``fut.send(v)`` from ``n`` places)."""
    return current().future(n)


def quiescence() -> Future:
    """A future that resolves once no message is in flight or waiting anywhere."""
    return current().quiescence.request()


def sleep(seconds: float) -> Future:
    """``await shoal.sleep(t)``: resume after ``t`` seconds; the PE runs other work meanwhile
    (``time.sleep`` in an entry method would stop the whole PE)."""
    return current().sleep(seconds)


def my_pe() -> int:
    return current().pe


def num_pes() -> int:
    return current().npes


def my_host() -> str:
    """The host this PE runs on (:mod:`shoal.runtime.nodes`)."""
    rt = current()
    return rt.nodes.hosts[rt.pe]


def cluster_nodes(state_dir: str | None = None) -> list[dict[str, Any]]:
    """The nodes this node's gossip daemon knows (``shoal gossip daemon``; one dict per node:
    name, addr, age in s, load, free_mem, cores, jobs, pes, keys, self), [] where none runs.
    Needs no running job."""
    from shoal.gossip.control import cluster as daemon_view

    return daemon_view(state_dir)


def my_node() -> int:
    """The number of this PE's node (nodes are numbered in the order of their first PE)."""
    rt = current()
    return int(rt.nodes.node[rt.pe])


def num_nodes() -> int:
    """How many nodes (hosts) the PEs run on."""
    return current().nodes.count


def stats() -> dict[str, Any]:
    """This PE's instrumentation (see :meth:`shoal.runtime.pe.Runtime.stats`)."""
    return current().stats()


def checkpoint(path: str | os.PathLike[str] | None = None,
               state: dict[str, Any] | None = None, *, memory: bool = False) -> Pending:
    """``await shoal.checkpoint(path, state={...})`` in ``main``: save every array, group
    and single chare and ``state`` (may hold proxies and numpy arrays) to directory
    ``path``, taken at the next quiescence (between iterations: an element with a suspended
    coroutine cannot be saved and refuses the checkpoint). Resolves once the checkpoint is
    complete on disk, to a summary (``path``, ``generation``, ``bytes``, ``elements``,
    ``seconds``); the previous checkpoint in ``path`` stays until then. A second call
    waits for the first. Restart with ``shoal.start(main, restart=path)`` or ``shoal run
    --restart path``, on any number of PEs (see :mod:`shoal.runtime.checkpoint`).
    ``memory=True`` instead of a path: a double in-memory checkpoint (every PE keeps its
    shard and a copy at a buddy PE on another node, :mod:`shoal.runtime.buddy`), which
    ``shoal run --ft`` rolls back to when a PE dies."""
    return current().checkpoints.take(path, state, memory)


def iteration(state: dict[str, Any] | None = None) -> Pending:
    """``await shoal.iteration(state)`` in ``main`` between two iterations: ``state`` (a
    dict like :func:`checkpoint`'s, e.g. the proxies and the iteration number) is what a
    restart from an automatic checkpoint gives :func:`restored`, and when
    ``checkpoint_every`` (``shoal run --checkpoint-every``) has passed since the last
    automatic checkpoint, one is taken here, into ``checkpoint_dir``, and this resolves
    when it is on disk (to its summary; else at once, to None). AtSync programs call it
    once with their state (no need to await): their automatic checkpoints are taken at
    AtSync points (see :mod:`shoal.runtime.checkpoint`). Called every iteration, it also
    marks the iterations whose time the controller of control points measures
    (:func:`control_point`)."""
    rt = current()
    if rt.pe == 0:
        rt.control.mark("iteration")
    return rt.checkpoints.iteration(state)


def control_point(name: str, values: Sequence[Any], default: Any = None,
                  effect: str = "") -> ControlPoint:
    """In ``main``: register a tunable parameter of the program (Acun14 III-E, PICS's
    control points): its candidate ``values`` in order (the controller moves between
    neighbours), the one to start from (``default``, else the first) and its expected
    ``effect`` (text, kept in the history). Read ``point.value`` where the program uses it
    (e.g. at the start of each iteration): the controller changes it to lower the time per
    iteration, measured between :func:`iteration` calls (or AtSync points), explores,
    settles on the best and explores again when the time drifts (see
    :mod:`shoal.runtime.control`)."""
    rt = current()
    if rt.pe != 0:
        raise UsageError("shoal.control_point() is for main (PE 0), where the iterations "
                         "are timed")
    return rt.control.register(make_point(name, values, default, effect))


def control_history() -> dict[str, Any]:
    """On PE 0: the controller's record: ``iterations`` (one row each: its ``seconds``,
    what marked it, and every point's value in force), ``decisions`` (measured, settled,
    drift, young: the point, its value, the seconds per iteration or the checkpoint cost)
    and ``points`` (name -> value in force)."""
    ctl = current().control
    return {"iterations": [dict(r) for r in ctl.history],
            "decisions": [dict(d) for d in ctl.decisions],
            "points": {name: p.value for name, p in ctl.points.items()}}


def restored() -> Any:
    """In ``main``: the ``state`` saved by the checkpoint this run restarted from (its
    proxies live), or None on a fresh start."""
    return current().checkpoints.restored()


def power_history() -> list[dict[str, Any]]:
    """The EMULATED power readings so far (on PE 0, every PE's; empty elsewhere, and when
    neither ``power_threshold`` nor ``power_monitor`` is set), one record per PE and
    interval: ``pe``, ``t`` (seconds since the scheduler started), ``temp`` (°C of the
    emulated thermal model), ``freq`` (the emulated frequency set after the reading),
    ``util`` (the PE's measured utilisation over the interval) and ``slept`` (seconds it has
    duty-cycled in all). See :mod:`shoal.runtime.power`: no real sensor is read."""
    return [dict(r) for r in current().power.history]


def lb_history() -> list[dict[str, Any]]:
    """The load-balancing steps so far (on PE 0; empty elsewhere), one record each:
    ``step``, ``strategy``, ``objects``, max/avg load ``before`` the step, ``after_predicted``
    by the strategy and ``after_measured`` (over the period that followed, filled in at the
    next step), ``migrations``, ``bytes_moved``, ``strategy_time`` and ``total_time``
    (seconds, from the trigger to the last arrival)."""
    return [dict(r) for r in current().balancer.history]
