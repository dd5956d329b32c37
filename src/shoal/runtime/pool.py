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
(:mod:`shoal.runtime.failure`); so does a result that cannot be pickled. A chunk stops at
its first failing task, and the ``await`` raises once every chunk has answered: the
exception of the first failed chunk (in the order of the items), with the failures of the
others attached to it (:func:`_raised`), so that every failure is read and none ends the
job. (Not an ``ExceptionGroup``: Python 3.10 has none, and ``except ValueError`` around a
map would stop catching what a task raised.) A task may be a plain function or an
``async def`` (which may ``await``).
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
    from shoal.runtime.interfaces import Core


class TaskFuture:
    """``await`` it for the results of a map (or of a submit), or for the exception of the
    first failed chunk once every chunk has answered."""

    __slots__ = ("futs", "size")

    def __init__(self, futs: list[Future], size: int):
        self.futs = futs  # one per chunk, in order
        self.size = size  # items per chunk (the last one may hold fewer)

    def __await__(self) -> Generator[Future, Any, Any]:
        answers = []
        for fut in self.futs:
            answers.append((yield from fut.__await__()))
        failed = [(k * self.size, value) for k, (ok, value) in enumerate(answers) if not ok]
        if failed:
            raise _raised(failed)
        return [r for _, value in answers for r in pickle.loads(value)]

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
                           for k in range(0, len(items), chunksize)], chunksize)

    def submit(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> TaskFuture:
        """``shoal.pool.submit(f, *args, **kwargs)``: ``f(*args, **kwargs)`` on some PE;
        ``await`` the result."""
        return _Submitted([current().pool.submit(f, [(args, kwargs)], True)], 1)


pool = PoolAPI()


class Pool:
    """The pool manager of one PE: a worker on every PE, the queue of chunks at PE 0."""

    def __init__(self, rt: Core):
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


def _raised(failed: list[tuple[int, Failure]]) -> BaseException:
    """The one exception a failed map raises (``failed``: the first item of each failed
    chunk and its failure, in order): the first chunk's, with every failure attached, so
    that each one is retrieved (a failure nobody retrieves ends the job, see
    :class:`~shoal.runtime.failure.Failure`). ``exc.pool_failures`` is the list of
    ``(first item of the chunk, exception)`` of every failed chunk, this one first, each
    exception with its remote traceback as ``__cause__``; ``exc.__notes__`` gets a line per
    other failed chunk (Python 3.11 and later print the notes under the traceback)."""
    errors = [(first, failure.exception()) for first, failure in failed]
    exc = errors[0][1]
    setattr(exc, "pool_failures", errors)  # noqa: B010 - an attribute of any exception type
    if len(errors) > 1:
        notes = [f"shoal.pool: the chunk from item {first} raised too: "
                 f"{type(other).__qualname__}: {other}" for first, other in errors[1:]]
        setattr(exc, "__notes__", [*getattr(exc, "__notes__", ()), *notes])  # noqa: B010
    return exc


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or repr(f)
