"""The load-balancing database: what the runtime measured since the last balancing step
(Acun14, Section III-A: "the RTS instruments the computation load and the communication
pattern of each unit in a distributed database"; the recent past predicts the near future).

A :class:`LBDatabase` is plain numpy arrays, one entry per object (migratable element) and
per PE, so strategies are pure functions of it (:mod:`shoal.runtime.lb.strategies`), with
no MPI inside: they run the same in the runtime, offline on a dumped database, and in tests.

Objects are numbered ``0..n-1``; ``pe[i]`` is where object ``i`` is now. A PE's capacity is
``speed * share``, where ``share = 1 - background / (wall - slept)`` is the part of the core
the PE had while it wanted it, busy or polling (:func:`core_share`): a core shared with
another process (background time, Acun14 Fig. 16) or running slower (Fig. 17: a node at
0.7x frequency) gets less work. (Of the whole wall time, the background fraction would make
a PE that sleeps at sync points look faster than it is: while it sleeps the other process
has the core without taking anything from it. Of the busy time alone, a mostly idle PE
would look slow: the little background its polling met would count against a few
milliseconds of work.)

Files (:meth:`LBDatabase.save`, :meth:`LBDatabase.read`): one ``.npz`` archive per database,
read with ``numpy.load(path, allow_pickle=False)``; every field is a plain array (no pickle),
``n`` objects, ``npes`` PEs, ``m`` edges:

=============  ==============  ===========================================================
field          dtype, shape    meaning
=============  ==============  ===========================================================
``format``     str, ()         ``"shoal-lb-database"``
``version``    int64, ()       ``2`` (:data:`FORMAT_VERSION`; ``read`` also reads
                               version 1, the same without ``coords``)
``npes``       int64, ()       number of PEs, >= 1
``load``       float64, (n,)   seconds of work of each object since the last step, >= 0
``pe``         int64, (n,)     the PE of each object, in ``[0, npes)``
``migratable`` bool, (n,)      whether the object may move
``size``       int64, (n,)     bytes of the object's packed state, >= 0
``wall``       float64, (npes) seconds since the last step, per PE
``idle``       float64, (npes) idle seconds, per PE
``slept``      float64, (npes) optional: of the idle seconds, those asleep (0 if absent)
``background`` float64, (npes) seconds taken by other work on the core, per PE
``speed``      float64, (npes) relative speed (1.0 nominal), >= 0
``src``        int64, (m,)     sending object of each edge, in ``[0, n)``
``dst``        int64, (m,)     receiving object of each edge, in ``[0, n)``
``messages``   int64, (m,)     messages along the edge, >= 0
``bytes``      int64, (m,)     bytes along the edge, >= 0
``key_cid``    int64, (n,)     optional (the three ``key_`` fields come together): the
                               collection id of each object's key
``key_ndims``  int64, (n,)     length of each key's index tuple; -1: the object has no key
``key_index``  int64, (n, w)   the index tuple in the first ``key_ndims`` columns, zeros
                               after (``w`` = the longest index)
``coords``     float64, (n, d) optional (version 2): the position of each object in space,
                               for ``orb``: its ``lb_position()``, else its array index;
                               ``d`` = the most coordinates of any object, missing ones 0
=============  ==============  ===========================================================

Files without ``key_`` fields read with ``keys = None``, without ``coords`` with
``coords = None``. ``read`` accepts any integer dtype
for the integer fields and any integer or float dtype for the float fields (``read``
converts them to the dtypes above).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from shoal.errors import UsageError

FORMAT_NAME = "shoal-lb-database"
FORMAT_VERSION = 2
READS = (1, 2)  # the versions read accepts


@dataclass
class LBDatabase:
    """Loads, placement and communication of ``n`` objects on ``npes`` PEs.

    Per object: ``load`` (seconds of work in entry methods since the last step; CPU seconds
    with ``cpu_stats``), ``pe`` (its PE now), ``migratable``, ``size`` (bytes of its packed
    state: what moving it costs). Per PE: ``wall`` (seconds since the last step), ``idle``,
    ``background`` (time that was neither entry methods, runtime work nor idle: another
    process on the core) and ``speed`` (relative, 1.0 nominal). Communication between
    objects as edges ``src -> dst`` with ``messages`` and ``bytes`` (one edge per ordered
    pair). ``coords`` (``n x d``, optional) places the objects in space (``orb``).
    ``keys`` names the objects for the runtime (``(collection id, index)``) and is not used
    by strategies.
    """

    load: np.ndarray
    pe: np.ndarray
    npes: int
    migratable: np.ndarray | None = None
    size: np.ndarray | None = None
    wall: np.ndarray | None = None
    idle: np.ndarray | None = None
    slept: np.ndarray | None = None
    background: np.ndarray | None = None
    speed: np.ndarray | None = None
    src: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dst: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    messages: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    keys: list | None = None
    coords: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.load)
        self.load = np.asarray(self.load, np.float64)
        self.pe = np.asarray(self.pe, np.int64)
        if self.pe.shape != (n,):
            raise ValueError(f"pe has {self.pe.shape} entries for {n} objects")
        if n and (self.pe.min() < 0 or self.pe.max() >= self.npes):
            raise ValueError(f"an object's PE lies outside [0, {self.npes})")
        if np.any(self.load < 0) or not np.all(np.isfinite(self.load)):
            raise ValueError("object loads must be finite and >= 0")
        self.migratable = (np.ones(n, bool) if self.migratable is None
                           else np.asarray(self.migratable, bool))
        self.size = (np.zeros(n, np.int64) if self.size is None
                     else np.asarray(self.size, np.int64))
        zeros = np.zeros(self.npes)
        self.wall = zeros.copy() if self.wall is None else np.asarray(self.wall, np.float64)
        self.idle = zeros.copy() if self.idle is None else np.asarray(self.idle, np.float64)
        self.slept = (zeros.copy() if self.slept is None
                      else np.asarray(self.slept, np.float64))
        self.background = (zeros.copy() if self.background is None
                           else np.asarray(self.background, np.float64))
        self.speed = (np.ones(self.npes) if self.speed is None
                      else np.asarray(self.speed, np.float64))
        for name in ("src", "dst", "messages", "bytes"):
            setattr(self, name, np.asarray(getattr(self, name), np.int64))
        if self.coords is not None:
            self.coords = np.asarray(self.coords, np.float64)
            if self.coords.ndim != 2 or self.coords.shape[0] != n:
                raise ValueError(f"coords has shape {self.coords.shape}, not ({n}, d)")
            if not np.all(np.isfinite(self.coords)):
                raise ValueError("object coordinates must be finite")

    @property
    def n(self) -> int:
        return len(self.load)

    def capacity(self) -> np.ndarray:
        """Relative capacity of each PE, ``speed * core_share(wall, slept, background)``,
        normalised to sum to ``npes`` (all ones on identical, unshared PEs)."""
        assert self.wall is not None and self.background is not None and self.speed is not None
        assert self.slept is not None
        cap = self.speed * core_share(self.wall, self.slept, self.background)
        total = cap.sum()
        return cap * (self.npes / total) if total > 0 else np.ones(self.npes)

    def pe_loads(self, placement: np.ndarray | None = None) -> np.ndarray:
        """The object load on each PE under ``placement`` (default: the current one)."""
        where = self.pe if placement is None else placement
        return np.bincount(where, weights=self.load, minlength=self.npes)

    def imbalance(self, placement: np.ndarray | None = None) -> float:
        """max/avg: the longest PE time (load / capacity) over the time of a perfect
        balance (total load / total capacity, the same for every placement); 1.0 is
        perfect balance (a PE of capacity 0 counts as 0 when empty, infinite when not)."""
        loads, cap = self.pe_loads(placement), self.capacity()
        scaled = np.divide(loads, cap, out=np.where(loads > 0, np.inf, 0.0), where=cap > 0)
        avg = self.load.sum() / self.npes  # capacities sum to npes
        return float(scaled.max() / avg) if avg > 0 else 1.0

    def edge_cut(self, placement: np.ndarray | None = None) -> int:
        """Bytes sent between objects on different PEs under ``placement`` (default: the
        current one): the communication that crosses the network."""
        where = self.pe if placement is None else placement
        if self.src.size == 0:
            return 0
        return int(self.bytes[where[self.src] != where[self.dst]].sum())

    def retarget(self, npes: int) -> LBDatabase:
        """The same objects on ``npes`` PEs: the object on PE ``p`` goes to PE
        ``p * npes // self.npes`` (block redistribution: with fewer PEs, neighbouring PEs
        merge, which keeps a block placement's locality; with more, the objects spread over
        every ``npes / self.npes``-th PE and the others start empty). The per-PE arrays keep
        the entries of PEs ``0..min(npes, self.npes) - 1``; new PEs get the defaults (no
        measured time, speed 1)."""
        if npes < 1:
            raise UsageError(f"cannot re-target a database to {npes} PEs: need at least 1")
        assert self.wall is not None and self.idle is not None and self.slept is not None
        assert self.background is not None and self.speed is not None
        keep = min(npes, self.npes)

        def resized(a: np.ndarray, default: float) -> np.ndarray:
            out = np.full(npes, default)
            out[:keep] = a[:keep]
            return out

        return LBDatabase(self.load, self.pe * npes // self.npes, npes,
                          migratable=self.migratable, size=self.size,
                          wall=resized(self.wall, 0.0), idle=resized(self.idle, 0.0),
                          slept=resized(self.slept, 0.0),
                          background=resized(self.background, 0.0),
                          speed=resized(self.speed, 1.0), src=self.src, dst=self.dst,
                          messages=self.messages, bytes=self.bytes, keys=self.keys,
                          coords=self.coords)

    # ----------------------------------------------------------------------- files

    def save(self, path: str | os.PathLike[str], compress: bool = False) -> None:
        """Write the database to ``path`` (exactly that name) as a ``.npz`` archive in the
        format of the module docstring, compressed if ``compress``. The file appears whole
        or not at all (written beside it, then renamed). Raises :class:`UsageError` when
        the file cannot be written."""
        arrays = self._arrays()
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        try:
            with tmp.open("wb") as f:
                if compress:
                    np.savez_compressed(f, allow_pickle=False, **arrays)
                else:
                    np.savez(f, allow_pickle=False, **arrays)
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise UsageError(f"{target}: cannot write the database ({exc.strerror or exc})"
                             ) from None

    @classmethod
    def read(cls, path: str | os.PathLike[str], keys: bool = True) -> LBDatabase:
        """Read a database written by :meth:`save` (``keys=False`` skips building the key
        tuples; not named ``load``, the field of the objects' loads). Raises
        :class:`UsageError` naming the file and the problem for a missing, unreadable or
        corrupt file, another version of the format, or fields that do not fit together
        (lengths, PEs or objects out of range, negative loads)."""
        reader = _Reader(path)
        reader.header()
        npes = reader.scalar("npes")
        if npes < 1:
            reader.fail(f"npes is {npes}, must be at least 1")
        load = reader.array("load", "fiu", "object")
        n = len(load)
        objects = _read_objects(reader, n, npes)
        pes = _read_pes(reader, npes)
        edges = _read_edges(reader, n)
        names = _read_keys(reader, n) if keys else None
        coords = None
        if "coords" in reader.arrays:
            coords = reader.array("coords", "fiu", "object", n, ndim=2)
            reader.within("coords", coords, -np.inf, None, "object")
        return cls(load.astype(np.float64), npes=npes, keys=names, coords=coords, **objects,
                   **pes, **edges)

    def _arrays(self) -> dict[str, np.ndarray]:
        """Every field as the arrays of the file format."""
        out: dict[str, np.ndarray] = {
            "format": np.array(FORMAT_NAME), "version": np.array(FORMAT_VERSION, np.int64),
            "npes": np.array(self.npes, np.int64), "load": self.load, "pe": self.pe,
            "migratable": np.asarray(self.migratable, bool),
            "size": np.asarray(self.size, np.int64)}
        for name in ("wall", "idle", "slept", "background", "speed"):
            out[name] = np.asarray(getattr(self, name), np.float64)
        for name in ("src", "dst", "messages", "bytes"):
            out[name] = np.asarray(getattr(self, name), np.int64)
        if self.keys is not None:
            out.update(_pack_keys(self.keys, self.n))
        if self.coords is not None:
            out["coords"] = np.asarray(self.coords, np.float64)
        return out


# ------------------------------------------------------------------------------- files

_KINDS = {"f": "floating-point", "i": "integer", "u": "integer", "b": "boolean"}


def _pack_keys(keys: list[Any], n: int) -> dict[str, np.ndarray]:
    """``(collection id, index tuple)`` keys (or None) as the three ``key_`` arrays."""
    if len(keys) != n:
        raise ValueError(f"{len(keys)} keys for {n} objects")
    cid = np.zeros(n, np.int64)
    ndims = np.full(n, -1, np.int64)
    for i, key in enumerate(keys):
        if key is not None:
            if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], tuple)):
                raise ValueError(f"key {key!r} of object {i} is not (collection id, index "
                                 f"tuple)")
            cid[i] = key[0]
            ndims[i] = len(key[1])
    index = np.zeros((n, max(int(ndims.max(initial=0)), 0)), np.int64)
    for i, key in enumerate(keys):
        if key is not None and key[1]:
            index[i, :len(key[1])] = key[1]
    return {"key_cid": cid, "key_ndims": ndims, "key_index": index}


class _Reader:
    """The arrays of one ``.npz`` file, with checks that name the file in their errors."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = str(path)
        self.arrays = self._open()

    def fail(self, what: str) -> NoReturn:
        raise UsageError(f"{self.path}: {what}")

    def _open(self) -> dict[str, np.ndarray]:
        try:
            npz = np.load(self.path, allow_pickle=False)
        except FileNotFoundError:
            self.fail("no such file")
        except IsADirectoryError:
            self.fail("is a directory, not a database file")
        except (OSError, ValueError, EOFError, zipfile.BadZipFile):
            self.fail("not a shoal load-balancing database (not an .npz archive, or a "
                      "corrupt one)")
        if not isinstance(npz, np.lib.npyio.NpzFile):
            self.fail("holds a single array (.npy), not a load-balancing database (.npz)")
        arrays = {}
        with npz:
            for name in npz.files:
                try:
                    arrays[name] = npz[name]
                except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                    self.fail(f"field {name!r} cannot be read (corrupt file: {exc})")
        return arrays

    def get(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            self.fail(f"field {name!r} is missing")
        return self.arrays[name]

    def header(self) -> None:
        """The format name and version."""
        tag = self.arrays.get("format")
        if tag is None or tag.shape != () or str(tag) != FORMAT_NAME:
            self.fail(f"not a shoal load-balancing database (no 'format' field saying "
                      f"{FORMAT_NAME!r})")
        version = self.scalar("version")
        if version not in READS:
            newer = " (written by a newer shoal)" if version > FORMAT_VERSION else ""
            self.fail(f"format version {version}{newer}; this shoal reads versions "
                      f"{', '.join(map(str, READS))}")

    def scalar(self, name: str) -> int:
        a = self.get(name)
        if a.shape != () or a.dtype.kind not in "iu":
            self.fail(f"field {name!r} must be one integer, not {a.dtype} of shape {a.shape}")
        return int(a)

    def array(self, name: str, kinds: str, per: str, length: int | None = None,
              ndim: int = 1) -> np.ndarray:
        """Field ``name``: dtype kind in ``kinds``, ``ndim`` dimensions, ``length`` rows
        (one per ``per``; any number when None)."""
        a = self.get(name)
        if a.dtype.kind not in kinds:
            self.fail(f"field {name!r} has dtype {a.dtype}, expected "
                      f"{' or '.join(dict.fromkeys(_KINDS[k] for k in kinds))}")
        if a.ndim != ndim or (length is not None and a.shape[0] != length):
            rows = "" if length is None else f"{length}, "
            self.fail(f"field {name!r} has shape {a.shape}, expected ({rows}...) with "
                      f"{ndim} dimension(s): one row per {per}")
        return a

    def within(self, name: str, a: np.ndarray, low: float, high: float | None,
               per: str) -> None:
        """Every entry of ``a`` in ``[low, high)`` (no upper bound when None) and finite."""
        bad = ~np.isfinite(a) | (a < low)
        if high is not None:
            bad |= a >= high
        if np.any(bad):
            i = int(np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))[0])
            span = f"[{low:g}, {high:g})" if high is not None else f">= {low:g}, finite"
            self.fail(f"field {name!r} has entries outside {span}: {a[i]} for {per} {i}")


