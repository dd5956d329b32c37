"""Contention metrics of a mapping (seed 004, Section 3).

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

from shoal.topology.routing import link_loads
from shoal.topology.torus import Torus


def evaluate(torus: Torus, node_of_rank: np.ndarray, src, dst, nbytes,
             routing: str = "adaptive", order=None, half: str = "split") -> dict:
    """Every metric of the messages ``src -> dst`` (ranks) placed by ``node_of_rank``."""
    a, b = node_of_rank[src], node_of_rank[dst]
    load, streams = link_loads(torus, a, b, nbytes, routing, order, half)
    exists = torus.link_exists()
    hops = torus.distance(a, b)
    per_proc = np.bincount(src, weights=hops, minlength=len(node_of_rank))
    partners = np.bincount(src, minlength=len(node_of_rank))
    full = partners == partners.max()
    pair = load.reshape(-1, torus.ndims, 2)
    bidir = _bidirectional(torus, pair)
    s_pair = _bidirectional(torus, streams.reshape(-1, torus.ndims, 2))
    used = load > 0
    n_links = int(exists.sum())
    return {
        "max": float(load.max()),
        "mean": float(load.sum() / n_links) if n_links else 0.0,
        "mean_used": float(load[used].mean()) if used.any() else 0.0,
        "bidir_max": float(bidir.max()),
        "bidir_mean_used": float(bidir[bidir > 0].mean()) if (bidir > 0).any() else 0.0,
        "streams_max": float(streams.max()),
        "streams_mean_used": float(streams[streams > 0].mean()) if used.any() else 0.0,
        "streams_bidir_max": float(s_pair.max()),
        "hop_bytes": float(np.sum(hops * np.asarray(nbytes, float))),
        "dilation": float(hops.mean()) if len(hops) else 0.0,
        "per_process": float(per_proc[full].min()),
        "per_process_median": float(np.median(per_proc)),
    }


def _bidirectional(torus: Torus, per_node_dim_dir: np.ndarray) -> np.ndarray:
    """Load of each physical link: a node's positive link plus its neighbour's negative."""
    out = []
    co = torus.coords(np.arange(torus.nodes))
    for d in range(torus.ndims):
        has = np.ones(torus.nodes, bool) if torus.wrap[d] else co[:, d] < torus.dims[d] - 1
        shift = np.zeros(torus.ndims, int)
        shift[d] = 1
        nxt = torus.node(co[has] + shift)
        out.append(per_node_dim_dir[has, d, 1] + per_node_dim_dir[nxt, d, 0])
    return np.concatenate(out)
