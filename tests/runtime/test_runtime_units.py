"""Pieces of the runtime that need no MPI: maps, trees, reducers, proxies."""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal import Reducer, UsageError
from shoal.runtime.chare import Chare
from shoal.runtime.maps import WeightedBlock, check_map, default_map, home, local_indices
from shoal.runtime.protocol import children, parent
from shoal.runtime.proxy import proxy_classes
from shoal.runtime.reducers import checked
from shoal.runtime.wire.codec import OOB_MIN, pack_args, unpack_args
from shoal.runtime.wire.transport import _plain


@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.integers(1, 9),
       st.sampled_from(["block", "round_robin"]))
def test_local_indices_partition_the_array_as_home_says(dims, npes, m):
    dims = tuple(dims)
    seen = []
    for pe in range(npes):
        mine = local_indices(m, dims, npes, pe)
        assert all(home(m, ix, dims, npes) == pe for ix in mine)
        seen += mine
    assert sorted(seen) == sorted(np.ndindex(*dims))
    if m == "block":  # contiguous runs whose sizes differ by at most one
        sizes = [len(local_indices(m, dims, npes, pe)) for pe in range(npes)]
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == math.prod(dims)


@given(st.lists(st.integers(1, 6), min_size=1, max_size=2),
       st.lists(st.floats(0.05, 1.0), min_size=1, max_size=6))
def test_a_weighted_block_map_gives_each_pe_a_run_in_proportion_to_its_share(dims, shares):
    """Against the exact share: PE p's run is its share of the elements, rounded at the
    run's two ends; the runs partition the row-major order as home says; the map pickles;
    on another number of PEs (a restart) it is the plain block map."""
    dims, npes = tuple(dims), len(shares)
    m = pickle.loads(pickle.dumps(WeightedBlock(shares)))
    total, cum = math.prod(dims), np.concatenate(([0.0], np.cumsum(shares)))
    lin = 0
    for pe in range(npes):
        mine = local_indices(m, dims, npes, pe)
        assert [np.ravel_multi_index(ix, dims) for ix in mine] == list(
            range(lin, lin + len(mine)))
        assert all(home(m, ix, dims, npes) == pe for ix in mine)
        assert abs(lin + len(mine) - cum[pe + 1] / cum[-1] * total) <= 0.5 + 1e-9
        lin += len(mine)
    assert lin == total
    for ix in np.ndindex(*dims):
        assert home(m, ix, dims, npes + 1) == home("block", ix, dims, npes + 1)
    assert default_map(dims, [1.0] * npes) == "block" and default_map(None, shares) == "hash"


def test_user_maps_and_sparse_indices():
    def diag(ix, dims, npes):
        return (ix[0] + ix[1]) % npes

    assert local_indices(diag, (2, 2), 2, 1) == [(0, 1), (1, 0)]
    assert 0 <= home("hash", (7, -3), None, 5) < 5
    assert home("block", (7, 3), (4, 4), 5) == home("hash", (7, 3), None, 5)
    # a user map places every element: inserted into a sparse array or outside the shape
    assert home(diag, (7, 3), None, 4) == 2 and home(diag, (9, 9), (2, 2), 4) == 2
    with pytest.raises(UsageError, match="must return a PE"):
        home(lambda ix, d, n: n, (0,), (2,), 2)


def test_maps_that_cannot_be_honoured_are_refused():
    def local(ix, dims, npes):
        return 0

    check_map("round_robin", (4,))
    check_map(home, None)  # a module-level function travels
    for m, dims, said in (("block", None, "needs the array's shape"),
                          ("round_robin", None, "needs the array's shape"),
                          ("diagonal", (4,), "map must be one of"),
                          (local, (4,), "<locals>.local cannot be sent to other PEs")):
        with pytest.raises(UsageError, match=said):
            check_map(m, dims)