def _read_objects(r: _Reader, n: int, npes: int) -> dict[str, np.ndarray]:
    r.within("load", r.get("load"), 0, None, "object")
    pe = r.array("pe", "iu", "object", n)
    r.within("pe", pe, 0, npes, "object")
    size = r.array("size", "iu", "object", n)
    r.within("size", size, 0, None, "object")
    return {"pe": pe.astype(np.int64), "migratable": r.array("migratable", "b", "object", n),
            "size": size.astype(np.int64)}


def _read_pes(r: _Reader, npes: int) -> dict[str, np.ndarray]:
    out = {}
    for name in ("wall", "idle", "slept", "background", "speed"):
        if name == "slept" and name not in r.arrays:
            continue  # optional: 0
        a = r.array(name, "fiu", "PE", npes)
        r.within(name, a, 0 if name == "speed" else -np.inf, None, "PE")
        out[name] = a.astype(np.float64)
    return out


def _read_edges(r: _Reader, n: int) -> dict[str, np.ndarray]:
    m = len(r.array("src", "iu", "edge"))
    out = {}
    for name in ("src", "dst", "messages", "bytes"):
        a = r.array(name, "iu", "edge (as many as 'src')", m)
        r.within(name, a, 0, n if name in ("src", "dst") else None, "edge")
        out[name] = a.astype(np.int64)
    return out


