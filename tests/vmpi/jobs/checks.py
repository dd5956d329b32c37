"""Rank programs that check shoal.vmpi; run one per job:

    shoal run -n 2 checks.py api 7         # 7 virtual ranks on 2 PEs
    mpiexec -n 3 python checks.py api 3 --native   # the same class over mpi4py itself
    shoal run -n 2 checks.py moves 6       # migration with messages in flight
    shoal run -n 2 checks.py balance 6 --lb greedy

Every rank checks what it can see itself (a failed assert ends the job); what needs every
rank's view is returned by run() and checked on the first process, which prints ``OK NAME``
and the figures the test compares, as a Python literal."""

import sys

import numpy as np

from shoal import vmpi


def value(r):
    """Rank r's contribution to the collectives (integer-valued floats: any order of the
    sums gives the same bits)."""
    return np.arange(4.0) * (r + 1) + r * r


def frac(r):
    """Rank r's fractional contribution (sums compared within a tolerance)."""
    return np.linspace(0.1, 1.0, 5) / (r + 3)


class Api:
    """Point to point (matching, order, wildcards, requests) and every collective."""

    async def run(self, comm):
        out = {"rank": comm.Get_rank(), "size": comm.Get_size()}
        assert comm.rank == out["rank"] and comm.size == out["size"]
        await self.order(comm)
        await self.wildcards(comm)
        await self.requests(comm)
        out["collectives"] = await self.collectives(comm)
        out["split"] = await self.split(comm)
        return out

    async def order(self, comm):
        r, n = comm.rank, comm.size
        arr = np.arange(5.0) + r
        for d in range(n):
            if d == r:
                continue
            for k in range(6):
                comm.send((r, k), d, tag=k % 3)
            await comm.send(arr, d, tag=9)  # (awaiting a send is allowed)
        arr[:] = -1  # the messages hold their own copies: MPI's send semantics
        for s in reversed(range(n)):  # receive from the last sender first
            if s == r:
                continue
            st = vmpi.Status()
            assert await comm.recv(source=s, tag=2, status=st) == (s, 2)
            assert (st.source, st.tag) == (s, 2)
            assert await comm.recv(None, s, 2) == (s, 5)
            got = []
            for _ in range(4):  # the rest, in the order they were sent, tags 0 and 1
                got.append((await comm.recv(source=s, tag=vmpi.ANY_TAG, status=st), st.tag))
            assert got == [((s, 0), 0), ((s, 1), 1), ((s, 3), 0), ((s, 4), 1)], got
            a = await comm.recv(source=s, tag=9)
            assert a.tolist() == (np.arange(5.0) + s).tolist(), a

    async def wildcards(self, comm):
        r, n = comm.rank, comm.size
        if r != 0:
            comm.send(r, 0, tag=20)
        if r == 1:
            for k in range(5):
                comm.send(("seq", k), 0, tag=21)
        if r == 0:
            st = vmpi.Status()
            seen = set()
            for _ in range(n - 1):
                v = await comm.recv(source=vmpi.ANY_SOURCE, tag=20, status=st)
                assert v == st.Get_source() and st.Get_tag() == 20
                seen.add(v)
            assert seen == set(range(1, n)), seen
            seq = [await comm.recv(source=vmpi.ANY_SOURCE, tag=21) for _ in range(5)]
            assert seq == [("seq", k) for k in range(5)], seq  # non-overtaking
        # PROC_NULL: sends vanish, receives return None at once
        comm.send("nothing", vmpi.PROC_NULL)
        st = vmpi.Status()
        assert await comm.recv(source=vmpi.PROC_NULL, status=st) is None
        assert st.source == vmpi.PROC_NULL
        # probe then receive; iprobe of a message that never comes
        right, left = (r + 1) % n, (r - 1) % n
        comm.send({"from": r}, right, tag=40)
        st = vmpi.Status()
        assert await comm.probe(vmpi.ANY_SOURCE, 40, st) is True
        assert (st.source, st.tag) == (left, 40)
        assert await comm.iprobe(left, 40) is True  # still there
        assert await comm.recv(source=left, tag=40) == {"from": left}
        assert await comm.iprobe(vmpi.ANY_SOURCE, 41) is False
        await comm.barrier()

    async def requests(self, comm):
        r, n = comm.rank, comm.size
        right, left = (r + 1) % n, (r - 1) % n
        reqs = [comm.irecv(source=left, tag=30), comm.irecv(source=right, tag=31)]
        sends = [comm.isend(("ring", r), right, tag=30), comm.isend(("back", r), left, 31)]
        assert await vmpi.Request.waitall(sends) == [None, None]
        sts = [vmpi.Status(), vmpi.Status()]
        got = await vmpi.Request.waitall(reqs, sts)
        assert got == [("ring", left), ("back", right)], got
        assert [(s.source, s.tag) for s in sts] == [(left, 30), (right, 31)]
        # test(): a pending request completes while the rank keeps testing
        req = comm.irecv(source=left, tag=32)
        await comm.barrier()  # every rank has posted its receive
        comm.send(r * 10, right, tag=32)
        deadline = vmpi.Wtime() + 30
        while True:
            flag, v = await req.test()
            if flag:
                break
            assert vmpi.Wtime() < deadline
        assert v == left * 10
        # waitany: the one that can complete
        never = comm.irecv(source=left, tag=34)
        comm.send("any", right, tag=33)
        k, v = await vmpi.Request.waitany([never, comm.irecv(source=left, tag=33)])
        assert (k, v) == (1, "any"), (k, v)
        await comm.barrier()  # nobody has sent tag 34 before every waitany has returned
        comm.send("late", right, tag=34)
        assert await never.wait() == "late"
        # sendrecv: a shift by 2
        st = vmpi.Status()
        v = await comm.sendrecv(r, (r + 2) % n, 35, None, (r - 2) % n, 35, st)
        assert v == (r - 2) % n and st.source == (r - 2) % n

    async def collectives(self, comm):
        r, n = comm.rank, comm.size
        res = {}
        res["bcast"] = await comm.bcast({"root": 2, "a": value(2)} if r == 2 else None, root=2)
        res["bcast"]["a"] = res["bcast"]["a"].tolist()
        for name in ("SUM", "PROD", "MAX", "MIN"):
            op = getattr(vmpi, name)
            red = await comm.reduce(value(r), op=op, root=1)
            assert (red is None) == (r != 1)
            res[f"reduce_{name}"] = None if red is None else red.tolist()
            res[f"allreduce_{name}"] = (await comm.allreduce(value(r), op=op)).tolist()
        res["allreduce_frac"] = (await comm.allreduce(frac(r))).tolist()
        res["allreduce_int"] = await comm.allreduce(r + 1)
        res["allreduce_max_scalar"] = await comm.allreduce(float(r), vmpi.MAX)
        res["allreduce_fn"] = await comm.allreduce([r], op=lambda a, b: a + b)  # concatenates
        res["land"] = await comm.allreduce(r < n, vmpi.LAND)
        res["lor"] = await comm.allreduce(r == 1, vmpi.LOR)
        res["band"] = await comm.allreduce(0b111 << r, vmpi.BAND)
        res["bor"] = await comm.allreduce(1 << r, vmpi.BOR)
        g = await comm.gather(("g", r), root=1)
        res["gather"] = g
        res["allgather"] = await comm.allgather(r * r)
        res["scatter"] = await comm.scatter([("s", k) for k in range(n)] if r == 0 else None, 0)
        res["alltoall"] = await comm.alltoall([(r, k) for k in range(n)])
        res["scan"] = (await comm.scan(value(r))).tolist()
        ex = await comm.exscan(value(r))
        res["exscan"] = None if ex is None else ex.tolist()
        await comm.Barrier()
        return res

    async def split(self, comm):
        r = comm.rank
        sub = await comm.Split(color=r % 2, key=-r)  # reversed order inside each half
        none = await comm.Split(vmpi.UNDEFINED if r == 0 else 1, r)
        assert (none is None) == (r == 0)
        # messages on sub never match receives on comm (and the other way round)
        if sub.size > 1:
            right = (sub.rank + 1) % sub.size
            dest = [q for q in range(comm.size) if q % 2 == r % 2][::-1][right]
            sub.send("sub", right, tag=50)
            comm.send("world", dest, tag=50)
            left = (sub.rank - 1) % sub.size
            src = [q for q in range(comm.size) if q % 2 == r % 2][::-1][left]
            assert await comm.recv(source=src, tag=50) == "world"
            assert await sub.recv(source=left, tag=50) == "sub"
        dup = await comm.Dup()
        dup.send("dup", r, tag=51)
        comm.send("comm", r, tag=51)
        assert await dup.recv(source=r, tag=51) == "dup"
        assert await comm.recv(source=r, tag=51) == "comm"
        total = await sub.allreduce(r)
        members = await sub.allgather(r)
        return {"sub_rank": sub.rank, "sub_size": sub.size, "sub_sum": total,
                "members": members, "bcast": await sub.bcast(r, root=0)}