@given(st.integers(1, 200), st.integers(0, 199))
def test_spanning_trees_reach_every_pe_once(npes, root):
    root %= npes
    reached = [root]
    frontier = [root]
    while frontier:
        pe = frontier.pop()
        for c in children(pe, root, npes):
            assert parent(c, root, npes) == pe
            reached.append(c)
            frontier.append(c)
    assert sorted(reached) == list(range(npes))


def test_reducers_on_numbers_and_arrays():
    a, b = np.array([1.0, 5.0]), np.array([3.0, 2.0])
    assert np.array_equal(Reducer.max.combine(a, b), [3, 5])
    assert np.array_equal(Reducer.min.combine(a, b), [1, 2])
    assert np.array_equal(Reducer.sum.combine(a, b), [4, 7])
    assert Reducer.max.combine(2, 9) == 9 and Reducer.product.combine(3, 4) == 12
    assert Reducer.logical_and.combine(True, 0) is False
    assert Reducer.logical_or.combine(0, 1) is True
    assert pickle.loads(pickle.dumps(Reducer.gather)) is Reducer.gather
    assert len(pickle.dumps(Reducer.sum)) < 80
    with pytest.raises(UsageError, match="two-argument function"):
        checked(42, 1)


class _Cell(Chare):
    def update(self, x):
        pass


def test_proxies_pickle_and_check_indices():
    element, collection = proxy_classes(_Cell)
    arr = collection(5, 2)
    el = arr[1, 2]
    assert type(el) is element and el == element(5, (1, 2))
    assert pickle.loads(pickle.dumps(el)) == el
    assert type(pickle.loads(pickle.dumps(el))) is element
    m = pickle.loads(pickle.dumps(el.update))
    assert m.__self__ == el and m.__name__ == "update"
    assert pickle.loads(pickle.dumps(arr)) == arr
    with pytest.raises(UsageError, match="2 integer"):
        arr[3]
    with pytest.raises(AttributeError, match="'_CellElementProxy' object has no attribute "
                       "'updat'"):
        el.updat(1)
    with pytest.raises(AttributeError, match="'_CellProxy' object has no attribute 'updat'"):
        arr.updat(1)
    with pytest.raises(AttributeError):
        assert arr.__private__ is None
    assert {"update", "migrate", "contribute", "_shoal_channel"} <= set(dir(element))
    assert "on_migrated" in dir(collection) and "thisIndex" not in dir(element)


def test_a_collection_proxy_keeps_the_element_proxies_it_made_and_checks_the_rest():
    from shoal.runtime import proxy as proxy_module

    element, collection = proxy_classes(_Cell)
    line, grid = collection(5, 1, (4,)), collection(6, 2, (3, 3))
    assert line[2] is line[2] and line[2] == element(5, (2,)) and line[2].index == (2,)
    assert grid[1, 2] is grid[1, 2] and grid[1, 2] == element(6, (1, 2))
    for bad in [(1.0, 2), (np.int64(1), 2), (1, 2, 0)]:  # equal to a kept key, or not
        with pytest.raises(UsageError, match="2 integer"):
            grid[bad]
    sparse = collection(7, 1)  # (filled by insertion: every int index takes the short path)
    for i in range(proxy_module.MADE + 5):
        assert sparse[i].index == (i,)
    assert 0 < len(sparse._short[-1]) <= proxy_module.MADE


def test_entry_methods_may_not_shadow_proxy_names():
    class Table(Chare):
        def insert(self, key):
            pass

    with pytest.raises(UsageError, match="may not be named insert"):
        proxy_classes(Table)


@given(st.sampled_from(["f8", "f4", "i8", "u1", "c16", "?"]),
       st.lists(st.integers(0, 6), min_size=0, max_size=3), st.booleans())
