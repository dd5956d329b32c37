"""Point-to-point channels between two chares (the idiom of stencil codes: each block awaits
its neighbours' ghost layers in order).

Channel data are ordinary messages to the other element, so they follow it when it migrates
and arrive in the order they were sent.
"""

from __future__ import annotations

from shoal.errors import UsageError
from shoal.runtime.context import current
from shoal.runtime.futures import Future
from shoal.runtime.proxy import ElementProxy


class Channel:
    """A FIFO between the chare that creates it and ``remote`` (an element proxy); the
    remote side creates its own end with this chare's proxy and the same ``name``."""

    __slots__ = ("key", "remote")

    def __init__(self, chare, remote: ElementProxy, name=0):
        if not isinstance(remote, ElementProxy):
            raise UsageError(f"a channel connects to one element (arr[i]), not {remote!r}")
        me = (chare._slot.coll.cid, chare._slot.index)
        other = (remote.cid, remote.index)
        self.key = (min(me, other), max(me, other), name)
        self.remote = remote

    def send(self, value) -> None:
        """Send ``value`` to the other end (asynchronous)."""
        current().channel_send(self.key, self.remote, value)

    def recv(self) -> Future:
        """A future of the next value from the other end: ``value = await ch.recv()``."""
        rt = current()
        if rt.current is None:
            raise UsageError("receive on a channel from an entry method of its chare")
        return rt.channel_recv(rt.current, self.key)
