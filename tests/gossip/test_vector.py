import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.gossip.records import state_dtype, wire_dtype
from shoal.gossip.vector import InfoVector

STATE = state_dtype(32)


def test_entry_sizes_match_the_paper():
    assert state_dtype(1024).itemsize == 1024
    # 1 KiB records plus 16 bytes of node index and age: 204 entries ~ 212 kB (Section 4.2)
    assert 204 * wire_dtype(state_dtype(1024)).itemsize == 212160


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 60), data=st.data())
def test_window_holds_exactly_the_youngest(n, data):
    v = InfoVector(n, 0, STATE)
    born = data.draw(st.lists(st.one_of(st.none(), st.floats(-1e6, 0)), min_size=n, max_size=n,
                              unique_by=lambda x: x))
    for j, b in enumerate(born):
        if b is not None:
            v.born[j] = b
    w = data.draw(st.integers(1, n))
    win = v.window(w)
    known = [j for j, b in enumerate(born) if b is not None]
    expect = sorted(known, key=lambda j: -born[j])[:w]
    assert sorted(win.tolist()) == sorted(expect)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 30), data=st.data())
def test_merge_keeps_newest_whatever_the_order(n, data):
    """Deliver the same windows in two orders: the vectors end equal, holding the newest."""
    windows = []
    for _ in range(data.draw(st.integers(1, 8))):
        nodes = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        births = data.draw(st.lists(st.integers(0, 1000), min_size=len(nodes),
                                    max_size=len(nodes)))
        windows.append((np.array(nodes), np.array(births, float)))
    order = data.draw(st.permutations(range(len(windows))))
    now = 2000.0
    results = []
    for seq in (range(len(windows)), order):
        v = InfoVector(n, 0, STATE)
        for k in seq:
            nodes, births = windows[k]
            recs = np.zeros(len(nodes), STATE)
            recs["load"] = births  # the record tells which birth it came with
            v.merge(nodes, now - births, recs, now)
        results.append(v)
    a, b = results
    assert np.array_equal(a.born, b.born)
    for j in range(1, n):
        seen = [bt for nodes, births in windows
                for nd, bt in zip(nodes, births, strict=True) if nd == j]
        if seen:
            assert a.born[j] == max(seen)
            assert a.records["load"][j] == max(seen)
        else:
            assert not np.isfinite(a.born[j])
    assert not np.isfinite(a.born[0])  # never overwrites the own entry from outside


def test_mean_age_excludes_own_entry():
    v = InfoVector(3, 0, STATE)
    v.update_own(np.zeros((), STATE), 10.0)
    v.merge(np.array([1, 2]), np.array([1.0, 3.0]), np.zeros(2, STATE), 10.0)
    assert v.mean_age(12.0) == 4.0


@given(st.lists(st.tuples(st.integers(0, 11), st.integers(1, 20), st.floats(0, 9)),
                max_size=40), st.integers(1, 12))
def test_the_sparse_vector_keeps_and_windows_what_the_dense_one_does(heard, size):
    """The same messages merged into a dense InfoVector (ages against one clock) and a
    SparseVector (birth times) leave the same entries, and the same youngest window when
    births differ."""
    from shoal.gossip.vector import SparseVector

    dense = InfoVector(12, 0, np.dtype([("x", "f8")]))
    sparse = SparseVector(0)
    now = 100.0
    for node, born, x in heard:
        dense.merge(np.array([node]), np.array([now - born]),
                    np.array([(x,)], dense.records.dtype), now)
        sparse.merge([(node, float(born), (x,))])
    known = np.flatnonzero(dense.known)
    assert sorted(sparse.entries) == known.tolist()
    for node in known:
        assert sparse.entries[node][0] == now - (now - dense.born[node])
        assert sparse.record(node) == (dense.records[node]["x"],)
    births = [b for b, _ in sparse.entries.values()]
    if len(set(births)) == len(births):
        assert {n for n, _, _ in sparse.window(size)} == set(dense.window(size).tolist())
