"""Sections: which elements a key selects (against numpy indexing of the index grid), the
spanning tree, multicasts and reductions of the section manager over a simulated network
(no MPI), and user programs on 2 and 4 PEs (jobs/sections.py)."""

import random
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_jobs import run_ok

from shoal.errors import UsageError
from shoal.runtime.chare import Chare
from shoal.runtime.collectives.section import SECTION, Sections
from shoal.runtime.futures import Future
from shoal.runtime.maps import home
from shoal.runtime.protocol import ARITY, INVOKE, KINDS, SEC_MCAST, SEC_RED, SEC_REQ
from shoal.runtime.proxy import proxy_classes, section_class
from shoal.runtime.reducers import Reducer
from shoal.runtime.selection import select

# ----------------------------------------------------------------- selection vs numpy


def numpy_selects(dims, key):
    grid = np.indices(dims)
    picked = np.stack([a[key] for a in grid], axis=-1).reshape(-1, len(dims))
    return sorted({tuple(int(v) for v in row) for row in picked})


@st.composite
def dense_keys(draw):
    dims = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    bound = st.one_of(st.none(), st.integers(-8, 8))
    entries = []
    for d in dims[:draw(st.integers(1, len(dims)))]:
        if draw(st.booleans()):
            entries.append(slice(draw(bound), draw(bound),
                                 draw(st.one_of(st.none(), st.sampled_from([-3, -2, -1, 1, 2,
                                                                            3])))))
        else:
            entries.append(draw(st.integers(-d, d - 1)))
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), Ellipsis)
    if not any(type(e) is slice or e is Ellipsis for e in entries):
        entries.append(Ellipsis)
    return dims, tuple(entries)


@settings(max_examples=400, deadline=None)
@given(dense_keys())
def test_a_slice_key_selects_what_numpy_selects_from_the_index_grid(case):
    dims, key = case
    try:
        want = numpy_selects(dims, key)
    except IndexError:  # an integer beyond its axis (after the '...' moved it)
        with pytest.raises(UsageError, match="outside the extent"):
            select(key, len(dims), dims)
        return
    if not want:
        with pytest.raises(UsageError, match="selects no element"):
            select(key, len(dims), dims)
    else:
        assert select(key, len(dims), dims) == want


def test_a_sparse_array_needs_bounds_on_every_axis_and_counts_nothing_from_the_end():
    assert select((slice(0, 3), slice(2, 7, 2)), 2, None) == [
        (i, j) for i in range(3) for j in (2, 4, 6)]
    assert select((1, slice(5, 6)), 2, None) == [(1, 5)]
    for key, said in [((slice(None, 3), slice(0, 2)), "explicit start"),
                      ((slice(0, 3),), "name all 2 axes"),
                      ((Ellipsis, slice(0, 2)), "name all 2 axes"),
                      ((slice(-2, 3), slice(0, 2)), "negative start"),
                      ((-1, slice(0, 2)), "non-negative index"),
                      ((slice(0, 3, -1), slice(0, 2)), "positive step")]:
        with pytest.raises(UsageError, match=said):
            select(key, 2, None)


@pytest.mark.parametrize("key,said", [
    ((slice(None), slice(None), 0), "has 3 indices"),
    ((Ellipsis, Ellipsis), "at most one"),
    ((True, slice(None)), "not an index"),
    ((slice(None), 1.5), "not an index"),
    ((7, slice(None)), "outside the extent 4"),
    ((slice(4, 2), slice(None)), "selects no element"),
])
def test_a_bad_section_key_is_refused_with_what_to_change(key, said):
    with pytest.raises(UsageError, match=said):
        select(key, 2, (4, 5))


# ----------------------------------------------------------------- the manager, simulated


class Member(Chare):
    def go(self, m):
        pass


class Coll:
    def __init__(self, n, npes):
        self.cid, self.kind, self.n, self.npes = 7, "array", n, npes
        self.local = {}
        self.cls = Coll

    def home(self, index):
        return home("block", index, (self.n,), self.npes)


class Slot:
    def __init__(self, coll, index):
        self.coll, self.index, self.sections, self.key = coll, index, {}, (coll.cid, index)


class Net:
    """PEs that exchange envelopes over FIFO channels, delivered in a random interleaving
    (MPI keeps the order between two PEs only)."""

    def __init__(self, npes, n, seed):
        self.rng = random.Random(seed)
        self.channels = {}
        self.sent = []  # (src, dest, kind name)
        self.pes = [FakeRuntime(self, pe, npes, n) for pe in range(npes)]

    def send(self, src, dest, env):
        self.sent.append((src, dest, KINDS[env[0]].name))
        self.channels.setdefault((src, dest), deque()).append(env)

    def run(self):
        while True:
            busy = [c for c, q in self.channels.items() if q]
            if not busy:
                return
            src, dest = self.rng.choice(busy)
            env = self.channels[(src, dest)].popleft()
            rt = self.pes[dest]
            {SEC_MCAST: rt.sections.on_mcast, SEC_RED: rt.sections.on_red,
             SEC_REQ: rt.sections.on_req}.get(env[0], rt.sections.on_new)(env)


