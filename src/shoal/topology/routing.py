"""Routing models and link loads (Balaji11, Section 3.1).

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
with the field of the group's volumes over source nodes. A pattern of few links (a
stencil's neighbours) is added as shifted copies of the field, a pattern of many links
(long routes) in Fourier space. :class:`Router` keeps the flow patterns and spectra for
every set of messages it is given, so that ranking many mappings of one pattern computes
each offset group's pattern once.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np

from shoal.errors import UsageError
from shoal.topology.torus import HALF_RING, Torus

ROUTINGS = ("dor", "adaptive", "paths")
MAX_DIMS = 7


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
    load, streams, _ = Router(torus, routing, order, half).loads(src, dst, volume)
    return load, streams


class Router:
    """Link loads of many sets of messages on one torus under one routing model (every
    candidate mapping of ``shoal map``): the tables of offsets, the flow pattern of each
    offset group and the spectra of the long ones are computed once and reused by every
    set (spectra up to :data:`CACHE_BYTES`).

    A group's load is the circular convolution of its source field with its flow pattern:
    a pattern of few links (a stencil's neighbours) is added as shifted copies of the field,
    a pattern of many links (long routes) through the FFT."""

    CACHE_BYTES = 1 << 30
    DIRECT_LINKS = 48  # up to this many links a pattern is added by shifts, not the FFT

    def __init__(self, torus: Torus, routing: str = "adaptive", order: tuple | None = None,
                 half: str = "split"):
        if routing not in ROUTINGS:
            raise UsageError(f"routing must be one of {', '.join(ROUTINGS)}, not {routing!r}")
        if half not in HALF_RING:
            raise UsageError(f"half-ring policy must be one of {', '.join(HALF_RING)}")
        if torus.ndims > MAX_DIMS:
            raise UsageError(f"routes on more than {MAX_DIMS} dimensions are beyond this model")
        self.torus, self.routing, self.half = torus, routing, half
        self.order = _dimension_order(order, torus.ndims)
        self._coords = np.ascontiguousarray(torus.coords(np.arange(torus.nodes)).T,
                                            dtype=np.int32)
        self._shape = torus.dims[::-1]  # fields are indexed [.., z, y, x]: node order in C
        self._axes = tuple(range(1, torus.ndims + 1))
        self._tables = [self._table(n, w) for n, w in zip(torus.dims, torus.wrap, strict=True)]
        self._radix = max(len(t[0]) for t in self._tables)
        if self._radix ** torus.ndims >= 2**62:
            raise UsageError(f"a torus of {torus.ndims} dimensions up to {max(torus.dims)} "
                             f"nodes long is beyond this model: merge or shorten dimensions")
        self._entries: dict[int, list] = {}  # offset key -> the flow pattern's links
        self._spectra: dict[int, list] = {}  # offset key -> its spectra (long patterns)
        self._flows: dict = {}
        self._cached = 0

    def _table(self, size: int, wrap: bool):
        """Per coordinate difference b - a + size - 1 along one dimension: the offset's
        code (its index among the (hops, direction, half-ring) of this dimension) and hops;
        and per code: hops, direction and half-ring."""
        delta = np.arange(-size + 1, size)
        if wrap:
            fwd = np.where(delta < 0, delta + size, delta)
            hops = np.minimum(fwd, size - fwd)
            sign = np.where(fwd <= size - fwd, 1, -1)
            tie = (fwd == size - fwd) & (fwd > 0) & (self.half == "split")
        else:
            hops, sign, tie = np.abs(delta), np.where(delta < 0, -1, 1), np.zeros(len(delta),
                                                                                 bool)
        triples = np.stack([hops, sign, tie.astype(int)], axis=1)
        kinds, code = np.unique(triples, axis=0, return_inverse=True)
        return code.ravel().astype(np.int64), hops.astype(np.int32), kinds

    def loads(self, src, dst, volume=1.0):
        """Bytes and streams per directed link, and the hops of every message."""
        t = self.torus
        src = np.asarray(src).ravel()
        dst = np.asarray(dst).ravel()
        vol = np.broadcast_to(np.asarray(volume, float), src.shape)
        keys = np.zeros(len(src), np.int64)
        total = np.zeros(len(src), np.int32)
        for d, (size, (code, hops, _)) in enumerate(zip(t.dims, self._tables, strict=True)):
            at = self._coords[d][dst] - self._coords[d][src] + (size - 1)
            keys = keys * self._radix + code[at]
            total += hops[at]
        if not total.any():
            return np.zeros(t.nlinks), np.zeros(t.nlinks), total
        groups, gid = _group_ids(keys)
        fields = len(groups) * t.nodes
        at = gid * t.nodes + src
        shape = (len(groups), *self._shape)
        both = np.stack([np.bincount(at, weights=vol, minlength=fields).reshape(shape),
                         np.bincount(at, minlength=fields).reshape(shape)], axis=1)
        direct = np.zeros((2 * t.ndims, 2, *self._shape))  # [link set, bytes | streams]
        spectra = None
        for g, key in enumerate(groups):
            entries = self._pattern(int(key))
            if len(entries) <= self.DIRECT_LINKS:
                for pos, links in entries:
                    moved = np.roll(both[g], pos, axis=self._axes)
                    for link, f in links:
                        direct[link, 0] += f * moved[0]
                        direct[link, 1] += moved[1]
                continue
            if spectra is None:
                spectra = np.zeros((2 * t.ndims, 2, *_rshape(self._shape)), complex)
            f_hat = np.fft.rfftn(both[g], axes=self._axes)
            for link, k_hat in self._spectrum(int(key), entries):
                spectra[link] += f_hat * k_hat
        if spectra is not None:
            direct += np.fft.irfftn(spectra, s=self._shape, axes=tuple(range(2, t.ndims + 2)))
        load, streams = self._links(direct)
        return load, streams, total

    def _pattern(self, key: int) -> list:
        """The flow pattern of an offset group: [(shift, [(link set 2 d + s, fraction), ...])]
        per position relative to the source, the shift in field axes."""
        if key in self._entries:
            return self._entries[key]
        h, s, tie = [], [], []
        for code, (_, _, kinds) in zip(_digits(key, self._radix, self.torus.ndims),
                                       self._tables, strict=True):
            h.append(int(kinds[code, 0]))
            s.append(int(kinds[code, 1]))
            tie.append(bool(kinds[code, 2]))
        if not any(h):
            self._entries[key] = []
            return []
        by_pos: dict[tuple, list] = defaultdict(list)
        for pos, d, sg, f in _group_entries(tuple(h), s, tie, self.routing, self.order,
                                            self._flows, self.torus):
            by_pos[tuple(pos[::-1])].append((2 * d + (sg > 0), f))
        out = list(by_pos.items())
        self._entries[key] = out
        return out

    def _spectrum(self, key: int, entries: list) -> list:
        """The spectra of a long flow pattern per link set: bytes per unit sent, and 1
        where links are used, stacked (cached)."""
        if key in self._spectra:
            return self._spectra[key]
        fields: dict[int, np.ndarray] = {}
        for pos, links in entries:
            at = tuple(p % n for p, n in zip(pos, self._shape, strict=True))
            for link, f in links:
                if link not in fields:
                    fields[link] = np.zeros((2, *self._shape))
                field = fields[link]
                field[(0, *at)] += f
                field[(1, *at)] = 1.0
        out = [(link, np.fft.rfftn(field, axes=self._axes)) for link, field in fields.items()]
        size = sum(k.nbytes for _, k in out)
        if self._cached + size > self.CACHE_BYTES:
            self._spectra.clear()
            self._cached = 0
        self._spectra[key] = out
        self._cached += size
        return out

    def _links(self, fields: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and streams per directed link from the fields per link set."""
        t = self.torus
        flat = fields.reshape(2 * t.ndims, 2, -1)
        load = np.ascontiguousarray(flat[:, 0].T).reshape(-1)  # link (node * D + d) * 2 + s
        streams = np.rint(np.ascontiguousarray(flat[:, 1].T).reshape(-1))
        load[np.abs(load) < 1e-9 * max(1.0, float(np.abs(load).max()))] = 0.0
        return load, streams


def _digits(key: int, radix: int, n: int) -> list[int]:
    """The n base-``radix`` digits of ``key``, most significant (dimension 0) first."""
    out = []
    for _ in range(n):
        key, r = divmod(key, radix)
        out.append(r)
    return out[::-1]


def _rshape(shape: tuple) -> tuple:
    """Shape of the real FFT of an array of ``shape``."""
    return (*shape[:-1], shape[-1] // 2 + 1)


def _group_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (sorted) and each message's index among them: by a table of all
    keys when they are few, else by sorting."""
    top = int(keys.max()) + 1
    if top <= 4 * len(keys) + (1 << 20):
        present = np.bincount(keys, minlength=top) > 0
        groups = np.flatnonzero(present)
        table = np.cumsum(present) - 1
        return groups, table[keys]
    groups, gid = np.unique(keys, return_inverse=True)
    return groups, gid.ravel()


def _dimension_order(order: tuple | None, ndims: int) -> tuple:
    """The order of dimension-ordered routing: the natural one by default."""
    order = tuple(range(ndims)) if order is None else tuple(order)
    if sorted(order) != list(range(ndims)):
        raise UsageError(f"a dimension order names each of the {ndims} dimensions once")
    return order


def _group_entries(h, s, tie, routing, order, cache, torus):
    """The links (relative to the source, signed) and fractions of one offset group; each
    link once. Half-ring dimensions (``tie``): dimension-ordered routing sends half of the
    traffic each way; the all-paths split counts the paths both ways (the same halves);
    the adaptive split treats both directions as productive links at every node where the
    dimension has not been entered yet."""
    dims = len(h)
    if routing == "adaptive":  # computed for positive directions, then mirrored
        key = (h, tuple(tie), routing)
        if key not in cache:
            cache[key] = _adaptive_signed(h, (1,) * dims, tie)
        sign = [1 if tie[e] else int(s[e]) for e in range(dims)]
        return _merge([(tuple(x * m for x, m in zip(pos, sign, strict=True)), d,
                        sg * sign[d], f) for pos, d, sg, f in cache[key]], torus)
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
    sizes = [n if w else 0 for n, w in zip(torus.dims, torus.wrap, strict=True)]
    merged: dict = defaultdict(float)
    for pos, d, sg, f in entries:
        p = tuple(x % n if n else x for x, n in zip(pos, sizes, strict=True))
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
