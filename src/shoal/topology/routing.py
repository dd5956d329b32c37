"""Routing models and link loads (seed 004, Section 3.1).

- ``dor``: "for small messages, BG/P uses a static routing algorithm in a dimension-wise
  order (e.g., first along the X-axis, then the Y-axis, and finally the Z-axis)"; the order
  is configurable.
- ``adaptive``: "for large messages ... at each hop, the adaptive routing algorithm considers
  only the outgoing links that reduce the hop count to the destination node"; modelled, as
  the paper does, by assuming "the data packets in a large message are split equally on all
  possible paths at each hop": at every node the remaining traffic divides equally among
  the dimensions that still need hops.
- ``paths``: the traffic divides equally among all minimal paths (a path through a node with
  few ways on counts as much as any other; this differs from ``adaptive``).

A distance of exactly half a torus ring is minimal both ways: ``half="split"`` sends half of
the traffic each way, ``half="positive"`` takes the positive direction only.

Loads come in bytes (fractional under splitting) and in streams: a message counts 1 on every
link it may use (the paper's footnote 3, "how many communication streams are going over a
link"). The computation is vectorised: messages with the same offset (hops, directions) share
one relative flow pattern; the load it causes is the circular convolution of that pattern
with the field of the group's volumes over source nodes, summed over groups in Fourier space
(one FFT per group and link direction, whatever the number of messages or of links per
route).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np

from shoal.errors import UsageError
from shoal.topology.torus import Torus

ROUTINGS = ("dor", "adaptive", "paths")


def _flows(hops: tuple, routing: str, order: tuple) -> list[tuple[tuple, int, float]]:
    """Relative flow of one unit from offset 0 to ``hops`` (all positive) under ``dor`` or
    ``paths``: entries (steps taken per dimension before the link, dimension of the link,
    fraction). The adaptive split is :func:`_adaptive_signed`."""
    dims = len(hops)
    out = []
    if routing == "dor":
        k = [0] * dims
        for d in order:
            for _ in range(hops[d]):
                out.append((tuple(k), d, 1.0))
                k[d] += 1
        return out
    box = [range(h + 1) for h in hops]

    def count(a: tuple) -> int:  # minimal paths over a box of sides a
        return math.factorial(sum(a)) // math.prod(math.factorial(x) for x in a)

    total = count(hops)
    for k in itertools.product(*box):
        for d in range(dims):
            if k[d] < hops[d]:
                rest = tuple(h - x - (1 if e == d else 0)
                             for e, (h, x) in enumerate(zip(hops, k, strict=True)))
                out.append((k, d, count(k) * count(rest) / total))
    return out


def link_loads(torus: Torus, src, dst, volume=1.0, routing: str = "adaptive",
               order: tuple | None = None, half: str = "split"):
    """Bytes and streams per directed link (arrays of ``torus.nlinks``) for messages from
    node ``src[i]`` to node ``dst[i]`` of ``volume[i]`` bytes."""
    if routing not in ROUTINGS:
        raise UsageError(f"routing must be one of {', '.join(ROUTINGS)}, not {routing!r}")
    order = _dimension_order(order, torus.ndims)
    src = np.asarray(src).ravel()
    dst = np.asarray(dst).ravel()
    vol = np.broadcast_to(np.asarray(volume, float), src.shape)
    moving = src != dst
    src, dst, vol = src[moving], dst[moving], vol[moving]
    if len(src) == 0:
        return np.zeros(torus.nlinks), np.zeros(torus.nlinks)
    hops, sign, tie = torus.offsets(src, dst, half)
    if half == "positive":
        tie = np.zeros_like(tie)
    groups, first, inverse = np.unique(_offset_keys(hops, sign, tie), return_index=True,
                                       return_inverse=True)
    spec_load = np.zeros((torus.ndims, 2, *_rshape(torus.dims)), complex)
    spec_streams = np.zeros_like(spec_load)
    cache = {}
    for g in range(len(groups)):
        i = first[g]
        h = tuple(int(x) for x in hops[i])
        entries = _group_entries(h, sign[i], tie[i], routing, order, cache, torus)
        members = inverse == g
        _add_group(spec_load, spec_streams, entries, src[members], vol[members], torus)
    return _loads_from_spectra(spec_load, spec_streams, torus)


def _dimension_order(order: tuple | None, ndims: int) -> tuple:
    """The order of dimension-ordered routing: the natural one by default."""
    order = tuple(range(ndims)) if order is None else tuple(order)
    if sorted(order) != list(range(ndims)):
        raise UsageError(f"a dimension order names each of the {ndims} dimensions once")
    return order


def _offset_keys(hops: np.ndarray, sign: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """One integer per message naming its offset group: 8 bits per dimension (hops,
    direction, half-ring)."""
    ndims = hops.shape[1]
    if int(hops.max()) >= 64 or ndims > 7:
        raise UsageError("routes of 64 hops or more per dimension, or more than 7 "
                         "dimensions, are beyond this model")
    code = hops.astype(np.int64) | ((sign > 0).astype(np.int64) << 6) | (
        tie.astype(np.int64) << 7)
    key = np.zeros(len(hops), np.int64)
    for d in range(ndims):
        key |= code[:, d] << (8 * d)
    return key


def _add_group(spec_load, spec_streams, entries, src, vol, torus: Torus) -> None:
    """Add to the spectra (per link dimension and direction) the loads of one offset group:
    its messages from nodes ``src`` of volumes ``vol`` follow the flow pattern ``entries``."""
    shape = torus.dims
    # the group's messages as fields over source nodes (first dimension fastest)
    vol_field = np.bincount(src, weights=vol, minlength=torus.nodes)
    count_field = np.bincount(src, minlength=torus.nodes).astype(float)
    v_hat = np.fft.rfftn(vol_field.reshape(shape, order="F"))
    c_hat = np.fft.rfftn(count_field.reshape(shape, order="F"))
    for d in range(torus.ndims):
        for s_idx, sg in enumerate((-1, 1)):
            sel = [e for e in entries if e[1] == d and e[2] == sg]
            if not sel:
                continue
            kern, ones = _pattern_fields(sel, shape)
            spec_load[d, s_idx] += v_hat * np.fft.rfftn(kern)
            spec_streams[d, s_idx] += c_hat * np.fft.rfftn(ones)


def _pattern_fields(entries, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The flow pattern of one link dimension and direction as fields over relative
    positions: the fraction of the traffic, and 1 where the links are used."""
    kern = np.zeros(shape)
    ones = np.zeros(shape)
    for pos, _, _, f in entries:
        at = tuple(p % n for p, n in zip(pos, shape, strict=True))
        kern[at] += f
        ones[at] = 1.0
    return kern, ones


