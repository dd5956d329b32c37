"""The multi-pair benchmark of Gropp16, Section 4.1, over MPI.

k = 1..K processes of one node exchange messages with partners on another node, all at once;
for each k and message size n the time of a round is the maximum over the participating
processes (an exchange is as slow as its slowest pair). Two patterns:

- ``pingpong``: n bytes there and n bytes back; the time is half the round trip;
- ``ack``: n bytes there and a zero-byte acknowledgement back (the send direction alone is
  loaded; under saturation the two differ).

Nodes are found with ``MPI_Comm_split_type(SHARED)`` and host names, or declared with
``pseudo_nodes=(nodes, per_node)`` so that ranks of one host stand in for nodes. Ranks that do
not take part in a measurement wait in a barrier that sleeps (MPI's own barrier spins, and
a 2-core machine would starve the measured ranks).
"""

from __future__ import annotations

import math
import time

import numpy as np

from shoal.errors import UsageError
from shoal.units import parse_size

MODES = ("pingpong", "ack")
_ACK = np.zeros(0, np.uint8)  # what an acknowledgement carries


def geometric_sizes(text: str) -> list[int]:
    """``1B:4MiB`` (powers of two), ``1KiB:1MiB:x4`` (another factor) or a list ``8,64,1KiB``."""
    if ":" not in text:
        sizes = [parse_size(x.strip(), "--sizes") for x in text.split(",")]
    else:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"--sizes {text!r}: use a list, START:STOP or START:STOP:xFACTOR")
        lo, hi = parse_size(parts[0], "--sizes"), parse_size(parts[1], "--sizes")
        factor = 2.0
        if len(parts) == 3:
            if not parts[2].startswith("x"):
                raise UsageError(f"--sizes {text!r}: the step of a size range is a factor "
                                 f"such as x2")
            try:
                factor = float(parts[2][1:])
            except ValueError:
                raise UsageError(f"--sizes {text!r}: {parts[2]!r} is not a factor") from None
        if lo < 1 or hi < lo or factor <= 1:
            raise UsageError(f"--sizes {text!r}: need 1 <= START <= STOP and a factor > 1")
        sizes, s = [], float(lo)
        while s <= hi * (1 + 1e-9):
            sizes.append(round(s))
            s *= factor
    if not sizes or min(sizes) < 1:
        raise UsageError("--sizes: every message size must be at least 1 byte")
    return sorted(set(sizes))


