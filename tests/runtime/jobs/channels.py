"""Channels between chares, written as a user writes them (run by test_channels.py):
``python channels.py NAME...``. Each Channel object is its own channel; the two ends pair
up by order of creation, per name."""

from runner import main

import shoal
from shoal import Channel


class Peer(shoal.Chare):
    """Two elements that talk over several channels at once."""

    def other(self):
        return self.thisProxy[1 - self.thisIndex[0]]

    async def two_at_once(self):
        """Two channels to the same peer, made one after the other: values sent on the
        second never come out of the first, even when the first is read last."""
        first = Channel(self, self.other())
        second = Channel(self, self.other())
        me = self.thisIndex[0]
        for k in range(20):
            first.send(("first", me, k))
            second.send(("second", me, k))
        got_second = [await second.recv() for _ in range(20)]
        got_first = [await first.recv() for _ in range(20)]
        you = 1 - me
        assert got_second == [("second", you, k) for k in range(20)], got_second
        assert got_first == [("first", you, k) for k in range(20)], got_first
        return len(got_first) + len(got_second)

    async def phase(self, tag, rounds):
        """One of two phases that run at the same time in the same pair of elements, each
        with a channel of its own (made when the phase starts)."""
        ch = Channel(self, self.other())
        total = 0
        for k in range(rounds):
            ch.send((tag, k))
            got = await ch.recv()
            assert got == (tag, k), (tag, got)
            total += 1
            await shoal.sleep(0.0005 * (tag == "b"))  # the phases interleave
        return total

    async def steps(self, n):
        """A ghost channel made every step and a control channel made once: names keep
        apart channels the two sides do not make in step."""
        ctl = Channel(self, self.other(), "ctl")
        me = self.thisIndex[0]
        for step in range(n):
            ghost = Channel(self, self.other(), "ghost")
            ghost.send((me, step))
            assert await ghost.recv() == (1 - me, step)
        ctl.send(("done", me))
        return await ctl.recv()

    def move(self, pe):
        self.migrate(pe)

    def post(self, value):
        Channel(self, self.other(), "mail").send(value)

    async def collect(self):
        return shoal.my_pe(), await Channel(self, self.other(), "mail").recv()

    def leftovers(self):
        return len(self._slot.chan) + len(self._slot.waiting)


async def distinct():
    """Two channels made between the same pair never mix their values."""
    peers = shoal.Array(Peer, 2, map="round_robin")
    assert await peers.two_at_once(ret=True) == [40, 40]


async def concurrent_phases():
    """Two phases running at once, each on a fresh channel, do not see each other's data;
    nothing stays behind in the elements' buffers."""
    peers = shoal.Array(Peer, 2, map="round_robin")
    a = peers.phase("a", 30, ret=True)
    b = peers.phase("b", 30, ret=True)
    assert await a == [30, 30] and await b == [30, 30]
    assert await peers.leftovers(ret=True) == [0, 0]


async def named():
    """A channel made every step, another made once, told apart by name."""
    peers = shoal.Array(Peer, 2, map="round_robin")
    assert await peers.steps(12, ret=True) == [("done", 1), ("done", 0)]
    assert await peers.leftovers(ret=True) == [0, 0]


async def migrating():
    """The channels an element made (and the values waiting for it) travel with it: the
    k-th "mail" channel still pairs with the peer's k-th after the receiver moved."""
    peers = shoal.Array(Peer, 2, map="round_robin")
    for k in range(3):
        peers[0].post(("letter", k))
        peers[1].move((k + 1) % shoal.num_pes())
        pe, got = await peers[1].collect(ret=True)
        assert got == ("letter", k), got
    assert pe == 3 % shoal.num_pes()


if __name__ == "__main__":
    main({"distinct": distinct, "concurrent_phases": concurrent_phases, "named": named,
          "migrating": migrating})
