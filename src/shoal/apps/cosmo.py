"""A proxy of COSMO-SPECS+FD4 (Levy14, Section 4.2) with its five communication phases,
weak scaling (each rank owns an ``nx x ny x nz`` block of a 2-D decomposition):

1. ``halo``: static regular ghost exchange with the four grid neighbours (COSMO);
2. ``irregular``: ghost exchange whose partners change every step (SPECS on FD4's moving
   partitions): random pairs drawn from a seed every rank shares;
3. ``coupling``: small messages between the two models' partitions, to a few random ranks;
4. ``partition``: FD4's new partition: loads gathered along grid rows, summed along columns
   (collectives on sub-communicators), and the partition vector broadcast;
5. ``migration``: work units move between neighbours along the space-filling-curve order
   until the loads follow the new partition.

Every phase is timed (slowest rank); the result also says whether the work was conserved
and the ghosts arrived where they belong, so the proxy checks itself.
"""

from __future__ import annotations

import time

import numpy as np

PHASES = ("compute", "halo", "irregular", "coupling", "partition", "migration")


def run(comm, steps: int = 10, nx: int = 48, ny: int = 48, nz: int = 16, seed: int = 0) -> dict:
    """Run the proxy; returns seconds per phase (max over ranks), the MPI fraction and the
    self-checks."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    px, py = MPI.Compute_dims(size, 2)
    cart = comm.Create_cart((px, py), periods=(True, True))
    rows = cart.Sub([False, True])  # ranks of my grid row
    cols = cart.Sub([True, False])
    shared = np.random.default_rng(seed)  # the same draws on every rank
    own = np.random.default_rng(seed + 1 + rank)
    field = np.full((nz, nx + 2, ny + 2), float(rank))
    work = own.integers(50, 150, size=1)[0] * np.ones(1)
    units = np.arange(int(work[0]), dtype=np.float64)  # work units this rank holds
    total_before = comm.allreduce(len(units))
    added = 0
    t = dict.fromkeys(PHASES, 0.0)
    halo_ok = True
    for _ in range(steps):
        t0 = time.perf_counter()
        _compute(field, rank)
        t1 = time.perf_counter()
        t["compute"] += t1 - t0
        halo_ok &= _halo(cart, field)
        t2 = time.perf_counter()
        t["halo"] += t2 - t1
        halo_ok &= _irregular(comm, shared, 4 * nx * nz)
        t3 = time.perf_counter()
        t["irregular"] += t3 - t2
        halo_ok &= _coupling(comm, shared)
        t4 = time.perf_counter()
        t["coupling"] += t4 - t3
        everyone, target = _partition(comm, rows, cols, len(units))
        t5 = time.perf_counter()
        t["partition"] += t5 - t4
        units = _migrate(comm, units, everyone, target)
        t["migration"] += time.perf_counter() - t5
        # loads drift for the next step (the cloud grows somewhere)
        new = int(own.integers(0, 5))
        added += new
        units = np.concatenate([units, np.zeros(new)])
    out = _summary(comm, t, halo_ok, len(units), total_before, added)
    for c in (rows, cols, cart):
        c.Free()
    return out


def _compute(field: np.ndarray, rank: int) -> None:
    """The model's stencil on the interior of ``field``, which then holds ``rank`` again."""
    inner = field[:, 1:-1, 1:-1]
    inner[...] = 0.25 * (field[:, :-2, 1:-1] + field[:, 2:, 1:-1] + field[:, 1:-1, :-2]
                         + field[:, 1:-1, 2:])
    field[:, 1:-1, 1:-1] = rank  # keep rank ids in the interior for the ghost check


def _halo(cart, field: np.ndarray) -> bool:
    """Regular ghost exchange with the four grid neighbours; True if every ghost layer came
    from the neighbour it belongs to."""
    ok = True
    for axis, (lo, hi) in ((0, cart.Shift(0, 1)), (1, cart.Shift(1, 1))):
        send_hi = np.ascontiguousarray(field[:, -2, 1:-1] if axis == 0 else field[:, 1:-1, -2])
        send_lo = np.ascontiguousarray(field[:, 1, 1:-1] if axis == 0 else field[:, 1:-1, 1])
        recv_lo, recv_hi = np.empty_like(send_hi), np.empty_like(send_lo)
        cart.Sendrecv(send_hi, hi, 1, recv_lo, lo, 1)
        cart.Sendrecv(send_lo, lo, 2, recv_hi, hi, 2)
        ok &= bool(np.all(recv_lo == lo) and np.all(recv_hi == hi))
        if axis == 0:
            field[:, 0, 1:-1], field[:, -1, 1:-1] = recv_lo, recv_hi
        else:
            field[:, 1:-1, 0], field[:, 1:-1, -1] = recv_lo, recv_hi
    return ok


