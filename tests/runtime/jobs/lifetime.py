"""Collection ids and destruction (run by test_collections.py): ``python lifetime.py
NAME... [--shm BYTES]``."""

import pytest
from runner import main

import shoal
from shoal.runtime.context import current


class Cell(shoal.Chare):
    def __init__(self, tag=""):
        self.tag = tag
        self.got = 0

    def ping(self):
        return (self.tag, self.thisIndex[0])

    def take(self, k):
        self.got += 1

    def flood(self, n):
        for k in range(n):
            self.thisProxy[(self.thisIndex[0] + 1 + k) % 6].take(k)


class Talker(shoal.Chare):
    """Sends to other collections and records nothing itself."""

    def talk(self, target, n):
        for k in range(n):
            target[k % 6].take(k)
        shoal.Channel(self, target[self.thisIndex[0]], "x").send(self.thisIndex[0])

    def links(self):
        """The collections this element's records name: messages sent (per destination
        collection: messages) and channels made."""
        slot = self._slot
        sent = {}
        for (cid, _), v in slot.out.items():
            sent[cid] = sent.get(cid, 0) + v[0]
        return sent, sorted({key[0][0] for key in slot.chans})


class Other(Cell):
    def ping(self):
        return ("other", self.thisIndex[0])


class Census(shoal.Chare):
    """One per PE: what the runtime keeps for collections here."""

    def state(self):
        rt = current()
        return len(rt.colls), len(rt.early), len(rt.pe_out), len(rt.queue)

    def graph(self):
        """The destination collections of this PE's communication records (shoal.stats)."""
        return sorted({dst[0] for _, dst in shoal.stats()["comm"]})

    def skip_ids(self, n):
        rt = current()
        rt.location.ncoll += n  # as if this PE had created n collections (and freed them)
        return rt.location.ncoll

    def make(self, fut):
        fut.send(shoal.Array(Other, 3, args=("on-1",)))


async def ids():
    """PE 0 has created 2^20 collections (its count jumped), PE 1 its first: the ids
    differ, and each array answers as itself."""
    census = shoal.Group(Census)
    await census[0].skip_ids((1 << 20) - 1, ret=True)  # (the group took one)
    fut = shoal.future()
    census[1].make(fut)
    theirs = await fut
    mine = shoal.Array(Cell, 3, args=("on-0",))
    assert mine.cid != theirs.cid, (mine.cid, theirs.cid)
    assert await mine.ping(ret=True) == [("on-0", i) for i in range(3)]
    assert await theirs.ping(ret=True) == [("other", i) for i in range(3)]
    return [mine.cid, theirs.cid]


async def destroy_frees():
    """2000 temporary arrays, each called and destroyed: afterwards every PE keeps no more
    collections than before, and nothing else for them."""
    census = shoal.Group(Census)
    before = await census.state(ret=True)
    for k in range(2000):
        a = shoal.Array(Cell, 6, args=(k,))
        a[k % 6].take(k)
        assert await a.ping(ret=True) == [(k, i) for i in range(6)]
        await shoal.destroy(a)
    await shoal.quiescence()
    after = await census.state(ret=True)
    assert after == before, (before, after)
    return len(current().location.destroyed)


async def destroy_errors():
    """A call to a destroyed collection, a broadcast to it and a second destruction are
    errors at the caller, naming the collection."""
    a = shoal.Array(Cell, 4)
    await shoal.destroy(a)
    said = []
    for attempt in (lambda: a[1].ping(), lambda: a.ping(), lambda: shoal.destroy(a)):
        with pytest.raises(shoal.UsageError, match=f"collection {a.cid} was destroyed") as e:
            attempt()
        said.append(str(e.value))
    b = shoal.Array(Cell, 4, args=("b",))  # the others are untouched
    assert await b.ping(ret=True) == [("b", i) for i in range(4)]
    return said[0]


async def destroy_links():
    """Elements of a lasting array that sent messages to, and made channels to, elements
    of arrays since destroyed: their records (the communication graph of shoal.stats(),
    load balancing and checkpoints) forget those arrays on every PE, and keep the rest.
    Returns the messages each lasting element has on record, by collection."""
    talkers = shoal.Array(Talker, 6)
    keep = shoal.Array(Cell, 6, args=("keep",))
    census = shoal.Group(Census)
    for k in range(3):
        temp = shoal.Array(Cell, 6, args=(k,))
        await talkers.talk(temp, 12, awaitable=True)
        await talkers.talk(keep, 6 + k, awaitable=True)
        await shoal.quiescence()
        assert temp.cid in {c for g in await census.graph(ret=True) for c in g}
        await shoal.destroy(temp)
        graphs = await census.graph(ret=True)
        assert all(temp.cid not in g for g in graphs), (temp.cid, graphs)
    links = await talkers.links(ret=True)
    assert all(chans == [keep.cid] for _, chans in links), links
    return [sent for sent, _ in links], keep.cid


async def destroy_busy():
    """Destroyed while its elements have thousands of messages queued and in flight (sent
    to each other on every PE): the job goes on, quiescence comes, the other arrays work."""
    keep = shoal.Array(Cell, 6, args=("keep",))
    for _ in range(5):
        a = shoal.Array(Cell, 6)
        a.flood(3000)
        await shoal.sleep(0.01)
        await shoal.destroy(a)
    await shoal.quiescence()
    census = shoal.Group(Census)
    states = await census.state(ret=True)
    assert all(q == 0 and e == 0 for _, e, _, q in states), states
    assert await keep.ping(ret=True) == [("keep", i) for i in range(6)]


if __name__ == "__main__":
    main({"ids": ids, "destroy_frees": destroy_frees, "destroy_errors": destroy_errors,
          "destroy_busy": destroy_busy, "destroy_links": destroy_links})
