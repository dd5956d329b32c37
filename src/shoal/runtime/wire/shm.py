"""Large message buffers between PEs of one node through shared memory (receive without copy).

MPICH moves a large intranode message by a kernel copy into the receiver's memory (CMA,
``process_vm_readv``): the receiver pays for the copy, pins pages on every message, and the
megabyte it writes evicts its caches, so the Python work that follows runs cold. Charm++
keeps such messages in shared memory (its pxshm/zero-copy layers); shoal does the same. Each
PE owns a segment of one MPI shared window over its node (``MPI_Win_allocate_shared``):

- the sender copies an out-of-band buffer into a block of its own segment (user-space
  ``memcpy``, then ``MPI_Win_sync``) and sends only the envelope, which names the block;
- the receiver hands the program a view of the sender's block (no copy) and, once nothing
  refers to the view any more, raises the block's flag in the sender's segment;
- the sender takes flagged blocks back when it next allocates.

A block the receiver keeps for long (an array stored in a chare's state) stays taken; when a
segment has no room, messages travel by MPI as before, so the segment's size bounds memory,
never correctness. Layout of a segment: ``TICKETS`` flag bytes, then the blocks.
"""

from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from mpi4py import MPI

TICKETS = 4096  # blocks in flight per PE; the flag bytes at the start of each segment
ALIGN = 64  # bytes: blocks start on cache lines


