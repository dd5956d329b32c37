"""The on-disk format of a checkpoint (seed 002, Section III-B: chare-based checkpoints, so a
restart does not depend on the number of PEs).

A checkpoint is a directory::

    PATH/manifest.json          the commit record, replaced by an atomic rename
    PATH/g000003/               the generation it names
        pe-00000.pkl .bin .idx  PE 0's shard: its elements, one pickle record each
        pe-00001.pkl .bin .idx  ... one shard per PE, written by that PE in parallel
        main.pkl .bin .idx      the collections, the ``state`` given by ``main``, the
                                collections waiting at an AtSync point

A shard is three files. ``.pkl`` holds pickle (protocol 5) records one after another;
every buffer of at least ``OOB_MIN`` bytes a record holds (numpy arrays, bytes-likes) leaves
the pickle and is written raw, from its own memory, into ``.bin``; ``.idx`` is the pickled
list of records: ``(key, pkl offset, pkl length, bin offset, buffer lengths)``. Reading a
record is two ``pread``\\ s, and its arrays are rebuilt on the buffer they were read into
(no copy on either side).

``manifest.json`` says the format (``FORMAT``), the shoal version, the generation, the PE
count, the collections, and the size and sha256 of every file. It is written last:
a generation is written under ``gNNNNNN.tmp``, every file is fsync'ed, the directory is
renamed, then the manifest is written to a temporary file and renamed over the old one
(POSIX rename is atomic), and only then is the previous generation removed. A crash at any
moment leaves the previous complete checkpoint readable. A missing, partial, corrupted
(size or sha256) or version-mismatched checkpoint is refused with a
:class:`~shoal.errors.CheckpointError` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from shoal._version import __version__
from shoal.errors import CheckpointError

FORMAT = 3  # bumped whenever what a record holds changes (Slot.pack, the manifest)
MANIFEST = "manifest.json"
OOB_MIN = 4096  # bytes: smaller buffers stay inside their record's pickle
CHUNK = 16 << 20  # bytes per read or hash step when a file is verified or read whole

# an index entry: (key, pkl offset, pkl length, bin offset, lengths of the raw buffers)
Entry = tuple[Any, int, int, int, tuple[int, ...]]


class ShardWriter:
    """Write records ``name.pkl``/``.bin`` into ``directory``; :meth:`close` writes the
    index, fsyncs and returns each file's size and sha256 (computed as it was written).
    ``directory=None``: the shard is kept in memory (an in-memory checkpoint, the same
    records), :meth:`image` gives it."""

    def __init__(self, directory: Path | None, name: str):
        self.dir = directory
        self.name = name
        self.pkl = _Out(None if directory is None else directory / f"{name}.pkl")
        self.bin = _Out(None if directory is None else directory / f"{name}.bin")
        self.entries: list[Entry] = []
        self._bufs: list[memoryview] = []

    def _callback(self, buf: pickle.PickleBuffer) -> bool:
        raw = buf.raw()
        if raw.nbytes < OOB_MIN:
            return True  # in-band
        self._bufs.append(raw)
        return False

    def add(self, key: Any, obj: Any) -> int:
        """Write one record; returns its bytes (pickle and raw buffers)."""
        self._bufs = []
        data = pickle.dumps(obj, 5, buffer_callback=self._callback)
        pkl_off, bin_off = self.pkl.size, self.bin.size
        self.pkl.write(data)
        for raw in self._bufs:
            self.bin.write(raw)
        lens = tuple(raw.nbytes for raw in self._bufs)
        self._bufs = []
        self.entries.append((key, pkl_off, len(data), bin_off, lens))
        return len(data) + sum(lens)

    def image(self) -> Image:
        """The shard kept in memory: its index and its two buffers."""
        return Image(self.name, self.entries, bytes(self.pkl.mem), bytes(self.bin.mem))

    def close(self) -> dict[str, dict[str, Any]]:
        assert self.dir is not None
        idx = _Out(self.dir / f"{self.name}.idx")
        idx.write(pickle.dumps(self.entries, 5))
        return {f"{self.name}.{ext}": out.close()
                for ext, out in (("pkl", self.pkl), ("bin", self.bin), ("idx", idx))}

    def abandon(self) -> None:
        """Close the files after a failure (the generation is removed as a whole)."""
        for out in (self.pkl, self.bin):
            if out.fd >= 0:
                os.close(out.fd)
                out.fd = -1


def _hasher() -> ThreadPoolExecutor:
    """The thread that hashes a file's chunks while the next one is read (both release the
    GIL: the hash costs no time of its own while the disk is the limit)."""
    global _HASHER
    if _HASHER is None:
        _HASHER = ThreadPoolExecutor(1, thread_name_prefix="shoal-sha256")
    return _HASHER


_HASHER: ThreadPoolExecutor | None = None


class _Out:
    """A file written sequentially, hashed on the way (``path=None``: a buffer in memory,
    not hashed)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.mem = bytearray()
        self.fd = -1 if path is None else os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                                  0o644)
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        if self.fd < 0:
            self.mem += view
            self.size += len(view)
            return
        # hashed here, then written: hashing in a thread while the kernel copied the same
        # buffer was slower (512 MiB in 16 MiB buffers: 390-560 MB/s against 670-710)
        self.sha.update(view)
        done = 0
        while done < len(view):
            done += os.write(self.fd, view[done:])
        self.size += len(view)

    def close(self) -> dict[str, Any]:
        assert self.path is not None
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        return {"bytes": self.size, "sha256": self.sha.hexdigest()}