def _read_keys(r: _Reader, n: int) -> list[Any] | None:
    """The keys, or None when the file has none."""
    present = [name for name in ("key_cid", "key_ndims", "key_index") if name in r.arrays]
    if not present:
        return None
    cid = r.array("key_cid", "iu", "object", n)
    ndims = r.array("key_ndims", "iu", "object", n)
    index = r.array("key_index", "iu", "object", n, ndim=2)
    r.within("key_ndims", ndims, -1, index.shape[1] + 1, "object")
    rows = index.tolist()
    return [None if d < 0 else (c, tuple(row[:d]))
            for c, d, row in zip(cid.tolist(), ndims.tolist(), rows, strict=True)]


def core_share(wall: Any, slept: Any, background: Any) -> Any:
    """Of the time a PE wanted its core (``wall - slept``: working or polling), the share
    it had: ``1 - background / (wall - slept)``, within ``[0.05, 1]``; 1 when it slept
    throughout. Arrays or floats."""
    wanted = np.asarray(wall, np.float64) - np.asarray(slept, np.float64)
    bg = np.asarray(background, np.float64)
    share = 1.0 - np.clip(np.divide(bg, wanted, out=np.zeros_like(wanted), where=wanted > 0),
                          0.0, 0.95)
    return share if share.ndim else float(share)
