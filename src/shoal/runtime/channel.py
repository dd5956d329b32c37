"""Point-to-point channels between two chares (the idiom of stencil codes: each block awaits
its neighbours' ghost layers in order).

Every :class:`Channel` object is a channel of its own: values sent on one never reach
another, however many two chares make. The two ends pair up by order of creation: the k-th
channel that chare A makes to chare B with a given ``name`` (default None) and the k-th one
that B makes to A with that name are the two ends of one channel. So two chares that make
their channels in the same order (a phase that makes a fresh pair each iteration, two
channels made one after the other) pair without naming them; ``name`` keeps apart
channels that the two sides do not make in step (a ghost-layer channel made every
iteration, a control channel made once). The counts travel with the element.

Channel data are ordinary messages to the other element, so they follow it when it migrates
and arrive in the order they were sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
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
    other end is the channel ``remote`` makes to this chare with the same ``name`` and the
    same rank among those (see the module doc)."""

    __slots__ = ("key", "remote")

    def __init__(self, chare: Chare, remote: ElementProxy, name: Hashable = None):
        if not isinstance(remote, ElementProxy):
            raise UsageError(f"a channel connects to one element (arr[i]), not {remote!r}")
        slot = chare._slot
        me = slot.key
        other = (remote.cid, remote.index)
        try:
            made = slot.chans.get((other, name), 0)
        except TypeError:
            raise UsageError(f"a channel's name must be hashable, not {name!r}") from None
        slot.chans[(other, name)] = made + 1
        self.key = (min(me, other), max(me, other), name, made)
        self.remote = remote

    def send(self, value: Any) -> None:
        """Send ``value`` to the other end (asynchronous)."""
        remote = self.remote
        current().invoke(remote._dst, CHANNEL, (self.key, value), None, 0, None)

    def recv(self) -> Future:
        """A future of the next value from the other end: ``value = await ch.recv()``."""
        rt = current()
        slot = rt.current
        if slot is None:
            raise UsageError("receive on a channel from an entry method of its chare")
        fut = rt.future()
        key = self.key
        box = slot.chan.get(key)
        if box:
            value = box.popleft()
            if not box:
                del slot.chan[key]
            rt.resolve(rt.pe, fut.fid, value)
        else:
            slot.waiting.setdefault(key, deque()).append(fut)
        return fut

    def _when_ready(self, note: Callable[[], None]) -> bool:
        """For :func:`shoal.iwait`: True when a value is there to receive now, else
        ``note()`` is called when one arrives (and not taken by a pending receive)."""
        slot = current().current
        if slot is None:
            raise UsageError("shoal.iwait over channels from an entry method of their chare")
        if slot.chan.get(self.key):
            return True
        slot.notes.setdefault(self.key, []).append(note)
        return False


def deliver(slot: Slot, key: tuple[Any, ...], value: Any) -> None:
    """A value arrived at element ``slot`` on channel ``key``: to the oldest pending
    receive, else into the channel's buffer (which migrates with the element). Empty
    queues are dropped: a program that makes a channel per iteration leaves nothing."""
    waiters = slot.waiting.get(key)
    if waiters:
        fut = waiters.popleft()
        if not waiters:
            del slot.waiting[key]
        current().resolve(fut.pe, fut.fid, value)
    else:
        slot.chan.setdefault(key, deque()).append(value)
        notes = slot.notes.pop(key, None)
        if notes:  # shoal.iwait: the channel has a value to receive
            for note in notes:
                note()