class Image(NamedTuple):
    """A shard kept in memory (double in-memory checkpoint): what the three files hold."""

    name: str
    entries: list[Entry]
    pkl: bytes | bytearray
    bin: bytes | bytearray

    def shard(self) -> Shard:
        """Its records, read as those of a shard on disk."""
        return Shard.from_image(self)

    def subset(self, picks: list[int]) -> Image:
        """An image of the records ``entries[k]`` for ``k`` in ``picks`` only, in new
        (writable) buffers: what one PE needs of this shard (an in-job recovery)."""
        pkl, raw = memoryview(self.pkl), memoryview(self.bin)
        entries: list[Entry] = []
        pkls, bins = [], []
        pkl_at = bin_at = 0
        for k in picks:
            key, pkl_off, pkl_len, bin_off, lens = self.entries[k]
            size = sum(lens)
            entries.append((key, pkl_at, pkl_len, bin_at, lens))
            pkls.append(pkl[pkl_off:pkl_off + pkl_len])
            bins.append(raw[bin_off:bin_off + size])
            pkl_at += pkl_len
            bin_at += size
        return Image(self.name, entries, bytearray().join(pkls), bytearray().join(bins))


class Shard:
    """The records of one shard of a checkpoint that :func:`read_manifest` accepted.
    ``whole=True`` reads ``.pkl`` and ``.bin`` into memory at once, checking their sha256
    on the way (for a PE that needs every record); otherwise records are read one by one
    with ``pread`` and :meth:`verify` checks the files (the PE that verifies them)."""

    def __init__(self, gen: Path, name: str, files: dict[str, dict[str, Any]],
                 whole: bool = False):
        self.gen = gen
        self.name = name
        self.files = files
        idx = self._read_whole("idx", verify=True)
        try:
            self.entries: list[Entry] = pickle.loads(idx.data)
        except Exception as exc:
            raise CheckpointError(f"{gen / (name + '.idx')}: cannot be read ({exc})") from None
        self.pkl: np.ndarray | None = None
        self.bin: np.ndarray | None = None
        if whole:
            self.pkl = self._read_whole("pkl", verify=True)
            self.bin = self._read_whole("bin", verify=True)

    @classmethod
    def from_image(cls, image: Image) -> Shard:
        shard = cls.__new__(cls)
        shard.gen = Path("<memory>")
        shard.name = image.name
        shard.files = {}
        shard.entries = image.entries
        # the restored elements' arrays live on the raw buffers: read-only ones (bytes, as
        # the store keeps them) are copied, writable ones (a subset's) used as they are
        shard.pkl = np.frombuffer(image.pkl, np.uint8)
        raw = np.frombuffer(image.bin, np.uint8)
        shard.bin = raw if raw.flags.writeable else raw.copy()
        return shard

    def _path(self, ext: str) -> Path:
        return self.gen / f"{self.name}.{ext}"

    def _read_whole(self, ext: str, verify: bool) -> np.ndarray:
        """The file in one buffer, its sha256 checked chunk by chunk as it is read."""
        path = self._path(ext)
        want = self.files[f"{self.name}.{ext}"]
        buf = np.empty(want["bytes"], np.uint8)
        sha = hashlib.sha256()
        hashing = None  # the previous chunk is hashed while the next one is read
        with open(path, "rb", buffering=0) as f:
            view = buf.data
            done = 0
            while done < len(view):
                n = f.readinto(view[done:done + CHUNK])
                if not n:
                    break
                if hashing is not None:
                    hashing.result()
                if verify:
                    hashing = _hasher().submit(sha.update, view[done:done + n])
                done += n
        if hashing is not None:
            hashing.result()
        if done != len(buf) or (verify and sha.hexdigest() != want["sha256"]):
            raise CheckpointError(f"{path}: corrupted (size or sha256 differs from the "
                                  "manifest); restart from another checkpoint")
        return buf

    def verify(self) -> None:
        """Check the sizes and sha256 of ``.pkl`` and ``.bin`` (streamed, no copy kept)."""
        if not self.files:  # kept in memory: nothing on disk to check
            return
        for ext in ("pkl", "bin"):
            verify_file(self._path(ext), self.files[f"{self.name}.{ext}"])

    def load(self, entry: Entry) -> Any:
        """Unpickle one record, its arrays on buffers read for it (or on the whole file)."""
        _key, pkl_off, pkl_len, bin_off, lens = entry
        try:
            if self.pkl is not None and self.bin is not None:
                data = self.pkl[pkl_off:pkl_off + pkl_len].data
                raw = self.bin[bin_off:bin_off + sum(lens)].data
            else:
                data = _pread(self._path("pkl"), pkl_off, pkl_len).data
                raw = _pread(self._path("bin"), bin_off, sum(lens)).data
            bufs = []
            at = 0
            for n in lens:
                bufs.append(raw[at:at + n])
                at += n
            return pickle.loads(data, buffers=bufs)
        except CheckpointError:
            raise
        except Exception as exc:
            raise CheckpointError(f"{self._path('pkl')}: a record cannot be read ({exc!r}); "
                                  "the checkpoint is corrupted or its classes changed"
                                  ) from None


