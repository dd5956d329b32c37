"""Proxies: how a program names chares it does not hold (Acun14, Section II-D).

``arr[i, j].method(*args)`` sends one message to element (i, j) wherever it lives;
``arr.method(*args)`` broadcasts to every element. Three keyword arguments are the runtime's:
``ret=True`` returns a :class:`~shoal.runtime.futures.Future` of the method's return value
(of a broadcast: the list of every element's return value, in index order);
``awaitable=True`` a future that resolves (to None) once the method has run on every element
of a broadcast or a section's multicast (on one element it is ``ret=True``); both raise where
awaited the exception an element raised (of many elements: the lowest index's,
:mod:`shoal.runtime.failure`); ``ret=True, return_exceptions=True`` on a broadcast or a
multicast gives the list with each failing element's exception in its place instead (as
``asyncio.gather`` and charm4py do); and ``prio=`` sets the message priority
(lower runs first, FIFO among equals). Proxies are small and
picklable, so they travel in messages; ``proxy.method`` (not called) is a
picklable target for reductions.

``arr[0:8, ::2]`` (slices, as numpy indexes the grid of indices) and ``arr.section(indices)``
(an explicit list) make a :class:`SectionProxy`: a proxy of those elements, whose method
calls reach each of them once (:mod:`shoal.runtime.collectives.section`).

Every chare class gets its own pair of proxy classes (:func:`proxy_classes`) with one real
method per entry method, the public methods of the class. A send is then an ordinary method
call: a name the class does not define fails at the sender, and the call costs about a
third of a generic ``__getattr__`` proxy's, which is most of the runtime's per-message cost
after a large message has run the caches cold.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, cast

from shoal.errors import UsageError
from shoal.runtime.context import _Process, current
from shoal.runtime.protocol import RET_DONE, RET_LIST, RET_VALUES
from shoal.runtime.selection import is_section_key, select

if TYPE_CHECKING:
    from shoal.runtime.chare import Chare
    from shoal.runtime.futures import Future
    from shoal.runtime.interfaces import Core

_PROXY_ATTRS = {"cid", "index", "ndims", "insert", "delete", "section", "sid"}


def normalize(index: int | tuple[int, ...], ndims: int) -> tuple[int, ...]:
    """An element index as a tuple of ``ndims`` ints (``arr[3]`` means ``arr[(3,)]``)."""
    if type(index) is int and ndims == 1:
        return (index,)
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != ndims or not all(isinstance(i, int) for i in index):
        raise UsageError(f"index {index!r} does not name an element of a {ndims}-dimensional "
                         f"collection: give {ndims} integer(s)")
    return index


class ElementProxy:
    """One element of an array or group: ``proxy.method(...)`` sends to it."""

    __slots__ = ("_dst", "cid", "index")
    _chare: ClassVar[type[Chare] | None] = None  # the chare class, in each class's own subclass

    def __init__(self, cid: int, index: tuple[int, ...]):
        self.cid = cid
        self.index = index
        self._dst = (cid, index)  # both, for a send: one read

    # No __getattr__ at run time (a misspelt method is Python's AttributeError, which names
    # the proxy class and the name): a class with one has every attribute read go through
    # its hook, which Python 3.11 does not specialize, about 300 instructions a read
    # (``self.thisProxy[0].take(k)`` in an element: 9,129 -> 7,973,
    # benchmarks/runtime_instructions.py's ``index``)
    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...  # (entry methods are made at run time)

    def __getitem__(self, index: Any) -> ElementProxy:
        """charm4py's ``self.thisProxy[self.thisIndex]`` in a single chare (``shoal.create``),
        whose ``thisProxy`` is its own element proxy: its own index names itself. Any other
        index, or indexing an element of an array or group, is an error."""
        coll = current().colls.get(self.cid)
        if coll is None or not coll.single:
            raise UsageError(f"{self!r} names one element and cannot be indexed: index the "
                             "proxy of its array or group (arr[i])")
        if index != self.index:
            raise UsageError(f"{self!r} is the proxy of a single chare (shoal.create): its "
                             f"only index is its own, {self.index} (self.thisIndex), not "
                             f"{index!r}")
        return self

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ElementProxy) and self.cid == other.cid
                and self.index == other.index)

    def __hash__(self) -> int:
        return hash((self.cid, self.index))

    def __reduce__(self) -> tuple[Callable[..., ElementProxy], tuple[Any, ...]]:
        return (_rebuild_element, (self._chare, self.cid, self.index))

    def __repr__(self) -> str:  # the class is named f"{chare.__name__}ElementProxy"
        return f"{type(self).__name__}({self.cid}, {self.index})"


MADE = 1024  # element proxies a collection proxy keeps for its 1-D indices (then it forgets them)


class CollectionProxy:
    """A chare array or group. Index it for an element; call a method on it to broadcast.

    ``dims``: the shape of a dense array or group (None for an array filled by insertion).
    An index outside it is an error here, where the element proxy is made (a message to it
    would wait forever at a home that has no such element), unless this PE has seen an
    element inserted outside the shape (:meth:`Collection.grown`)."""

    __slots__ = ("_short", "cid", "dims", "ndims", "pes")
    _chare: ClassVar[type[Chare] | None] = None
    # the element proxy class of the same chare class
    _element: ClassVar[type[ElementProxy]] = ElementProxy

    def __init__(self, cid: int, ndims: int, dims: tuple[int, ...] | None = None,
                 pes: tuple[int, ...] | None = None):
        self.cid = cid
        self.ndims = ndims
        self.dims = dims
        self.pes = pes  # a group on some PEs only: its members' PEs (else None)
        # ints in [0, bound) take the short path: the extent of a dense 1-D array, any
        # such int for a sparse one, none with more dimensions (nor for a group on some
        # PEs: its indices are checked against them). What indexing reads, in one slot
        bound = (-1 if ndims != 1 or pes is not None else sys.maxsize if dims is None
                 else dims[0])
        # and the element proxies made, by index (an int, or a tuple of ints; the same
        # proxy for the same index: making one was 3,500 instructions, a lookup 100), at
        # most MADE
        made: dict[int | tuple[int, ...], ElementProxy] = {}
        self._short = (bound, self._element, cid, ndims, dims, pes, made)

    def __getitem__(self, index: Any) -> Any:  # an ElementProxy, or a SectionProxy
        bound, _, _, _, _, _, made = self._short
        if type(index) is int and 0 <= index < bound:
            return made.get(index) or self._make(index)
        if type(index) is tuple and _ints(index):  # (only then a key: equal is not the same)
            return made.get(index) or self._lookup(index, True)
        return self._lookup(index, False)

    def _lookup(self, index: Any, keep: bool) -> Any:
        """:meth:`__getitem__` of an index off the short path: checked, and kept if
        ``keep`` (a tuple of ints) and it names an element inside the shape."""
        _, element, cid, ndims, dims, pes, _ = self._short
        try:
            index = normalize(index, ndims)
        except UsageError:
            if type(index) is list:
                raise UsageError(f"arr[{index!r}]: a list of indices makes a section with "
                                 "arr.section([...])") from None
            if not is_section_key(index):
                raise
            return self._section(self._members(select(index, ndims, dims), index))
        if dims is not None:  # (by position: zip(..., strict=True) cost 3,000 instructions)
            k = 0
            for i in index:
                if not 0 <= i < dims[k]:
                    return element(cid, _outside(self, index))
                k += 1
            if pes is not None and index[0] not in pes:
                name = self._chare.__name__ if self._chare is not None else "the group"
                raise UsageError(f"{name}: the group has no member on PE {index[0]} (its "
                                 f"members are on PEs {list(pes)}, Group(..., pes=))")
        return self._make(index) if keep else element(cid, index)

    def _make(self, index: int | tuple[int, ...]) -> ElementProxy:
        """The element proxy of a checked ``index`` (an int of the short path, or a
        tuple of ints), made and kept (``_short``)."""
        _, element, cid, _, _, _, made = self._short
        if len(made) >= MADE:
            made.clear()
        proxy = made[index] = element(cid, (index,) if isinstance(index, int) else index)
        return proxy

    def _members(self, chosen: list[tuple[int, ...]], key: Any) -> list[tuple[int, ...]]:
        """What a section key selects, among the members of a group on some PEs."""
        if self.pes is None:
            return chosen
        pes = set(self.pes)
        kept = [index for index in chosen if index[0] in pes]
        if not kept:
            raise UsageError(f"the section {key!r} selects no member of the group, whose "
                             f"members are on PEs {list(self.pes)}")
        return kept

    if TYPE_CHECKING:  # (none at run time: see ElementProxy)
        def __getattr__(self, name: str) -> Any: ...  # (entry methods are made at run time)

    def insert(self, index: int | tuple[int, ...], args: Iterable[Any] = (),
               pe: int | None = None) -> None:
        """Create element ``index`` while the program runs, on ``pe`` (default: its home).
        It joins the reductions that follow the caller's next contribution, or the next
        reduction to complete when the caller is not an element of this array."""
        current().location.insert(self, normalize(index, self.ndims), tuple(args), pe)

    def section(self, indices: Iterable[int | tuple[int, ...]]) -> SectionProxy:
        """A section of the elements named in ``indices`` (each as ``arr[i]`` takes it;
        named twice counts once): ``sec.method(...)`` reaches each of them once, and
        ``contribute(..., section=sec)`` reduces over them. Make it once and keep it: each
        section registers a spanning tree on the PEs that hold its members."""
        chosen = set()
        for i in indices:
            element = self[i]
            if not isinstance(element, ElementProxy):
                raise UsageError(f"section(): {i!r} names more than one element; give one "
                                 "index per element (or a slice key: arr[0:8, ::2])")
            chosen.add(element.index)
        if not chosen:
            raise UsageError("section(): give at least one index")
        return self._section(sorted(chosen))

    def _section(self, members: list[tuple[int, ...]]) -> SectionProxy:
        return current().sections.create(self, members)

    def delete(self, index: int | tuple[int, ...]) -> None:
        """Delete element ``index``; messages sent to it afterwards are an error, and
        broadcasts that reach it with its deletion are dropped."""
        current().location.delete(self, normalize(index, self.ndims))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CollectionProxy) and self.cid == other.cid

    def __hash__(self) -> int:
        return hash(self.cid)

    def __reduce__(self) -> tuple[Callable[..., CollectionProxy], tuple[Any, ...]]:
        if self.pes is not None:
            return (_rebuild_collection, (self._chare, self.cid, self.ndims, self.dims,
                                          self.pes))
        return (_rebuild_collection, (self._chare, self.cid, self.ndims, self.dims))

    def __repr__(self) -> str:  # the class is named f"{chare.__name__}Proxy"
        return f"{type(self).__name__}({self.cid})"


class SectionProxy:
    """Some elements of one array or group, fixed when the section is made
    (``arr[0:8, ::2]``, ``arr.section([...])``): ``sec.method(...)`` multicasts to each of
    them once (``ret=True``: the list of their return values in index order), ``len(sec)``
    is how many there are, and ``self.contribute(x, reducer, target, section=sec)`` in
    every member reduces over them."""

    __slots__ = ("_size", "cid", "cids", "sid")
    _chare: ClassVar[type[Chare] | None] = None
    # the chare classes of a combined section's collections (shoal.combine), else ()
    _chares: ClassVar[tuple[type[Chare], ...]] = ()

    def __init__(self, cid: int, sid: int, size: int, cids: tuple[int, ...] | None = None):
        self.cid = cid  # its (first) collection
        self.cids = (cid,) if cids is None else cids  # every collection it has members of
        self.sid = sid
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getattr__(self, name: str) -> Any:  # Any: entry methods are made at run time
        if self._chares and not name.startswith("__"):
            lack = [c.__name__ for c in self._chares if not hasattr(c, name)]
            raise AttributeError(f"the combined section's classes {', '.join(lack)} have no "
                                 f"entry method {name!r} (a combined section has the entry "
                                 "methods its classes all have)")
        raise AttributeError(_missing(self._chare, name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SectionProxy) and self.sid == other.sid

    def __hash__(self) -> int:
        return hash(("section", self.sid))

    def __reduce__(self) -> tuple[Callable[..., SectionProxy], tuple[Any, ...]]:
        if len(self.cids) > 1:
            return (_rebuild_section, (self._chares or self._chare, self.cid, self.sid,
                                       self._size, self.cids))
        return (_rebuild_section, (self._chare, self.cid, self.sid, self._size))

    def __repr__(self) -> str:  # the class is named f"{chare.__name__}SectionProxy"
        return f"{type(self).__name__}({self.cid}, section {self.sid}, {self._size} elements)"


def _outside(proxy: CollectionProxy, index: tuple[int, ...]) -> tuple[int, ...]:
    """``index`` lies outside the shape of ``proxy``'s dense array: an error, unless this
    PE knows that elements were inserted outside the shape (or holds that element)."""
    coll = current().colls.get(proxy.cid)
    if coll is not None and (coll.outside or index in coll.local):
        return index
    name = proxy._chare.__name__ if proxy._chare is not None else "the array"
    raise UsageError(f"{name}: index {index} lies outside the shape {proxy.dims} of the "
                     "array (no such element; insert it first, or index within the shape)")


def _ints(index: tuple[Any, ...]) -> bool:
    """Is ``index`` a tuple of ints, exactly (a float or a numpy integer equal to an int
    is another index: refused, or a section's key)?"""
    for i in index:
        if type(i) is not int:
            return False
    return True


def _missing(chare: type[Chare] | None, name: str) -> str:
    if chare is None or name.startswith("__"):
        return name  # copy, pickle and friends probe dunder names
    return f"{chare.__name__} has no entry method {name!r} (its public methods are)"


def entry_methods(chare: type[Chare]) -> list[str]:
    """The entry methods of a chare class: its public methods and the runtime's own
    ``_shoal_*`` ones."""
    names = []
    for name in dir(chare):
        if name.startswith("_") and not name.startswith("_shoal_"):
            continue
        attr = getattr(chare, name)
        if callable(attr) and not isinstance(attr, type):
            names.append(name)
    return names


def _sender(name: str) -> Callable[..., Future | None]:
    """The element proxy's method that sends ``name``, the common case kept short."""

    def send(self: ElementProxy, *args: Any, **kwargs: Any) -> Future | None:
        rt = _Process.runtime or current()
        if kwargs:
            return _call(rt, self, name, args, kwargs)
        rt.invoke(self._dst, name, args, None, 0, None)
        return None

    send.__name__ = send.__qualname__ = name
    return send


def _broadcaster(name: str) -> Callable[..., Future | None]:
    """The collection proxy's method that broadcasts ``name``."""

    def broadcast(self: CollectionProxy, *args: Any, **kwargs: Any) -> Future | None:
        return _call(_Process.runtime or current(), self, name, args, kwargs)

    broadcast.__name__ = broadcast.__qualname__ = name
    return broadcast


def _multicaster(name: str) -> Callable[..., Future | None]:
    """The section proxy's method that multicasts ``name``."""

    def multicast(self: SectionProxy, *args: Any, **kwargs: Any) -> Future | None:
        rt = _Process.runtime or current()
        ret = _returns(kwargs)
        prio = kwargs.pop("prio", 0)
        return rt.sections.multicast(self, name, args, kwargs or None, ret, prio)

    multicast.__name__ = multicast.__qualname__ = name
    return multicast


def _call(rt: Core, proxy: ElementProxy | CollectionProxy, name: str, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Future | None:
    ret = _returns(kwargs)
    if ret == RET_LIST and isinstance(proxy, ElementProxy):
        raise UsageError("return_exceptions=True is for a broadcast or a section's "
                         "multicast (a list of values); a call to one element raises "
                         "its exception where awaited: catch it there")
    prio = kwargs.pop("prio", 0)
    return rt.call(proxy, name, args, kwargs or None, ret, prio)


def _returns(kwargs: dict[str, Any]) -> int:
    """Take the runtime's ``ret=`` and ``awaitable=`` out of a call's keywords: what the
    caller's future gathers (``RET_VALUES``: the return values, ``RET_DONE``: only that
    the method ran, ``RET_LIST``: the return values with each failing element's exception
    in its place, ``ret=True, return_exceptions=True``; 0: no future), the same for an
    element, a collection and a section."""
    ret = RET_VALUES if kwargs.pop("ret", False) else 0
    if kwargs.pop("return_exceptions", False):
        if not ret:
            raise UsageError("return_exceptions=True goes with ret=True (the list of return "
                             "values, an element's exception in its place)")
        ret = RET_LIST
    if kwargs.pop("awaitable", False) and not ret:
        ret = RET_DONE
    return ret


_CLASSES: dict[type[Chare], tuple[type[ElementProxy], type[CollectionProxy]]] = {}


def proxy_classes(chare: type[Chare]) -> tuple[type[ElementProxy], type[CollectionProxy]]:
    """The element and collection proxy classes of chare class ``chare`` (made once)."""
    classes = _CLASSES.get(chare)
    if classes is None:
        names = entry_methods(chare)
        clash = sorted(_PROXY_ATTRS.intersection(names))
        if clash:
            raise UsageError(f"{chare.__name__}: entry methods may not be named "
                             f"{', '.join(clash)} (proxies use these names); rename them")
        element = cast("type[ElementProxy]",
                       type(f"{chare.__name__}ElementProxy", (ElementProxy,),
                            {"__slots__": (), "_chare": chare,
                             **{name: _sender(name) for name in names}}))
        collection = cast("type[CollectionProxy]",
                          type(f"{chare.__name__}Proxy", (CollectionProxy,),
                               {"__slots__": (), "_chare": chare, "_element": element,
                                **{name: _broadcaster(name) for name in names}}))
        classes = _CLASSES[chare] = (element, collection)
    return classes


_SECTIONS: dict[tuple[type[Chare], ...], type[SectionProxy]] = {}


def section_class(*chares: type[Chare]) -> type[SectionProxy]:
    """The section proxy class of chare class ``chare`` (made once); of several classes (a
    combined section, :func:`shoal.combine`), with the entry methods they all have."""
    cls = _SECTIONS.get(chares)
    if cls is None:
        for chare in chares:
            proxy_classes(chare)  # a clash of names is refused there
        names = set(entry_methods(chares[0])).intersection(*map(entry_methods, chares[1:]))
        label = "".join(chare.__name__ for chare in chares)
        cls = _SECTIONS[chares] = cast(
            "type[SectionProxy]",
            type(f"{label}SectionProxy", (SectionProxy,),
                 {"__slots__": (), "_chare": chares[0],
                  "_chares": chares if len(chares) > 1 else (),
                  **{name: _multicaster(name) for name in sorted(names)}}))
    return cls


def _rebuild_section(chares: type[Chare] | tuple[type[Chare], ...], cid: int, sid: int,
                     size: int, cids: tuple[int, ...] | None = None) -> SectionProxy:
    if not isinstance(chares, tuple):
        chares = (chares,)
    return section_class(*chares)(cid, sid, size, cids)


def _rebuild_element(chare: type[Chare], cid: int, index: tuple[int, ...]) -> ElementProxy:
    return proxy_classes(chare)[0](cid, index)


def _rebuild_collection(chare: type[Chare], cid: int, ndims: int,
                        dims: tuple[int, ...] | None = None,
                        pes: tuple[int, ...] | None = None) -> CollectionProxy:
    return proxy_classes(chare)[1](cid, ndims, dims, pes)
