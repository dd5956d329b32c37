"""Point-to-point channels between two chares (the idiom of stencil codes: each block awaits
its neighbours' ghost layers in order).

Channel data are ordinary messages to the other element, so they follow it when it migrates
and arrive in the order they were sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from shoal.errors import UsageError
from shoal.runtime.context import current
from shoal.runtime.futures import Future
from shoal.runtime.protocol import CHANNEL
from shoal.runtime.proxy import ElementProxy

if TYPE_CHECKING:
    from shoal.runtime.chare import Chare
    from shoal.runtime.collection import Slot


class Channel:
    """A FIFO between the chare that creates it and ``remote`` (an element proxy); the
    remote side creates its own end with this chare's proxy and the same ``name``."""

    __slots__ = ("key", "remote")

    def __init__(self, chare: Chare, remote: ElementProxy, name: Hashable = 0):
        if not isinstance(remote, ElementProxy):
            raise UsageError(f"a channel connects to one element (arr[i]), not {remote!r}")
        me = (chare._slot.coll.cid, chare._slot.index)
        other = (remote.cid, remote.index)
        self.key = (min(me, other), max(me, other), name)
        self.remote = remote

    def send(self, value: Any) -> None:
        """Send ``value`` to the other end (asynchronous)."""
        remote = self.remote
        current().invoke(remote.cid, remote.index, CHANNEL, (self.key, value), None, 0, None)

    def recv(self) -> Future:
        """A future of the next value from the other end: ``value = await ch.recv()``."""
        rt = current()
        slot = rt.current
        if slot is None:
            raise UsageError("receive on a channel from an entry method of its chare")
        fut = rt.future()
        box = slot.chan.get(self.key)
        if box:
            rt.resolve(rt.pe, fut.fid, box.popleft())
        else:
            slot.waiting.setdefault(self.key, deque()).append(fut)
        return fut


def deliver(slot: Slot, key: tuple[Any, ...], value: Any) -> None:
    """A value arrived at element ``slot`` on channel ``key``: to the oldest pending
    receive, else into the channel's buffer (which migrates with the element)."""
    waiters = slot.waiting.get(key)
    if waiters:
        fut = waiters.popleft()
        current().resolve(fut.pe, fut.fid, value)
    else:
        slot.chan.setdefault(key, deque()).append(value)