def check_api(results):
    """Every rank's view against numpy; returns the figures the test shows."""
    n = len(results)
    vals = np.array([value(r) for r in range(n)])
    expect = {"SUM": vals.sum(0), "PROD": vals.prod(0), "MAX": vals.max(0), "MIN": vals.min(0)}
    for r, out in enumerate(results):
        assert out["rank"] == r and out["size"] == n
        c = out["collectives"]
        assert c["bcast"] == {"root": 2, "a": value(2).tolist()}
        for name, e in expect.items():
            assert c[f"allreduce_{name}"] == e.tolist(), (name, c[f"allreduce_{name}"], e)
            assert c[f"reduce_{name}"] == (e.tolist() if r == 1 else None)
        assert np.allclose(c["allreduce_frac"], sum(frac(q) for q in range(n)), rtol=1e-15)
        assert c["allreduce_frac"] == results[0]["collectives"]["allreduce_frac"]  # same bits
        assert c["allreduce_int"] == n * (n + 1) // 2
        assert c["allreduce_max_scalar"] == n - 1
        assert sorted(c["allreduce_fn"]) == list(range(n))
        assert c["land"] is True and c["lor"] is True
        band = 0b111
        for q in range(n):
            band &= 0b111 << q
        assert c["band"] == band and c["bor"] == 2 ** n - 1
        assert c["gather"] == ([("g", q) for q in range(n)] if r == 1 else None)
        assert c["allgather"] == [q * q for q in range(n)]
        assert c["scatter"] == ("s", r)
        assert c["alltoall"] == [(q, r) for q in range(n)]
        assert c["scan"] == np.cumsum(vals, axis=0)[r].tolist()
        assert c["exscan"] == (None if r == 0 else np.cumsum(vals, axis=0)[r - 1].tolist())
        s = out["split"]
        half = [q for q in range(n) if q % 2 == r % 2][::-1]  # key=-rank: reversed
        assert s["sub_rank"] == half.index(r) and s["sub_size"] == len(half)
        assert s["members"] == half and s["sub_sum"] == sum(half) and s["bcast"] == half[0]
    return {"ranks": n, "sum": expect["SUM"].tolist()}


