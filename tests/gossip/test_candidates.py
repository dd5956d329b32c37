"""The kernel's candidate lists: each node's list holds every entry whose time key is at least
its threshold (``simkernel`` docstring), whatever fills it or selects a window from it."""

import numpy as np

from shoal.gossip import simkernel


def lists(phase, row, cap, cand=(), thr=0):
    """Node 0's state for the list functions: its versions ``row`` of nodes with ``phase``,
    its list ``cand`` of ``cap`` entries at most, its threshold; the others know nothing."""
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
                thr=np.full(n, thr, np.int64), ssum=np.zeros(n), known=np.zeros(n, np.int64),
                alive=np.ones(n, np.bool_))


def window(s, w, u):
    """Select node 0's window of ``w`` entries at unit ``u``; its list afterwards."""
    n = len(s["phase"])
    simkernel._window(s["ver"], s["phase"], s["pbin"], s["cand"], s["ccount"], s["overflow"],
                      s["thr"], 0, w, u, np.empty(n), np.empty(n, np.uint16),
                      np.empty(n, np.uint16))
    return s["cand"][0, :s["ccount"][0]]


def test_exact_select_keeps_the_threshold_bins_other_entries():
    # unit 100: the window of 3 reaches version 3 (older than the age bins: exact select);
    # node 1 shares the key of the window's oldest entry (node 2), node 4's is lower
    s = lists([0.9, 0.50, 0.51, 0.52, 0.10], [100, 3, 3, 3, 3], cap=5, cand=[0, 1, 2, 3, 4])
    cand = window(s, 3, 100)
    assert set(cand[:3]) == {0, 2, 3}
    assert list(cand[3:]) == [1]
    assert s["thr"][0] == 3 * simkernel.SUB + 8
