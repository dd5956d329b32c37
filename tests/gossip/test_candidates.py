"""The kernel's candidate lists: each node's list holds every entry whose time key is at least
its threshold (``simkernel`` docstring), whatever fills it or selects a window from it."""

import numpy as np
import pytest

from shoal.gossip import simkernel
from shoal.gossip.sim import simulate


def lists(phase, row, cap, cand=()):
    """Node 0's state for the list functions: its versions ``row`` of nodes with ``phase``,
    its list ``cand`` of ``cap`` entries at most (threshold 0: every known entry belongs in
    it); the others know nothing."""
    n = len(phase)
    phase = np.array(phase)
    ver = np.full((n, n), -1, np.int16)
    ver[0] = row
    cands = np.zeros((n, cap), np.uint16)
    cands[0, :len(cand)] = cand
    ccount = np.zeros(n, np.int32)
    ccount[0] = len(cand)
    return dict(ver=ver, phase=phase, pbin=np.floor(phase * simkernel.SUB).astype(np.uint8),
                cand=cands, ccount=ccount, overflow=np.zeros(n, np.bool_),
                thr=np.zeros(n, np.int64), ssum=np.zeros(n), known=np.zeros(n, np.int64),
                alive=np.ones(n, np.bool_))


def merge(s, idx, vers):
    """Merge a window (nodes ``idx`` at versions ``vers``) into node 0."""
    simkernel._merge(s["ver"], s["phase"], s["pbin"], s["cand"], s["ccount"], s["overflow"],
                     s["thr"], s["ssum"], s["known"], s["alive"], 0,
                     np.array(idx, np.uint16), np.array(vers, np.int16), len(idx))


def window(s, w, u):
    """Select node 0's window of ``w`` entries at unit ``u``; its list afterwards."""
    n = len(s["phase"])
    simkernel._window(s["ver"], s["phase"], s["pbin"], s["cand"], s["ccount"], s["overflow"],
                      s["thr"], 0, w, u, np.empty(n), np.empty(n, np.uint16),
                      np.empty(n, np.uint16))
    return s["cand"][0, :s["ccount"][0]]


def test_a_full_list_keeps_its_entries():
    # three entries of keys above the threshold fill the list; the window's one is older
    s = lists([0.1, 0.3, 0.5, 0.7], [5, 4, 4, -1], cap=3, cand=[0, 1, 2])
    merge(s, [1], [3])
    assert list(s["cand"][0, :s["ccount"][0]]) == [0, 1, 2]
    assert not s["overflow"][0]
    merge(s, [3], [5])  # a new candidate has no room: the list overflows
    assert s["overflow"][0]


def test_exact_select_keeps_the_threshold_bins_other_entries():
    # unit 100: the window of 3 reaches version 3 (older than the age bins: exact select);
    # node 1 shares the key of the window's oldest entry (node 2), node 4's is lower
    s = lists([0.9, 0.50, 0.51, 0.52, 0.10], [100, 3, 3, 3, 3], cap=5, cand=[0, 1, 2, 3, 4])
    cand = window(s, 3, 100)
    assert set(cand[:3]) == {0, 2, 3}
    assert list(cand[3:]) == [1]
    assert s["thr"][0] == 3 * simkernel.SUB + 8


def test_exact_select_after_a_rescan_fills_the_list_exactly():
    # the rescan finds all 8 entries, the list holds 4: the window of 2 (nodes 0 and 3) and
    # the two others of its oldest entry's key (nodes 1 and 2) fill it, without overflow
    phase = [0.9, 0.50, 0.51, 0.52, 0.10, 0.15, 0.20, 0.25]
    s = lists(phase, [100] + [3] * 7, cap=4)
    s["overflow"][0] = True
    cand = window(s, 2, 100)
    assert set(cand[:2]) == {0, 3}
    assert set(cand[2:]) == {1, 2}
    assert not s["overflow"][0]


@pytest.mark.parametrize("kwargs", [dict(nodes=3, window=2, units=60, seed=8),
                                    dict(nodes=10, window=5, units=100, seed=9, dead=8,
                                         dead_at=2.0)])
def test_lists_hold_their_candidates_after_a_run(kwargs, monkeypatch):
    # lists as long as the vectors: full whenever a node's candidates are all the nodes
    states = []
    run = simkernel.run

    def keep(state, cfg, sched, out):
        run(state, cfg, sched, out)
        states.append(state)

    monkeypatch.setattr(simkernel, "run", keep)
    simulate(**kwargs)
    s = states[0]
    assert s.cand.shape[1] == len(s.phase)
    for i, row in enumerate(s.ver):
        keys = row.astype(np.int64) * simkernel.SUB + s.pbin
        want = np.flatnonzero((row >= 0) & (keys >= s.thr[i]))
        assert s.overflow[i] or sorted(s.cand[i, :s.ccount[i]]) == list(want)