class Moves:
    """Each rank in turn moves alone (migrate_to) while every other rank streams messages to
    it: its state, the messages that reached it before the move and those sent during it
    all survive, in order; it is entered again by ``resume``."""

    def __init__(self, rounds):
        self.rounds = rounds
        self.round = 0
        self.state = None
        self.pes = []
        self.sub = None
        self.drain = None  # the round whose stream this rank receives once it has moved

    async def run(self, comm):
        from shoal import my_pe, num_pes

        r, n = comm.rank, comm.size
        if self.state is None:
            self.state = np.full(1000, float(r))
            self.sub = await comm.Split(r % 2, r)  # kept in the object: it moves with it
            comm.send(("early", r), (r + 1) % n, tag=7)  # received after every move
        if self.drain is not None:  # arrived: the stream sent while it moved
            k, self.drain = self.drain, None
            for s in range(n):
                if s != r:
                    got = [await comm.recv(source=s, tag=k) for _ in range(20)]
                    assert got == [(s, k, j) for j in range(20)], got
            await comm.barrier()
        while self.round < self.rounds:
            k = self.round
            mover = k % n
            self.pes.append(my_pe())
            self.round += 1
            if r == mover:
                self.state += 1
                self.drain = k
                await comm.migrate_to((my_pe() + 1) % num_pes())
            for j in range(20):
                comm.send((r, k, j), mover, tag=k)
            await comm.barrier()
        self.pes.append(my_pe())
        early = await comm.recv(source=(r - 1) % n, tag=7)
        assert early == ("early", (r - 1) % n), early
        total = await self.sub.allreduce(float(self.state.sum()))
        return {"rank": r, "pes": self.pes, "state0": float(self.state[0]), "sub": total}

    async def resume(self, comm):
        """Where a moved rank starts again (resume="resume"): the same as run here."""
        return await self.run(comm)