def test_small_arrays_travel_as_bytes_and_come_back_equal_and_writable(dtype, shape, strided):
    a = np.arange(math.prod(shape)).astype(dtype).reshape(shape)
    if strided and a.ndim:
        a = a[..., ::2]
    args = (1, a, "x")
    packed = pack_args(args)
    assert type(packed) is list and isinstance(packed[0][1], bytes)
    back = unpack_args(pickle.loads(pickle.dumps(packed, 5)))
    assert type(back) is tuple  # a list would read as packed again (out of order, migrated)
    assert back[0] == 1 and back[2] == "x"
    assert back[1].dtype == a.dtype and np.array_equal(back[1], a)
    back[1][...] = 0  # writable


def test_large_arrays_leave_the_pickle_and_come_back_as_views_of_the_received_memory():
    big = np.arange(OOB_MIN // 4, dtype=np.float64).reshape(-1, 4)[:, ::2]  # not contiguous
    bufs = []
    data = pickle.dumps(pack_args(("k", big)), 5, buffer_callback=bufs.append)
    assert len(data) < 300 and len(bufs) == 1
    received = np.frombuffer(bytearray(bufs[0].raw()), np.uint8)  # as the transport does
    back = unpack_args(pickle.loads(data, buffers=[received]))
    assert back[0] == "k" and np.array_equal(back[1], big)
    assert np.shares_memory(back[1], received)
    back[1][0, 0] = -1.0  # writable


def test_object_arrays_and_plain_arguments_are_left_to_pickle():
    objs = np.array([{"a": 1}], dtype=object)
    for args in ((objs,), (1, "two"), ()):
        assert pack_args(args) is args


def test_envelopes_of_plain_values_only_go_by_marshal_and_come_back_the_same():
    import enum
    import marshal

    class E(enum.IntEnum):
        A = 1

    plain = [(1, 2.5, "s", b"b", None, True, -(2**80)), ((1, (2, ("x",))),), (), ((), ())]
    for env in plain:
        assert _plain(env, 3)
        back = marshal.loads(marshal.dumps(env, 2))
        assert back == env and repr(back) == repr(env)
    other = [(np.float64(1.0),), (np.int64(1),), (E.A,), ([1],), ({},), ({1},), (1j,),
             (bytearray(b"x"),), (object(),), ((((((1,),),),),),), ("s", (1, [2]))]
    for env in other:
        assert not _plain(env, 3), env


def test_an_elements_record_keeps_its_sequence_numbers_as_numbers_when_saved():
    """The next number from each sender is kept in a list of one (changed in place); what
    migrates and what a checkpoint saves are the numbers, as before."""
    from shoal.runtime.collection import Collection
    from shoal.runtime.slot import Slot

    class Cell(Chare):
        pass

    coll = Collection(3, "array", Cell, 1, (4,), "block", 2)
    slot = Slot(coll, (1,))
    slot.expected[(-1, 0)] = [5]
    slot.expected[(3, (2,))] = [1]
    state = pickle.loads(pickle.dumps(slot.pack([])))
    assert state["expected"] == {(-1, 0): 5, (3, (2,)): 1}
    back = Slot(coll, (1,))
    assert back.unpack(state) == []
    assert back.expected == {(-1, 0): [5], (3, (2,)): [1]}
    assert back.next_from((-1, 0)) == 5 and back.next_from((-1, 1)) == 0
    assert slot.expected[(-1, 0)] == [5]  # (packing leaves the element's own record be)


def test_a_chares_proxy_is_kept_in_its_dict_and_left_out_of_its_state():
    from shoal.runtime.chare import attach
    from shoal.runtime.collection import Collection
    from shoal.runtime.slot import Slot

    coll = Collection(4, "array", _Cell, 1, (3,), "block", 1)
    obj = _Cell.__new__(_Cell)
    attach(obj, Slot(coll, (2,)))
    assert list(obj.__dict__) == ["_slot", "thisProxy"] and obj.thisProxy is coll.proxy
    obj.x = 1
    assert obj.__getstate__() == {"x": 1} and "thisProxy" in obj.__dict__
    del obj.__dict__["thisProxy"]  # (not attached by the runtime: found all the same)
    assert obj.thisProxy is coll.proxy
