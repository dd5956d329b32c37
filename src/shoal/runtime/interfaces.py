"""What the parts of one PE see of each other, as ``Protocol`` types.

A manager is typed by what the others use of it, never by its class: a manager's module
imports these protocols, not the module of the part it talks to, so none depends on the
PE core (``pe.py``) for its types and the import graph has no cycle through it
(docs/architecture.md). :class:`Core` is what managers use of the core: ``Runtime``
satisfies it, which mypy checks where the core hands itself to each manager. Each manager
appears in it by the few methods the others call (``Placement``, ``Collectives``, ...);
a call that is not listed here is a new dependency to add here first, on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from shoal.errors import UsageError
    from shoal.runtime.aggregation import Stream
    from shoal.runtime.collection import Collection, Slot
    from shoal.runtime.control import Controller
    from shoal.runtime.futures import Future, Task
    from shoal.runtime.nodes import NodeMap
    from shoal.runtime.point import ConsistentPoint
    from shoal.runtime.proxy import CollectionProxy, SectionProxy
    from shoal.runtime.queue import Queue
    from shoal.runtime.trace import Tracer
    from shoal.runtime.wire.transport import Transport

    Run = Callable[[Any, Any], None]  # what a queue entry calls with its two arguments


class Saving(Protocol):
    """A part with state that lives outside the elements (Charm++'s PUP of a manager,
    Acun14 II-E): it saves its part of its PE's shard record and restores from the records
    of every PE of the checkpoint (``infos``, indexed by old PE; a restart may run on
    another number of PEs)."""

    def saved(self) -> dict[str, Any]: ...

    def restore(self, infos: list[dict[str, Any]]) -> None: ...


class Residents(Protocol):
    """A part that keeps state about the elements of its PE, told by migration (and by a
    restart, which brings elements in the same way) when they come and go
    (:meth:`shoal.runtime.migration.Migration.subscribe`)."""

    def element_left(self, coll: Collection, slot: Slot, dest: int) -> None:
        """``slot`` is packed to leave for PE ``dest``."""

    def elements_left(self, coll: Collection) -> None:
        """The elements of ``coll`` that leave in this batch have all left."""

    def element_joined(self, coll: Collection, slot: Slot) -> None:
        """``slot`` is rebuilt here, before any of its messages runs."""

    def elements_arrived(self, coll: Collection, slots: list[Slot],
                         fetches: list[tuple] | None) -> None:
        """The elements of ``coll`` in this batch have all arrived (the broadcasts they
        lack and this PE has forgotten go into ``fetches``, when it is not None)."""


class Placement(Saving, Protocol):
    """The location manager, as the others use it."""

    def create(self, kind: str, cls: type, dims: Any, ndims: int | None, args: tuple,
               mapping: Any, at_sync: bool = False) -> CollectionProxy: ...

    def forget_links(self) -> None: ...

    def route(self, coll: Collection, env: tuple) -> None: ...

    def insert(self, proxy: CollectionProxy, index: tuple, args: tuple, pe: int | None
               ) -> None: ...

    def delete(self, proxy: CollectionProxy, index: tuple) -> None: ...

    def delete_here(self, slot: Slot) -> None: ...

    @property
    def destroyed(self) -> set[int]: ...

    def gone(self, cid: int) -> UsageError: ...



class Moving(Protocol):
    """The migration manager, as the others use it."""

    def arrive(self, items: list[tuple], step: int = 0, src: int | None = None,
               token: int | None = None) -> None: ...

    def migrate_many(self, moves: Iterable[tuple[Slot, int]], step: int = 0
                     ) -> dict[int, int]: ...

    def move_deferred(self, slot: Slot) -> None: ...

    def move_first(self, slot: Slot, run: Callable[[Slot, tuple], None], env: tuple,
                   prio: int) -> None: ...

    def request(self, slot: Slot, pe: int) -> None: ...

    def subscribe(self, *parts: Residents) -> None: ...


class Reducing(Saving, Protocol):
    """The reduction manager, as the others use it."""

    def add_contribution(self, slot: Slot, value: Any, reducer: Any, target: Any
                         ) -> None: ...

    def element_left(self, coll: Collection, slot: Slot, dest: int | None = None
                     ) -> None: ...

    def elements_left(self, coll: Collection) -> None: ...

    def size_changed(self, coll: Collection) -> None: ...

    def contribute(self, slot: Slot, value: Any, reducer: Any, target: Any) -> None: ...



class Broadcasting(Protocol):
    """The broadcast manager, as the others use it."""

    def catch_up(self, coll: Collection, slot: Slot, fetches: list[tuple] | None
                 ) -> None: ...

    def forget(self, cid: int) -> None: ...

    def pin(self, lows: dict[int, int]) -> int: ...

    def run_bcast(self, slot: Slot, env: tuple) -> None: ...

    def size_changed(self, coll: Collection, last: int, delta: int) -> None: ...

    def replay(self, slot: Slot, envs: list[tuple]) -> None: ...



class Sectioning(Saving, Protocol):
    """The section manager, as the others use it."""

    def root(self, sid: int) -> int: ...

    def multicast(self, proxy: SectionProxy, name: str, args: tuple, kwargs: dict | None,
                  ret: int, prio: int) -> Future | None: ...

    def create(self, proxy: CollectionProxy, members: list[tuple[int, ...]]
               ) -> SectionProxy: ...

    def contribute(self, slot: Slot, section: Any, value: Any, reducer: Any, target: Any
                   ) -> None: ...

    def allreduce(self, slot: Slot, section: Any, value: Any, reducer: Any) -> Future: ...

    def allreduce_result(self, slot: Slot, sid: int, value: Any) -> None: ...



class Quiescing(Protocol):
    """Quiescence detection, as the others use it."""

    def request(self) -> Future: ...

    def settling(self) -> bool: ...


class Balancing(Saving, Protocol):
    """The load balancer, as the others use it."""

    def prepare(self) -> None: ...

    def collection_destroyed(self, cid: int) -> None: ...

    def at_sync(self, slot: Slot) -> None: ...

    def collection_synced(self, cid: int, loads: dict[int, float]) -> None: ...



class Publishing(Protocol):
    """The writer of live data (shoal.runtime.publish), as the others use it: PE 0's
    events."""

    def tick(self, now: float, idle_since: float) -> None: ...

    def event(self, kind: str, **fields: Any) -> None: ...

    def lb_step(self, record: dict[str, Any]) -> None: ...

    def lb_measured(self) -> None: ...


class Powered(Protocol):
    """The emulated power manager (shoal.runtime.power), as the others use it."""

    on: bool

    def speed(self) -> float: ...

    def set_frequency(self, f: float) -> None: ...

    def throttled_seconds(self) -> float: ...

    def own_sleep(self, seconds: float) -> None: ...


class Aggregating(Protocol):
    """The aggregation manager, as the others use it."""

    def stream(self, spec: tuple) -> Stream: ...

    def counts(self) -> tuple[int, int]: ...

    def resize(self, cap: int) -> None: ...


class Guarding(Protocol):
    """Guarded methods and waits, as the others use them."""

    def recheck_later(self, slot: Slot) -> None: ...

    def wait(self, slot: Slot, condition: str) -> Future: ...



class Pooling(Protocol):
    """The task pool, as the others use it."""

    def submit(self, f: Callable[..., Any], items: list[Any], star: bool) -> Future: ...


class Core(Saving, Protocol):
    """What the managers and the user's objects (chares, proxies, futures, channels,
    through :func:`shoal.runtime.context.current`) use of the PE core
    (``shoal.runtime.pe.Runtime``)."""

    pe: int
    npes: int
    colls: dict[int, Collection]
    futures: dict[int, Future]
    early: dict[int, list[tuple]]
    pe_out: dict
    current: Slot | None
    work: tuple[Slot | None, str] | None
    created: int
    processed: int
    direct: bool
    detailed: bool
    instrument: bool
    cpu_stats: bool
    running: bool
    freq: float  # the emulated frequency (shoal.runtime.power)
    probe_at: float
    publish_at: float  # when the next row of live data is due (shoal.runtime.publish)
    net: Transport
    queue: Queue
    nodes: NodeMap
    tracer: Tracer | None
    point: ConsistentPoint
    control: Controller  # control points and their controller (PE 0: runtime.control)
    handlers: tuple  # the handler of each message kind, by kind
    push: Callable[[int, Run, Any, Any], None]
    run_invoke: Callable[[Slot, tuple], None]
    run_task: Callable[[Task, Any], None]

    @property
    def location(self) -> Placement: ...

    @property
    def migration(self) -> Moving: ...

    @property
    def reductions(self) -> Reducing: ...

    @property
    def broadcasts(self) -> Broadcasting: ...

    @property
    def sections(self) -> Sectioning: ...

    @property
    def quiescence(self) -> Quiescing: ...

    @property
    def balancer(self) -> Balancing: ...

    @property
    def aggregation(self) -> Aggregating: ...

    @property
    def power(self) -> Powered: ...

    @property
    def publisher(self) -> Publishing: ...

    @property
    def guards(self) -> Guarding: ...

    @property
    def pool(self) -> Pooling: ...

    def send(self, dest: int, env: tuple, shared: bool = True) -> int: ...

    def after(self, delay: float, fn: Callable[[], None]) -> None: ...

    def future(self, n: int | None = None) -> Future: ...

    def resolve(self, pe: int, fid: int, value: Any) -> None: ...

    def collection(self, cid: int, env: tuple) -> Collection | None: ...

    def invoke(self, dst: tuple[int, tuple], name: str, args: tuple, kwargs: dict | None,
               prio: int, fut: Future | None) -> None: ...

    def call(self, target: object, name: str, args: tuple, kwargs: dict | None, ret: int,
             prio: int) -> Future | None: ...

    def accept(self, slot: Slot, env: tuple) -> None: ...

    def on_invoke(self, env: tuple) -> None: ...

    def enter(self, slot: Slot | None, what: str) -> tuple: ...

    def leave(self, saved: tuple) -> None: ...

    def exit(self, resize: bool = False) -> None: ...

    def idle_seconds(self) -> float: ...

    def slept_seconds(self) -> float: ...

    def _run_invoke(self, slot: Slot, env: tuple) -> None: ...

    def _resume(self, task: Task, value: Any) -> None: ...

    def _after(self, slot: Slot) -> None: ...

    def _account(self, slot: Slot, name: str, calls: int, t0: float, c0: float) -> None: ...