class Balance:
    """Ranks 0..n/2-1 (all on PE 0 at first) do 4x the work of the others; migrate() every
    iteration lets the balancer move some of them; state and results survive."""

    def __init__(self, iters):
        self.iters = iters
        self.it = 0
        self.x = None
        self.pes = []

    async def run(self, comm):
        from shoal import my_pe

        r, n = comm.rank, comm.size
        if self.x is None:
            self.x = np.full(64, float(r))
        for it in range(self.it, self.iters):
            self.pes.append(my_pe())
            work = 4 if r < n // 2 else 1
            for _ in range(work):
                m = np.random.default_rng(it).random((110, 110))
                for _ in range(6):
                    m = m @ m
                    m /= np.abs(m).max()
            self.x += 1
            right, left = (r + 1) % n, (r - 1) % n
            got = await comm.sendrecv(self.x, right, 1, None, left, 1)
            assert got[0] == left + it + 1, (got[0], left, it)
            total = await comm.allreduce(float(self.x[0]))
            assert total == sum(q + it + 1 for q in range(n))
            self.it = it + 1
            await comm.migrate()
        return {"rank": r, "pes": self.pes, "x": float(self.x[0])}


def main():
    args = sys.argv[1:]
    native = "--native" in args
    options = {}
    if "--lb" in args:
        k = args.index("--lb")
        options["lb"] = args[k + 1]
        del args[k:k + 2]
    name, nranks = args[0], int(args[1])
    if name == "api":
        res = vmpi.run(Api, nranks, native=native, **options)
        if res is not None:
            print(f"OK api {check_api(res)!r}", flush=True)
    elif name == "moves":
        res = vmpi.run(Moves, nranks, args=(nranks,), resume="resume", **options)
        if res is not None:
            moved = 0
            for out in res:
                r = out["rank"]
                assert out["state0"] == r + 1  # its one burst before its move
                moved += len(set(out["pes"])) > 1
            sums = [out["sub"] for out in res]
            print(f"OK moves {{'moved': {moved}, 'sub': {sums!r}}}", flush=True)
    elif name == "balance":
        res = vmpi.run(Balance, nranks, args=(6,), **options)
        if res is not None:
            for out in res:
                assert out["x"] == out["rank"] + 6
            moved = sorted(out["rank"] for out in res if len(set(out["pes"])) > 1)
            heavy = [sorted({out["pes"][it] for out in res[:nranks // 2]})
                     for it in range(6)]  # the heavy ranks' PEs in each iteration
            print(f"OK balance {{'moved': {moved!r}, 'heavy_pes': {heavy!r}}}", flush=True)
    else:
        raise SystemExit(f"unknown check {name}")


if __name__ == "__main__":
    main()
