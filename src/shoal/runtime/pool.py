"""A pool of tasks over every PE: ``await shoal.pool.map(f, items, chunksize=)`` and
``await shoal.pool.submit(f, *args, **kwargs)`` (Acun14, II-A and II-B: over-decomposed work that
the runtime places, message-driven; charm4py's ``charm.pool``).

A task is a function and its arguments, pickled at the caller (a lambda or a local
function cannot travel: refused there, with the reason), run on some PE, its result pickled
there and sent back to the caller's future. ``map`` cuts ``items`` into chunks of
``chunksize`` and gives the results in the order of ``items``; ``submit`` is one call.

Scheduling is dynamic: PE 0 keeps the chunks that wait, and a PE asks for one whenever it
has no chunk it can run (``POOL_ASK``; at the start every PE counts as asking, so a pool
that is never used costs no message). PE 0 works too, but takes a chunk only when every
other PE has one: while it runs a task it cannot hand out chunks (a task is not
interrupted), so a long task there could leave the others idle. (charm4py keeps its PE 0
for the scheduler alone.) A chunk whose task awaits (a nested ``map`` or
``submit``, any future) stops counting as runnable while it waits, so its PE asks for more
and nested use cannot starve; chunks submitted from deeper in a nest go first (the tasks
others wait for). A task that raises makes the caller's ``await`` raise its exception, with
the remote traceback as its ``__cause__``, as an entry method's exception does
(:mod:`shoal.runtime.failure`); so does a result that cannot be pickled. A task may be a
plain function or an ``async def`` (which may ``await``).
"""

from __future__ import annotations

import heapq
import pickle
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime.context import current
from shoal.runtime.failure import Failure
from shoal.runtime.futures import Future, Task
from shoal.runtime.protocol import POOL_ASK, POOL_SUBMIT, POOL_TASK

if TYPE_CHECKING:
    from shoal.runtime.pe import Runtime


class TaskFuture:
    """``await`` it for the result of a task (or the exception of its failure)."""

    __slots__ = ("futs",)

    def __init__(self, futs: list[Future]):
        self.futs = futs  # one per chunk, in order

    def __await__(self) -> Generator[Future, Any, Any]:
        out: list[Any] = []
        for fut in self.futs:
            ok, value = yield from fut.__await__()
            if not ok:
                raise value.exception()
            out.extend(pickle.loads(value))
        return out

    def __repr__(self) -> str:
        done = sum(1 for f in self.futs if f.done)
        return f"TaskFuture({done}/{len(self.futs)} chunks done)"


class _Submitted(TaskFuture):
    """A ``submit``: the one result itself."""

    __slots__ = ()

    def __await__(self) -> Generator[Future, Any, Any]:
        out = yield from super().__await__()
        return out[0]


