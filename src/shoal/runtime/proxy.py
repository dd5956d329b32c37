"""Proxies: how a program names chares it does not hold (seed 002, Section II-D).

``arr[i, j].method(*args)`` sends one message to element (i, j) wherever it lives;
``arr.method(*args)`` broadcasts to every element. Two keyword arguments are the runtime's:
``ret=True`` returns a :class:`~shoal.runtime.futures.Future` of the method's return value,
and ``prio=`` sets the message priority (lower runs first, FIFO among equals). Proxies are
small and picklable, so they travel in messages.
"""

from __future__ import annotations

from shoal.errors import UsageError
from shoal.runtime.context import current


def normalize(index, ndims: int) -> tuple:
    """An element index as a tuple of ``ndims`` ints (``arr[3]`` means ``arr[(3,)]``)."""
    if type(index) is int and ndims == 1:
        return (index,)
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != ndims or not all(isinstance(i, int) for i in index):
        raise UsageError(f"index {index!r} does not name an element of a {ndims}-dimensional "
                         f"collection: give {ndims} integer(s)")
    return index


class Method:
    """A bound entry method of a proxy; calling it sends the message."""

    __slots__ = ("target", "name")

    def __init__(self, target, name: str):
        self.target = target
        self.name = name

    def __call__(self, *args, ret: bool = False, prio: int = 0, **kwargs):
        target = self.target
        if not ret and type(target) is ElementProxy:  # the common case, kept short
            current().invoke(target.cid, target.index, self.name, args, kwargs or None, prio,
                             None)
            return None
        return current().call(target, self.name, args, kwargs or None, ret, prio)

    def __reduce__(self):
        return (Method, (self.target, self.name))

    def __repr__(self) -> str:
        return f"{self.target!r}.{self.name}"


class ElementProxy:
    """One element of an array or group: ``proxy.method(...)`` sends to it."""

    __slots__ = ("cid", "index")

    def __init__(self, cid: int, index: tuple):
        self.cid = cid
        self.index = index

    def __getattr__(self, name: str) -> Method:
        if name.startswith("__"):  # not an entry method: copy, pickle and friends probe these
            raise AttributeError(name)
        return Method(self, name)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ElementProxy) and self.cid == other.cid
                and self.index == other.index)

    def __hash__(self) -> int:
        return hash((self.cid, self.index))

    def __reduce__(self):
        return (ElementProxy, (self.cid, self.index))

    def __repr__(self) -> str:
        return f"ElementProxy({self.cid}, {self.index})"


class CollectionProxy:
    """A chare array or group. Index it for an element; call a method on it to broadcast."""

    __slots__ = ("cid", "ndims")

    def __init__(self, cid: int, ndims: int):
        self.cid = cid
        self.ndims = ndims

    def __getitem__(self, index) -> ElementProxy:
        return ElementProxy(self.cid, normalize(index, self.ndims))

    def __getattr__(self, name: str) -> Method:
        if name.startswith("__"):  # not an entry method: copy, pickle and friends probe these
            raise AttributeError(name)
        return Method(self, name)

    def insert(self, index, args: tuple = (), pe: int | None = None) -> None:
        """Create element ``index`` while the program runs, on ``pe`` (default: its home).
        It joins the reductions that follow the caller's next contribution, or the next
        reduction to complete when the caller is not an element of this array."""
        current().insert(self, normalize(index, self.ndims), tuple(args), pe)

    def delete(self, index) -> None:
        """Delete element ``index``; messages sent to it afterwards are an error."""
        current().delete(self, normalize(index, self.ndims))

    def __eq__(self, other) -> bool:
        return isinstance(other, CollectionProxy) and self.cid == other.cid

    def __hash__(self) -> int:
        return hash(self.cid)

    def __reduce__(self):
        return (CollectionProxy, (self.cid, self.ndims))

    def __repr__(self) -> str:
        return f"CollectionProxy({self.cid})"
