"""Exceptions that reach the caller (Acun14, II-B: a future carries an entry method's
result, and a failure is a result too).

An exception in an entry method called with ``ret=True`` (or in a broadcast with ``ret=True``
or ``awaitable=True``) does not end the job: it travels to the caller's future as a
:class:`Failure`, and ``await fut`` raises it there, with the remote traceback attached as
its ``__cause__`` (a :class:`RemoteTraceback`, printed first, as Python prints a chained
exception). An exception that cannot travel (does not pickle, or does not unpickle as it
was) arrives as a :class:`RemoteError` with its type, message and traceback.

Only an exception nobody waits for ends the job: one in a call without a future, and one
whose future is dropped without being awaited (the job ends when the future is freed, with
the PE, the element and the traceback, as for an exception in a plain call).
"""

from __future__ import annotations

import pickle
import sys
import traceback
from collections.abc import Callable
from typing import Any

from shoal.rank import abort_job
from shoal.runtime.context import _Process


class RemoteTraceback(Exception):  # noqa: N818 - the name says what it holds
    """The traceback of an exception raised on another PE (or by another element): the
    ``__cause__`` of the exception that ``await`` raises."""


class RemoteError(Exception):
    """Stands for an exception raised by an entry method that could not travel to the
    caller as it was (it does not pickle): its type and message."""


class Failure:
    """An entry method's exception on its way to the future of its caller: the exception
    (or a :class:`RemoteError`), where it was raised and its traceback text."""

    __slots__ = ("error", "retrieved", "text", "where")

    def __init__(self, error: BaseException, where: str, text: str):
        self.error = error
        self.where = where  # "PE 2, Cell[3].step"
        self.text = text
        self.retrieved = False  # raised where awaited, sent on, or folded into a gather

    @classmethod
    def of(cls, exc: BaseException, where: str) -> Failure:
        """The failure of ``exc``, raised at ``where``; an exception that does not survive
        a pickle round trip is replaced by a :class:`RemoteError` (checked on one PE too,
        so that a program behaves the same on any number of PEs)."""
        text = "".join(traceback.format_exception(exc))
        try:
            pickle.loads(pickle.dumps(exc))
            error = exc
        except Exception:
            error = RemoteError(f"{type(exc).__qualname__}: {exc}")
        error.__traceback__ = None  # its frames stay here: the text is the traceback
        error.__context__ = None
        return cls(error, where, text)

    def exception(self) -> BaseException:
        """The exception to raise where the future is awaited."""
        self.retrieved = True
        error = self.error
        error.__cause__ = RemoteTraceback(f"{self.where} raised:\n{self.text}")
        return error

    def __reduce__(self) -> tuple[Callable[..., Failure], tuple[Any, ...]]:
        self.retrieved = True  # the copy that arrives is the one that must be awaited
        return (Failure, (self.error, self.where, self.text))

    def __del__(self) -> None:
        if self.retrieved:
            return
        rt = _Process.runtime
        text = (f"shoal: {self.where}: {self.text}(its caller dropped the future without "
                "awaiting it)\n")
        if rt is None:
            sys.stderr.write(text)
            sys.stderr.flush()
        else:
            abort_job(rt.net.comm, text, 1)


class Excepted(list):
    """The values of a gather called with ``return_exceptions=True``, failures in place:
    awaiting its future gives a plain list with each failure's exception (its remote
    traceback as ``__cause__``) where the element's return value would be."""

    __slots__ = ()

    def exceptions(self) -> list[Any]:
        return [v.exception() if type(v) is Failure else v for v in self]


def listed(values: dict[Any, Any], order: list[Any]) -> Excepted:
    """A gather's ``values`` (key -> return value or failure) in ``order``, failures kept:
    none of them ends the job (the caller receives them)."""
    out = Excepted(values[k] for k in order)
    for v in out:
        if type(v) is Failure:
            v.retrieved = True
    return out


def gathered(values: dict[Any, Any], what: str = "broadcast") -> Failure | None:
    """The failure of a broadcast's gather (``values``: element index -> return value; a
    section's multicast: ``what``): that of the lowest index that failed, its traceback
    followed by the indices of the others; None if none failed."""
    failed = sorted(i for i, v in values.items() if type(v) is Failure)
    if not failed:
        return None
    for i in failed:
        values[i].retrieved = True
    first: Failure = values[failed[0]]
    text = first.text
    if len(failed) > 1:
        others = ", ".join(str(list(i)) for i in failed[1:6])
        more = f" and {len(failed) - 6} more" if len(failed) > 6 else ""
        text += (f"({len(failed) - 1} other element(s) of the {what} raised too: "
                 f"{others}{more})\n")
    return Failure(first.error, first.where, text)
