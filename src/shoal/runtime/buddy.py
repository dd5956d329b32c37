"""Double in-memory checkpoints (Acun14, Section III-B, ref. [7]: Charm++'s double
in-memory checkpointing): every PE keeps its shard of a checkpoint in memory and a copy at
its buddy, a PE on another node when there is one, so the loss of one node loses no shard.

The images are the records of the disk format (:mod:`shoal.runtime.shards`, one way of
packing) kept as :class:`~shoal.runtime.shards.Image`\\ s in :data:`STORE`, which belongs to
the process, not to a runtime: after a PE failure the survivors build a new runtime on a
shrunk communicator and restore from it (:mod:`shoal.runtime.recovery`).

Generations: PE 0 numbers them; a generation is *committed* on every PE once every shard
and its copy are in place (``CKPT_COMMIT``). A PE keeps its last two committed generations
(and any newer one being written), so survivors that disagree by one commit still find the
older one everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpi4py import MPI

    from shoal.runtime.shards import Image


class Store:
    """The in-memory checkpoints this process holds: per generation, per owner PE, the
    images (a PE's shard; PE 0's also the ``main`` shard)."""

    def __init__(self) -> None:
        self.gens: dict[int, dict[int, list[Image]]] = {}
        self.committed = 0  # the last generation known complete everywhere
        self.last = 0  # the last generation numbered (PE 0)
        self.buddy: list[int] = []  # buddy of every PE of the runtime that wrote them

    def put(self, gen: int, owner: int, images: list[Image]) -> None:
        self.gens.setdefault(gen, {})[owner] = images

    def commit(self, gen: int) -> None:
        self.committed = max(self.committed, gen)
        for old in [g for g in self.gens if g < self.committed - 1]:
            del self.gens[old]

    def held(self, gen: int) -> dict[int, list[Image]]:
        """The images of generation ``gen`` this process holds, by owner PE."""
        return self.gens.get(gen, {})

    def clear(self) -> None:
        """After a recovery: the old generations name PEs that no longer exist."""
        self.gens.clear()
        self.committed = self.last = 0

    def nbytes(self) -> int:
        return sum(len(i.pkl) + len(i.bin) for g in self.gens.values()
                   for imgs in g.values() for i in imgs)


STORE = Store()


def buddies(comm: MPI.Intracomm) -> list[int]:
    """The buddy of every rank of ``comm`` (collective): the next rank, cyclically, on
    another node (nodes from ``MPI_Comm_split_type(COMM_TYPE_SHARED)``), else the next
    rank. A lone rank is its own buddy."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    leader = node.allreduce(comm.Get_rank(), op=MPI.MIN)
    node.Free()
    nodes: list[Any] = comm.allgather(leader)
    size = len(nodes)
    out = []
    for p in range(size):
        others = [(p + k) % size for k in range(1, size) if nodes[(p + k) % size] != nodes[p]]
        out.append(others[0] if others else (p + 1) % size)
    return out