def layout(comm, pseudo: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    """(node id, rank within the node) of every rank of ``comm``, as seen by all."""
    size = comm.Get_size()
    if pseudo is not None:
        nodes, per = pseudo
        if nodes * per != size:
            raise UsageError(f"--pseudo-nodes {nodes}x{per} declares {nodes * per} ranks but "
                             f"the job has {size}")
        ranks = np.arange(size)
        return ranks // per, ranks % per
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    leader = local.allreduce(comm.Get_rank(), MPI.MIN)
    me = (MPI.Get_processor_name(), leader, local.Get_rank())
    local.Free()
    everyone = comm.allgather(me)
    leaders = sorted({(host, lead) for host, lead, _ in everyone})
    node = np.array([leaders.index((host, lead)) for host, lead, _ in everyone])
    return node, np.array([r for _, _, r in everyone])


def sleeping_barrier(comm, poll: float = 1e-4) -> None:
    """A barrier that sleeps between tests instead of spinning."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll)


def run(comm, ks: list[int], sizes: list[int], repeat: int = 5, mode: str = "pingpong",
        min_time: float = 0.02, pseudo: tuple[int, int] | None = None) -> dict | None:
    """Measure every (k, n); returns on rank 0 ``{"rows": [...], "meta": {...}}`` with one row
    per repetition (k, n, repetition, seconds, bytes_per_s), None elsewhere."""
    from mpi4py import MPI

    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}")
    node, _ = layout(comm, pseudo)
    nodes, side_a, side_b = _sides(node, ks)
    rows = _measure(comm, [list(zip(side_a[:k], side_b[:k], strict=True)) for k in ks], sizes,
                    repeat, mode, min_time)
    hosts = sorted(set(comm.allgather(MPI.Get_processor_name())))
    gathered = comm.gather(rows, root=0)
    if comm.Get_rank() != 0:
        return None
    # every participant measured the same max-reduced time: keep one copy per (k, n, r)
    seen = {}
    for part in gathered:
        for k, n, r, t in part:
            seen[(k, n, r)] = t
    out = [{"k": k, "n": n, "repetition": r, "seconds": t, "bytes_per_s": k * n / t}
           for (k, n, r), t in sorted(seen.items())]
    meta = {"mpi_library": MPI.Get_library_version().strip().splitlines()[0],
            "mpi_version": ".".join(map(str, MPI.Get_version())), "mode": mode,
            "ranks": comm.Get_size(), "nodes": len(nodes),
            "pairs_max": min(len(side_a), len(side_b)),
            "processes_per_node": [int(np.sum(node == x)) for x in nodes],
            "pseudo_nodes": None if pseudo is None else f"{pseudo[0]}x{pseudo[1]}",
            "repeat": repeat, "min_time_s": min_time, "hosts": hosts}
    return {"rows": out, "meta": meta}


def _sides(node: np.ndarray, ks: list[int]) -> tuple[list, list[int], list[int]]:
    """The node ids, and the ranks of the first two nodes, which the pairs connect; refuses
    a layout of one node or a k beyond the ranks of a node."""
    nodes = sorted(set(node.tolist()))
    if len(nodes) < 2:
        raise UsageError("the benchmark needs ranks on two nodes: run across two nodes, or "
                         "declare --pseudo-nodes 2xK on one host")
    a, b = nodes[0], nodes[1]
    side_a = [r for r in range(len(node)) if node[r] == a]
    side_b = [r for r in range(len(node)) if node[r] == b]
    kmax = min(len(side_a), len(side_b))
    if max(ks) > kmax or min(ks) < 1:
        raise UsageError(f"k must lie in 1..{kmax}: nodes {a} and {b} have {len(side_a)} and "
                         f"{len(side_b)} ranks")
    return nodes, side_a, side_b


class _Point:
    """One (k, n) measurement of this rank: its partner, buffer and calibrated count. Every
    point's buffer is the first ``n`` bytes of ``big``, the rank's one buffer of the largest
    size (the memory ``shoal netmodel bench`` checks for)."""

    def __init__(self, pairs: list[tuple[int, int]], sub, rank: int, n: int,
                 big: np.ndarray):
        mine = [(p, q) for p, q in pairs if rank in (p, q)]
        self.k, self.n, self.sub = len(pairs), n, sub
        self.active = bool(mine)
        if self.active:
            p, q = mine[0]
            self.partner, self.first = (q, True) if p == rank else (p, False)
            self.buf = big[:n]
        self.iters = 1

    def exchange(self, comm, iters: int, mode: str) -> float:
        return _exchange(comm, self.sub, self.buf, _ACK, self.partner, self.first, iters, mode)


def _measure(comm, all_pairs: list[list[tuple[int, int]]], sizes: list[int], repeat: int,
             mode: str, min_time: float) -> list[tuple]:
    """Every set of pairs exchanges messages of every size, its pairs all at once; returns
    this rank's rows (k, n, repetition, seconds). Collective over ``comm``.

    A first pass warms each (k, n) up and sets its count of messages to last ``min_time``;
    then each repetition visits every (k, n) in turn. A burst of load on a shared machine thus
    slows one repetition of several points rather than every repetition of one point, and the
    best of the repetitions (what the fit uses) stays true."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    subs, points = [], []
    big = np.zeros(max(sizes), np.uint8)
    for pairs in all_pairs:
        sub = comm.Split(0 if any(rank in pq for pq in pairs) else MPI.UNDEFINED, rank)
        subs.append(sub)
        points += [_Point(pairs, sub, rank, n, big) for n in sizes]
    rows = []
    for r in range(-1, repeat):  # -1: warm-up and calibration
        for pt in points:
            sleeping_barrier(comm)
            if not pt.active:
                continue
            if r < 0:
                one = pt.exchange(comm, 1, mode)
                pt.iters = max(1, min(10000, math.ceil(min_time / max(one, 1e-7))))
                pt.exchange(comm, pt.iters, mode)
            else:
                rows.append((pt.k, pt.n, r, pt.exchange(comm, pt.iters, mode)))
    for sub in subs:
        if sub != MPI.COMM_NULL:
            sub.Free()
    return rows


def _exchange(comm, sub, buf, ack, partner, first, iters, mode) -> float:
    """``iters`` exchanges with ``partner``; returns the slowest participant's time of one
    message (half a ping-pong round trip, or one message plus its acknowledgement)."""
    from mpi4py import MPI

    sub.Barrier()
    t0 = MPI.Wtime()
    back = buf if mode == "pingpong" else ack
    for _ in range(iters):
        if first:
            comm.Send(buf, partner, 7)
            comm.Recv(back, partner, 7)
        else:
            comm.Recv(buf, partner, 7)
            comm.Send(back, partner, 7)
    t = (MPI.Wtime() - t0) / iters
    if mode == "pingpong":
        t /= 2
    return sub.allreduce(t, MPI.MAX)