def _irregular(comm, shared, max_len: int) -> bool:
    """Irregular ghost exchange: a fresh random pairing every step (drawn from ``shared``),
    messages of up to ``max_len`` values; True if the partner's data arrived."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    perm = shared.permutation(size)
    sizes = shared.integers(1, max_len, size=size)
    pos = int(np.flatnonzero(perm == rank)[0])
    partner = int(perm[pos ^ 1]) if (pos ^ 1) < size else MPI.PROC_NULL
    if partner == MPI.PROC_NULL:
        return True
    out = np.full(sizes[min(rank, partner)], float(rank))
    back = np.empty_like(out)
    comm.Sendrecv(out, partner, 3, back, partner, 3)
    return bool(np.all(back == partner))


def _coupling(comm, shared) -> bool:
    """Coupling: every rank sends 64-512 bytes to 3 random ranks (known to all through
    ``shared``); True if every message came from its sender."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    dests = shared.integers(0, size, size=(size, 3))
    lens = shared.integers(8, 64, size=(size, 3))
    reqs = [comm.Isend(np.full(lens[rank, k], float(rank)), int(dests[rank, k]), 10 + k)
            for k in range(3)]
    bufs = []
    for s in range(size):
        for k in range(3):
            if dests[s, k] == rank:
                buf = np.empty(lens[s, k])
                bufs.append((s, buf))
                reqs.append(comm.Irecv(buf, s, 10 + k))
    MPI.Request.Waitall(reqs)
    return all(np.all(buf == s) for s, buf in bufs)


def _partition(comm, rows, cols, load: int) -> tuple[np.ndarray, np.ndarray]:
    """FD4's new partition: loads along rows, sums along columns, the load vector broadcast;
    returns every rank's load and its target load."""
    size = comm.Get_size()
    loads = np.array(rows.allgather(load), dtype=np.int64)
    col_sums = np.array(cols.allgather(int(loads.sum())))
    everyone = np.empty(size, np.int64)
    if comm.Get_rank() == 0:
        everyone[:] = comm.gather(load, root=0)
    else:
        comm.gather(load, root=0)
    comm.Bcast(everyone, root=0)
    target = np.full(size, everyone.sum() // size)
    target[: everyone.sum() % size] += 1
    assert col_sums.sum() == everyone.sum()
    return everyone, target


def _migrate(comm, units: np.ndarray, everyone: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Migration along the rank order (a space-filling curve of the 2-D grid): each rank
    passes what it can of the flow the new partition asks for, one hop a step; returns the
    units this rank holds afterwards."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    flow = np.cumsum(everyone - target)  # units that should cross from i to i + 1
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    for direction in (1, -1):
        want = flow[rank] if direction == 1 else (-flow[rank - 1] if rank > 0 else 0)
        dest = right if direction == 1 else left
        src = left if direction == 1 else right
        n_out = int(min(max(want, 0), len(units))) if dest != MPI.PROC_NULL else 0
        out = np.ascontiguousarray(units[len(units) - n_out:] if direction == 1
                                   else units[:n_out])
        units = units[: len(units) - n_out] if direction == 1 else units[n_out:]
        n_in = np.zeros(1, np.int64)
        comm.Sendrecv(np.array([n_out], np.int64), dest, 20, n_in, src, 20)
        got = np.empty(int(n_in[0]))
        comm.Sendrecv(out, dest, 21, got, src, 21)
        units = np.concatenate([got, units] if direction == 1 else [units, got])
    return units


def _summary(comm, t: dict, halo_ok: bool, held: int, total_before: int, added: int) -> dict:
    """Phase times (slowest rank), the MPI fraction, the imbalance after migration and the
    self-checks: ghosts in place, work conserved."""
    from mpi4py import MPI

    total_after = comm.allreduce(held)
    grown = comm.allreduce(added)
    spread = comm.allgather(held)
    out = {k: comm.allreduce(v, op=MPI.MAX) for k, v in t.items()}
    out["total"] = sum(out[k] for k in PHASES)
    out["mpi_fraction"] = 1 - out["compute"] / out["total"] if out["total"] else 0.0
    out["halo_ok"] = comm.allreduce(halo_ok, op=MPI.LAND)
    out["imbalance"] = max(spread) / (sum(spread) / comm.Get_size())  # max load over mean
    out["work_conserved"] = total_after == total_before + grown
    return out
