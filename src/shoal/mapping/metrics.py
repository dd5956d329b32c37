"""Contention metrics of a mapping (Balaji11, Section 3).

From the link loads of all messages: the maximum and the means (over all links, over used
links) per directed link and per bidirectional link (the two directions summed), in bytes
and in streams; hop-bytes (sum of bytes x hops) and the average dilation (hops per message).

The paper's per-process estimate (Section 3.2, "for completely symmetric communication
patterns ... it is sufficient to evaluate the contention caused by one process") counts the
link traversals of one process's messages, the sum of their hops. Which process is "one
process" matters, and the paper's numbers fix it:

- ``per_process``: the fewest traversals among the processes with a full set of partners
  (not on the border of the logical grid). In the worked example (128x128 grid, 8-neighbour
  stencil, 8x16x32 torus, 4 cores) this is a core whose row neighbours share its node, and
  it gives the paper's 24 for TXYZ (3 neighbours above x 4 hops + 3 below x 4 hops) and 6 for
  TZXY (3 x 1 + 3 x 1): the paper treats the row neighbours as free ("no link contention").
- ``per_process_median``: the median over all processes; a core at the edge of its node
  pays one more hop to its row neighbour and its diagonals, giving 27 and 9.

Neither reproduces the paper's "about 10.5" for XYZT: both give 12 there.
"""

from __future__ import annotations

import numpy as np

from shoal.topology.routing import Router
from shoal.topology.torus import Torus


def evaluate(torus: Torus, node_of_rank: np.ndarray, src, dst, nbytes,
             routing: str = "adaptive", order=None, half: str = "split") -> dict:
    """Every metric of the messages ``src -> dst`` (ranks) placed by ``node_of_rank``."""
    return Evaluator(torus, src, dst, nbytes, routing, order, half)(node_of_rank)


class Evaluator:
    """The metrics of one pattern (messages ``src -> dst`` of ``nbytes``) under any number
    of mappings: what does not depend on the mapping (the torus's links, the partners of
    each process, the routing's flow patterns and their spectra) is computed once."""

    def __init__(self, torus: Torus, src, dst, nbytes, routing: str = "adaptive",
                 order=None, half: str = "split"):
        self.torus = torus
        self.src, self.dst = np.asarray(src), np.asarray(dst)
        self.nbytes = np.broadcast_to(np.asarray(nbytes, float), self.src.shape)
        self.router = Router(torus, routing, order, half)
        self.n_links = torus.directed_links()
        self._pairs = _link_pairs(torus)

    def __call__(self, node_of_rank: np.ndarray) -> dict:
        src = self.src
        load, streams, hops = self.router.loads(node_of_rank[src], node_of_rank[self.dst],
                                                self.nbytes)
        nprocs = len(node_of_rank)
        per_proc = np.bincount(src, weights=hops, minlength=nprocs)
        partners = np.bincount(src, minlength=nprocs)
        full = partners == (partners.max() if len(partners) else 0)
        pos, neg = self._pairs
        bidir = load[pos] + load[neg]
        s_pair = streams[pos] + streams[neg]
        used = load > 0
        return {
            "max": float(load.max()) if len(load) else 0.0,
            "mean": float(load.sum() / self.n_links) if self.n_links else 0.0,
            "mean_used": float(load[used].mean()) if used.any() else 0.0,
            "bidir_max": float(bidir.max()) if len(bidir) else 0.0,
            "bidir_mean_used": float(bidir[bidir > 0].mean()) if (bidir > 0).any() else 0.0,
            "streams_max": float(streams.max()) if len(streams) else 0.0,
            "streams_mean_used": float(streams[streams > 0].mean()) if used.any() else 0.0,
            "streams_bidir_max": float(s_pair.max()) if len(s_pair) else 0.0,
            "hop_bytes": float(np.dot(hops, self.nbytes)),
            "dilation": float(hops.mean()) if len(hops) else 0.0,
            "per_process": float(per_proc[full].min()),
            "per_process_median": float(np.median(per_proc)),
        }


def _link_pairs(torus: Torus) -> tuple[np.ndarray, np.ndarray]:
    """The two directed links of each physical link: a node's positive link and its
    neighbour's negative one (link ids)."""
    pos, neg = [], []
    co = torus.coords(np.arange(torus.nodes))
    for d in range(torus.ndims):
        has = np.ones(torus.nodes, bool) if torus.wrap[d] else co[:, d] < torus.dims[d] - 1
        shift = np.zeros(torus.ndims, int)
        shift[d] = 1
        nodes = np.flatnonzero(has)
        nxt = torus.node(co[has] + shift)
        pos.append((nodes * torus.ndims + d) * 2 + 1)
        neg.append((nxt * torus.ndims + d) * 2)
    return np.concatenate(pos), np.concatenate(neg)