class PoolAPI:
    """``shoal.pool``: the task pool of the running job."""

    def map(self, f: Callable[[Any], Any], items: Iterable[Any],
            chunksize: int = 1) -> TaskFuture:
        """``await shoal.pool.map(f, items, chunksize=1)``: ``[f(x) for x in items]``,
        computed over every PE ``chunksize`` items at a time, in the order of ``items``."""
        if not (isinstance(chunksize, int) and chunksize >= 1):
            raise UsageError(f"chunksize must be a whole number >= 1, not {chunksize!r}")
        pool = current().pool
        items = list(items)
        return TaskFuture([pool.submit(f, items[k:k + chunksize], False)
                           for k in range(0, len(items), chunksize)])

    def submit(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> TaskFuture:
        """``shoal.pool.submit(f, *args, **kwargs)``: ``f(*args, **kwargs)`` on some PE;
        ``await`` the result."""
        return _Submitted([current().pool.submit(f, [(args, kwargs)], True)])


pool = PoolAPI()


class Pool:
    """The pool manager of one PE: a worker on every PE, the queue of chunks at PE 0."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.depth = 0  # nesting of the task running now (0: not a pool task)
        self.running = 0  # chunks here that run or are runnable (not awaiting)
        self.asked = True  # PE 0 counts this PE as asking for a chunk
        # PE 0: the chunks that wait, by (-depth, arrival), and the PEs that asked
        self.waiting: list[tuple[int, int, tuple]] = []
        self.arrivals = 0
        self.hungry: deque[int] | None = None  # the other PEs that asked (all, at first)
        self.root_hungry = True  # and PE 0 itself

    def submit(self, f: Callable[..., Any], items: list[Any], star: bool) -> Future:
        """Send one chunk to PE 0; a future of ``(ok, pickled results or the error)``."""
        rt = self.rt
        if not callable(f):
            raise UsageError(f"the pool runs functions, not {f!r}")
        try:
            payload = pickle.dumps((f, items, star), pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise UsageError(f"the pool cannot send {_name(f)} or its arguments to another "
                             f"PE: {exc} (define the function at module level: a lambda or "
                             "a local function cannot be pickled)") from None
        fut = rt.future()
        rt.send(0, (POOL_SUBMIT, self.depth, payload, fut))
        return fut

    # ----------------------------------------------------------------- PE 0
    def on_submit(self, env: tuple) -> None:
        _, depth, payload, fut = env
        self.arrivals += 1
        heapq.heappush(self.waiting, (-depth, self.arrivals, (depth, payload, fut)))
        self._dispatch()

    def on_ask(self, env: tuple) -> None:
        if env[1] == 0:
            self.root_hungry = True
        else:
            self._hungry().append(env[1])
        self._dispatch()

    def _hungry(self) -> deque[int]:
        if self.hungry is None:
            self.hungry = deque(range(1, self.rt.npes))
        return self.hungry

    def _dispatch(self) -> None:
        """Hand out waiting chunks: to the other PEs that asked, to PE 0 last."""
        hungry = self._hungry()
        while self.waiting and (hungry or self.root_hungry):
            if hungry:
                pe = hungry.popleft()
            else:
                pe, self.root_hungry = 0, False
            self.rt.send(pe, (POOL_TASK, heapq.heappop(self.waiting)[2]))

    # ----------------------------------------------------------------- every PE
    def on_task(self, env: tuple) -> None:
        job = env[1]
        self.asked = False
        self.running += 1
        rt = self.rt
        rt.push(0, rt.run_task, Task(self._run(job), None, job[2], "pool task"), None)

    async def _run(self, job: tuple) -> tuple[bool, Any]:
        """One chunk: ``(True, pickled results)`` or ``(False, the failure's text)``."""
        depth, payload, _ = job
        saved = self.depth
        f: Any = None
        try:
            f, items, star = pickle.loads(payload)
            out = []
            for x in items:
                self.depth = depth + 1
                try:
                    r = f(*x[0], **x[1]) if star else f(x)
                finally:
                    self.depth = saved
                if isinstance(r, Coroutine):
                    r = await _Tracked(self, r, depth + 1)
                out.append(r)
            result: tuple[bool, Any] = (True, pickle.dumps(out, pickle.HIGHEST_PROTOCOL))
        except Exception as exc:
            result = (False, Failure.of(exc, f"PE {self.rt.pe}, pool task {_name(f)}"))
        self.running -= 1
        self._ask()
        return result

    def blocked(self) -> None:
        """A chunk here awaits: it is not runnable until its future resolves."""
        self.running -= 1
        self._ask()

    def _ask(self) -> None:
        if self.running == 0 and not self.asked:
            self.asked = True
            self.rt.send(0, (POOL_ASK, self.rt.pe))


class _Tracked:
    """Await a task's coroutine while telling the pool when it waits (its PE may take
    more work meanwhile) and which nesting depth its submissions have."""

    __slots__ = ("coro", "depth", "pool")

    def __init__(self, pool: Pool, coro: Coroutine[Any, Any, Any], depth: int):
        self.pool = pool
        self.coro = coro
        self.depth = depth

    def __await__(self) -> Generator[Any, Any, Any]:
        pool = self.pool
        value = None
        while True:
            saved, pool.depth = pool.depth, self.depth
            try:
                fut = self.coro.send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                pool.depth = saved
            pool.blocked()
            value = yield fut
            pool.running += 1


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or repr(f)