def _pread(path: Path, offset: int, size: int) -> np.ndarray:
    buf = np.empty(size, np.uint8)
    with open(path, "rb", buffering=0) as f:
        f.seek(offset)
        view = buf.data
        done = 0
        while done < size:
            n = f.readinto(view[done:])
            if not n:
                raise CheckpointError(f"{path}: shorter than its index says (partial file)")
            done += n
    return buf


def verify_file(path: Path, want: dict[str, Any]) -> None:
    """Raise :class:`CheckpointError` unless ``path`` has the size and sha256 ``want``."""
    sha = hashlib.sha256()
    size = 0
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        with open(path, "rb", buffering=0) as f:
            while True:
                n = f.readinto(view)
                if not n:
                    break
                sha.update(view[:n])
                size += n
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror})") from None
    if size != want["bytes"] or sha.hexdigest() != want["sha256"]:
        raise CheckpointError(f"{path}: corrupted ({size} bytes, sha256 {sha.hexdigest()[:12]}; "
                              f"the manifest says {want['bytes']} bytes, "
                              f"{want['sha256'][:12]}); restart from another checkpoint")


# ----------------------------------------------------------------- the manifest
def read_manifest(path: str | os.PathLike[str], verify: bool = False) -> dict[str, Any]:
    """The manifest of checkpoint ``path``, checked: its format and shoal version, and that
    every file it lists exists with its size (``verify=True``: and its sha256)."""
    root = Path(path)
    manifest = _load_manifest(root)
    for rel, want in manifest["files"].items():
        file = root / rel
        try:
            size = file.stat().st_size
        except OSError:
            raise CheckpointError(f"{file}: missing (partial checkpoint)") from None
        if size != want["bytes"]:
            raise CheckpointError(f"{file}: {size} bytes, the manifest says {want['bytes']} "
                                  "(partial or corrupted checkpoint)")
        if verify:
            verify_file(file, want)
    return manifest


def _load_manifest(root: Path) -> dict[str, Any]:
    mpath = root / MANIFEST
    if not root.is_dir():
        raise CheckpointError(f"{root}: no checkpoint there (not a directory)")
    try:
        manifest = json.loads(mpath.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{mpath}: missing; {root} holds no complete checkpoint"
                              ) from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{mpath}: cannot be read ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise CheckpointError(f"{mpath}: checkpoint format {got!r}, this shoal reads format "
                              f"{FORMAT}")
    if manifest.get("shoal") != __version__:
        raise CheckpointError(f"{mpath}: written by shoal {manifest.get('shoal')}, this is "
                              f"shoal {__version__}: restart with the version that wrote it")
    for key in ("generation", "dir", "pes", "files", "collections"):
        if key not in manifest:
            raise CheckpointError(f"{mpath}: no {key!r} field (not a shoal manifest)")
    return manifest


def next_generation(root: Path) -> int:
    """The number of the next generation in ``root`` (1 for a new checkpoint)."""
    try:
        return int(json.loads((root / MANIFEST).read_text())["generation"]) + 1
    except (OSError, ValueError, KeyError, TypeError):
        gens = [int(p.name[1:7]) for p in root.glob("g[0-9]*") if p.name[1:7].isdigit()]
        return max(gens, default=0) + 1


def gen_name(gen: int) -> str:
    return f"g{gen:06d}"


def prepare(root: Path, gen: int) -> Path:
    """Make ``root`` and an empty temporary directory for generation ``gen``."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f"{gen_name(gen)}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


def commit(root: Path, gen: int, tmp: Path, manifest: dict[str, Any]) -> None:
    """Make generation ``gen`` (complete in ``tmp``) the checkpoint of ``root``, then
    remove every other generation."""
    final = root / gen_name(gen)
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    _fsync_dir(root)
    manifest["files"] = {f"{final.name}/{name}": info
                         for name, info in manifest["files"].items()}
    manifest["dir"] = final.name
    manifest["time"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    staged = root / f"{MANIFEST}.tmp"
    with open(staged, "w") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    staged.rename(root / MANIFEST)  # the commit
    _fsync_dir(root)
    for old in root.glob("g[0-9]*"):
        if old.name != final.name:
            shutil.rmtree(old, ignore_errors=True)


def abandon(tmp: Path) -> None:
    """Remove a generation that will not be committed."""
    shutil.rmtree(tmp, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