def _loads_from_spectra(spec_load, spec_streams, torus: Torus) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and streams per directed link from the summed spectra."""
    ndims, shape, nodes = torus.ndims, torus.dims, torus.nodes
    load = np.zeros(torus.nlinks)
    streams = np.zeros(torus.nlinks)
    axes = tuple(range(ndims))
    # the load of link (node, d, s) is the circular convolution of the source fields with
    # the group's flow pattern: exact on a torus, and on a mesh minimal routes never wrap
    for d in range(ndims):
        for s_idx in range(2):
            links = (np.arange(nodes) * ndims + d) * 2 + s_idx
            part = np.fft.irfftn(spec_load[d, s_idx], s=shape, axes=axes).reshape(-1, order="F")
            load[links] = part
            cnt = np.fft.irfftn(spec_streams[d, s_idx], s=shape, axes=axes).reshape(-1, order="F")
            streams[links] = np.rint(cnt)
    load[np.abs(load) < 1e-9 * max(1.0, float(np.abs(load).max()))] = 0.0
    return load, streams


def _rshape(shape: tuple) -> tuple:
    """Shape of the real FFT of an array of ``shape``."""
    return (*shape[:-1], shape[-1] // 2 + 1)


def _group_entries(h, s, tie, routing, order, cache, torus):
    """The links (relative to the source, signed) and fractions of one offset group; each
    link once. Half-ring dimensions (``tie``): dimension-ordered routing sends half of the
    traffic each way; the all-paths split counts the paths both ways (the same halves);
    the adaptive split treats both directions as productive links at every node where the
    dimension has not been entered yet."""
    dims = len(h)
    if routing == "adaptive":
        return _merge(_adaptive_signed(h, s, tie), torus)
    variants = list(itertools.product(*[(1, -1) if tie[d] else (int(s[d]),)
                                        for d in range(dims)]))
    key = (h, routing, order)
    if key not in cache:
        cache[key] = _flows(h, routing, order)
    share = 1.0 / len(variants)
    return _merge([(tuple(int(var[e]) * k[e] for e in range(dims)), d, int(var[d]), f * share)
                   for var in variants for k, d, f in cache[key]], torus)


def _merge(entries, torus):
    """One entry per physical link: both ways round half a ring, offsets +L/2 and -L/2 are
    the same node."""
    size = np.array(torus.dims)
    wrap = np.array(torus.wrap)
    merged = defaultdict(float)
    for pos, d, sg, f in entries:
        p = tuple(int(x) for x in np.where(wrap, np.array(pos) % size, pos))
        merged[(p, d, sg)] += f
    return [(pos, d, sg, f) for (pos, d, sg), f in merged.items()]


def _adaptive_signed(h, s, tie):
    """The adaptive split: at every node the traffic divides equally among the links that
    shorten the route. States are signed positions; a half-ring (``tie``) dimension not yet
    entered offers two productive links."""
    dims = len(h)
    flow = defaultdict(float)
    flow[(0,) * dims] = 1.0
    out = defaultdict(float)
    for _ in range(sum(h)):
        nxt = defaultdict(float)
        for pos, f in flow.items():
            links = []
            for d in range(dims):
                done = abs(pos[d])
                if done >= h[d]:
                    continue
                if tie[d] and done == 0:
                    links += [(d, 1), (d, -1)]
                else:
                    links.append((d, int(np.sign(pos[d])) if done else int(s[d])))
            for d, sg in links:
                out[(pos, d, sg)] += f / len(links)
                step = (*pos[:d], pos[d] + sg, *pos[d + 1:])
                nxt[step] += f / len(links)
        flow = nxt
    return [(pos, d, sg, f) for (pos, d, sg), f in out.items()]