def _lines(n: int) -> int:
    """``n`` bytes rounded up to whole cache lines."""
    return -(-n // ALIGN) * ALIGN


class Blocks:
    """First-fit allocation of byte ranges of ``[0, size)`` with a coalescing free list."""

    def __init__(self, size: int):
        self.size = size
        self.free: list[list[int]] = [[0, size]] if size else []  # [offset, length], sorted

    def take(self, n: int) -> int | None:
        """The offset of ``n`` free bytes (rounded up to ``ALIGN``), or None if none fit."""
        n = _lines(n)
        for k, run in enumerate(self.free):
            if run[1] >= n:
                off = run[0]
                if run[1] == n:
                    del self.free[k]
                else:
                    run[0] += n
                    run[1] -= n
                return off
        return None

    def give(self, off: int, n: int) -> None:
        """Return the ``n`` bytes at ``off`` (as given to :meth:`take`)."""
        n = _lines(n)
        free = self.free
        k = 0
        while k < len(free) and free[k][0] < off:
            k += 1
        if k and free[k - 1][0] + free[k - 1][1] == off:  # joins the run before
            free[k - 1][1] += n
            if k < len(free) and off + n == free[k][0]:
                free[k - 1][1] += free.pop(k)[1]
        elif k < len(free) and off + n == free[k][0]:  # joins the run after
            free[k][0] = off
            free[k][1] += n
        else:
            free.insert(k, [off, n])


def open_arena(comm: MPI.Intracomm, nbytes: int) -> SharedArena | None:
    """This PE's :class:`SharedArena` of ``nbytes`` (collective over ``comm``), or None
    when the PE is alone on its node or the MPI library cannot allocate the shared window
    on every PE of the node (then, after a warning, every buffer goes by MPI)."""
    from mpi4py import MPI

    nbytes = _lines(nbytes)  # every segment, so every block, on a cache line
    # an Intracomm's split is an Intracomm (mpi4py's stubs say Comm, Comm.Split_type's type)
    node = cast("MPI.Intracomm", comm.Split_type(MPI.COMM_TYPE_SHARED))
    if node.Get_size() == 1:
        node.Free()
        return None
    try:
        win = MPI.Win.Allocate_shared(TICKETS + nbytes, 1, comm=node)
    except MPI.Exception as exc:
        win, why = None, str(exc).strip().splitlines()[-1].split(": ")[-1]
    rank, size = node.Get_rank(), node.Get_size()
    first = node.allreduce(size if win is not None else rank, op=MPI.MIN)  # failed first
    if first < size:
        if win is not None:
            win.Free()
        elif rank == first:
            sys.stderr.write(f"shoal: no shared memory for large messages on this node "
                             f"({why}); they go by MPI (shm_bytes=0 hides this warning)\n")
        node.Free()
        return None
    assert win is not None  # every PE of the node has its segment (first == size)
    return SharedArena(comm, node, win, nbytes)


class SharedArena:
    """This PE's segment and views of the segments of the other PEs of its node.

    ``comm`` is the runtime's communicator (PEs are its ranks), ``node`` its PEs on this
    node, ``win`` their shared window with ``nbytes`` of room for blocks in each segment.
    """

    def __init__(self, comm: MPI.Intracomm, node: MPI.Intracomm, win: MPI.Win, nbytes: int):
        from mpi4py import MPI

        self.node = node
        self.win = win
        self.win.Lock_all(MPI.MODE_NOCHECK)  # a passive epoch: Win_sync orders memory
        self.sync = self.win.Sync
        ranks = MPI.Group.Translate_ranks(self.node.Get_group(), list(range(self.node.Get_size())),
                                          comm.Get_group())
        me = comm.Get_rank()
        self.segs: dict[int, memoryview] = {}  # comm rank -> its whole segment, as bytes
        self.base: dict[int, int] = {}  # comm rank -> address of its first block
        for node_rank, rank in enumerate(ranks):
            buf, _ = self.win.Shared_query(node_rank)
            # mpi4py's buffer exports the buffer protocol; numpy's stubs do not list it
            seg = np.frombuffer(buf, np.uint8, TICKETS + nbytes)  # type: ignore[call-overload]
            self.segs[rank] = seg.data  # a memoryview: item and slice stores cost less
            self.base[rank] = seg.ctypes.data + TICKETS
            if rank == me:
                self.flags = seg[:TICKETS]  # this PE's, scanned at once by numpy
        self.own = self.segs.pop(me)
        del self.base[me]
        self.blocks = Blocks(nbytes)
        self.tickets = list(range(TICKETS - 1, -1, -1))  # the lowest first
        self.high = 0  # tickets below this have been used
        self.live: dict[int, tuple[int, int]] = {}  # ticket -> (offset, bytes), in flight
        # [ctypes array, owner, ticket] of blocks of other PEs handed out
        self.held: list[list[Any]] = []
        self.calls = 0

    # ------------------------------------------------------------------ the sender's side
    def put(self, raw: memoryview) -> tuple[int, int] | None:
        """Copy ``raw`` into a block of this PE's segment: (ticket, offset) for the
        envelope, or None when there is no room (the buffer then travels by MPI)."""
        n = raw.nbytes
        if self.live:
            self._reclaim()
        off = self.blocks.take(n) if self.tickets else None
        if off is None:
            return None
        ticket = self.tickets.pop()
        if ticket >= self.high:
            self.high = ticket + 1
        own = self.own
        own[ticket] = 0
        start = TICKETS + off
        own[start:start + n] = raw
        self.live[ticket] = (off, n)
        return ticket, off

    def _reclaim(self) -> None:
        """Take back the blocks whose receivers raised their flags: a look at each block
        in flight when there are few, else one numpy scan of a snapshot of the flags of the
        tickets used so far (receivers keep writing them)."""
        live, own = self.live, self.own
        if len(live) <= 64:
            done = [t for t in live if own[t]]
        else:
            done = np.flatnonzero(self.flags[:self.high].copy()).tolist()
        if done:
            self.sync()  # the receivers' reads are over before the blocks are reused
            for t in done:
                off, n = live.pop(t)
                own[t] = 0
                self.blocks.give(off, n)
                self.tickets.append(t)

    # ------------------------------------------------------------------ the receiver's side
    def view(self, owner: int, ticket: int, off: int, n: int) -> np.ndarray:
        """The block ``(ticket, off, n)`` of ``owner``'s segment as bytes, without a copy.
        Its memory comes from a ctypes array, which numpy keeps as the base of every array
        made from it (a memoryview would be seen through): the ctypes array's reference
        count tells when the program is done with the block."""
        blk = (ctypes.c_ubyte * n).from_address(self.base[owner] + off)
        self.held.append([blk, owner, ticket])
        # ctypes arrays export the buffer protocol; numpy's type stubs do not list them
        return np.frombuffer(blk, np.uint8)  # type: ignore[call-overload]

    def release(self, force: bool = False) -> None:
        """Flag the blocks nothing refers to any more (the program dropped every array
        made from them) so that their owners take them back. Called on every idle turn of
        the scheduler: with more than 64 blocks held, one call in ``len(held) // 64`` looks,
        so that a program that keeps thousands costs about 64 checks per turn (``force``:
        look now)."""
        self.calls += 1
        if self.calls % (len(self.held) // 64 + 1) and not force:
            return
        keep = []
        freed = []
        for entry in self.held:
            if sys.getrefcount(entry[0]) == 2:  # the entry and the call's argument
                freed.append(entry)
            else:
                keep.append(entry)
        if freed:
            self.held = keep
            self.sync()  # the reads of the data are over before the flag is seen
            for _, owner, ticket in freed:
                self.segs[owner][ticket] = 1

    def close(self) -> None:
        """Free the window unless some PE of the node still hands out views of it (then
        MPI frees it at finalisation). Collective over the node."""
        from mpi4py import MPI

        self.release(force=True)
        busy = self.node.allreduce(len(self.held), op=MPI.SUM)
        self.win.Unlock_all()
        if not busy:
            for seg in self.segs.values():
                seg.release()
            self.own.release()
            del self.flags
            self.win.Free()
        self.node.Free()