class FakeRuntime:
    def __init__(self, net, pe, npes, n):
        self.net, self.pe, self.npes = net, pe, npes
        coll = Coll(n, npes)
        self.colls = {coll.cid: coll}
        for i in range(n):
            if coll.home((i,)) == pe:
                coll.local[(i,)] = Slot(coll, (i,))
        self.sections = Sections(self)
        self.delivered = []  # (index, method, sender key, sequence number)
        self.results = []

    def collection(self, cid, env):
        return self.colls[cid]

    def send(self, dest, env):
        self.net.send(self.pe, dest, env)

    def accept(self, slot, env):
        assert env[0] == INVOKE
        self.delivered.append((env[2], env[3], env[6], env[7]))

    def resolve(self, pe, fid, value):
        self.net.pes[pe].results.append((fid, value))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 120), st.data())
def test_a_section_tree_multicasts_once_per_edge_and_reduces_once_per_pe(npes, n, data):
    """Random sections of a block-mapped array over up to 40 PEs, made on a random PE:
    every member gets every multicast once, numbered in order; a multicast costs one
    envelope per edge of a tree over the members' home PEs (depth log4); each reduction
    gives the exact sum, with at most one partial result per PE (contributions made in a
    random order, each sent to its member's home)."""
    members = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    root = data.draw(st.integers(0, npes - 1))
    net = Net(npes, n, data.draw(st.integers(0, 2**16)))
    owner = net.pes[root]
    sec = owner.sections.create(proxy_classes(Member)[1](7, 1, (n,)), [(i,) for i in members])
    net.run()
    homes = {Coll(n, npes).home((i,)) for i in members}
    tree = homes | {root}
    assert sum(1 for s, d, k in net.sent if k == "SEC_NEW") == len(tree) - 1
    depth = 0  # of a complete ARITY-ary tree over the tree's PEs
    while (ARITY ** (depth + 1) - 1) // (ARITY - 1) < len(tree):
        depth += 1
    holders = {rt.pe for rt in net.pes if sec.sid in rt.sections.parts}
    assert holders == tree
    for pe in tree:
        hops, at = 0, pe
        while (up := net.pes[at].sections.parts[sec.sid].parent) is not None:
            hops, at = hops + 1, up
        assert at == root and hops <= depth
    for m in range(3):
        net.sent.clear()
        net.pes[data.draw(st.integers(0, npes - 1))].sections.multicast(
            sec, "go", (m,), None, False, 0)
        net.run()
        mcasts = [(s, d) for s, d, k in net.sent if k == "SEC_MCAST"]
        assert len(mcasts) == len(tree) - 1
    got = sorted((idx, seq) for rt in net.pes for idx, name, src, seq in rt.delivered)
    assert got == sorted(((i,), m) for i in members for m in range(3))
    assert all(src == (SECTION, sec.sid) for rt in net.pes for _, _, src, _ in rt.delivered)
    for r in range(2):
        net.sent.clear()
        fut = Future(root, 100 + r)
        order = list(members)
        net.rng.shuffle(order)
        for i in order:
            rt = net.pes[Coll(n, npes).home((i,))]
            rt.sections.contribute(rt.colls[7].local[(i,)], sec, float(i * (r + 1)),
                                   Reducer.sum, fut)
            if net.rng.random() < 0.5:
                net.run()
        net.run()
        assert owner.results.count((100 + r, float(sum(members) * (r + 1)))) == 1
        ups = [s for s, d, k in net.sent if k == "SEC_RED"]
        assert len(ups) == len(set(ups)) == len(tree) - 1  # one partial up per tree edge


# ----------------------------------------------------------------- user programs


SCENARIOS = ["slices", "reductions", "groups", "overlapping", "migrating", "from_elements",
             "sparse", "caller_sends_little", "combined"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_sections_as_a_user_writes_them(ranks):
    figures = run_ok("sections", ranks, *SCENARIOS)
    assert figures["slices"] == 6
    assert figures["reductions"] == sum(
        i + 2 * j for i in range(1, 7) for j in range(0, 6, 2))
    assert figures["migrating"] > 50  # members did move while multicasts were under way
    # the caller, root of a section spread over every PE, sent one envelope per child of
    # the tree (every PE but itself holds members: at most ARITY children), none per element
    assert figures["caller_sends_little"] == {"SEC_MCAST": min(ranks - 1, ARITY)}


def test_awaitable_on_a_section_waits_for_every_member_as_on_an_array():
    run_ok("sections", 2, "awaitable")


def test_section_proxies_pickle_small_and_a_list_key_points_to_section():
    import pickle

    sec = section_class(Member)(7, (3 << 20) | 5, 12)
    back = pickle.loads(pickle.dumps(sec))
    assert back == sec and type(back) is type(sec) and len(back) == 12
    assert len(pickle.dumps(sec)) < 200
    with pytest.raises(AttributeError, match="Member has no entry method 'og'"):
        sec.og  # noqa: B018
    arr = proxy_classes(Member)[1](7, 1, (10,))
    with pytest.raises(UsageError, match=r"arr.section\(\[...\]\)"):
        arr[[1, 2]]

    class Clash(Chare):
        def section(self):
            pass

    with pytest.raises(UsageError, match="may not be named section"):
        proxy_classes(Clash)
