"""The on-disk format of a checkpoint (Acun14, Section III-B: chare-based checkpoints, so a
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

import errno
import fcntl
import hashlib
import json
import mmap
import os
import pickle
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from shoal._version import __version__
from shoal.errors import CheckpointError

FORMAT = 4  # bumped whenever what a record holds changes (Slot.pack, the manifest)
MANIFEST = "manifest.json"
OOB_MIN = 4096  # bytes: smaller buffers stay inside their record's pickle
ALIGN = 4096  # bytes: address, file offset and length unit of direct I/O (block sizes <= 4 KiB)
BLOCK = 2 << 20  # bytes per staged write or read (a multiple of ALIGN)
DEPTH = 3  # blocks in flight per file: the caller fills or hashes one, the I/O threads the others
IO_THREADS = 2  # transfers under way at once per process
O_DIRECT = getattr(os, "O_DIRECT", 0)  # 0 where the system has no direct I/O

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
        self.pkl: _File | _Memory
        self.bin: _File | _Memory
        if directory is None:
            self.pkl, self.bin = _Memory(), _Memory()
        else:
            self.pkl = _File(directory / f"{name}.pkl")
            try:
                self.bin = _File(directory / f"{name}.bin")
            except BaseException:
                self.pkl.abandon()
                raise
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
        assert isinstance(self.pkl, _Memory) and isinstance(self.bin, _Memory)
        return Image(self.name, self.entries, bytes(self.pkl.mem), bytes(self.bin.mem))

    def close(self) -> dict[str, dict[str, Any]]:
        assert self.dir is not None and isinstance(self.pkl, _File)
        assert isinstance(self.bin, _File)
        idx = _File(self.dir / f"{self.name}.idx")
        idx.write(pickle.dumps(self.entries, 5))
        return {f"{self.name}.{ext}": out.close()
                for ext, out in (("pkl", self.pkl), ("bin", self.bin), ("idx", idx))}

    def abandon(self) -> None:
        """Close the files after a failure (the generation is removed as a whole)."""
        for out in (self.pkl, self.bin):
            if isinstance(out, _File):
                out.abandon()


# ----------------------------------------------------------------- file I/O
# Writing a file costs the copy of every byte and its sha256. Through the page cache the
# copy lands in pages the kernel allocates for it, which cost as much as the hash or far
# more (on a virtual machine each newly used page can fault in the host: 512 MiB took
# 0.12-1.3 s of system time). Direct I/O (``O_DIRECT``) writes from the caller's memory
# instead, which must be aligned: buffers are copied into a few aligned staging blocks,
# reused from file to file; each block is hashed by the caller while an I/O thread writes
# the previous one. Reads go straight into the buffer the records are rebuilt on, two under
# way at once while the caller hashes the block before them. A file system that refuses
# direct I/O (EINVAL at open or on a write) is used through the page cache, the same way.

_IO: ThreadPoolExecutor | None = None
_SPARE: list[memoryview] = []  # staging blocks of closed files (their pages stay mapped)


def _io() -> ThreadPoolExecutor:
    """The threads that do the other half of each pipeline: they write blocks while the
    caller fills and hashes the next, or read blocks while the caller hashes the one before
    (``os.pwrite``, ``os.preadv`` and ``sha256.update`` of large buffers release the GIL)."""
    global _IO
    if _IO is None:
        _IO = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="shoal-io")
    return _IO


def _forget_io() -> None:
    """In a child made by ``fork``: the I/O threads are not there, start others when needed."""
    global _IO
    _IO = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_io)


def _block() -> memoryview:
    return _SPARE.pop() if _SPARE else memoryview(mmap.mmap(-1, BLOCK))  # page-aligned


def _round(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _open(path: Path, flags: int) -> tuple[int, bool]:
    """A file descriptor of ``path``, direct when the file system takes ``O_DIRECT``."""
    if O_DIRECT:
        try:
            return os.open(path, flags | O_DIRECT, 0o644), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o644), False


def _buffered(fd: int) -> None:
    """Continue through the page cache (the file system refused a direct transfer)."""
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~O_DIRECT)


def _transfer(op: Callable[[int, memoryview, int], int], fd: int, direct: bool,
              view: memoryview, offset: int) -> int:
    """``op`` (a pwrite or pread) of ``view`` at ``offset``, whole unless the file ends;
    a direct transfer the file system refuses is done through the page cache."""
    done = 0
    while done < len(view):
        try:
            n = op(fd, view[done:], offset + done)
        except OSError as exc:
            if not (direct and exc.errno == errno.EINVAL):
                raise
            _buffered(fd)
            direct = False
            continue
        if n == 0:
            break
        done += n
    return done


def _pwrite(fd: int, view: memoryview, offset: int) -> int:
    return os.pwrite(fd, view, offset)


def _write_all(fd: int, direct: bool, view: memoryview, offset: int) -> None:
    if _transfer(_pwrite, fd, direct, view, offset) < len(view):
        raise OSError(errno.EIO, "short write")


def _pread(fd: int, view: memoryview, offset: int) -> int:
    return os.preadv(fd, [view], offset)


class _File:
    """A file written sequentially, hashed on the way, through aligned staging blocks."""

    def __init__(self, path: Path):
        self.path = path
        self.fd, self.direct = _open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.sha = hashlib.sha256()
        self.size = 0  # bytes written (handed over)
        self.end = 0  # bytes on their way to the file (the last block padded to ALIGN)
        self.blocks: list[memoryview] = []
        self.writing: list[Future[None] | None] = [None] * DEPTH
        self.k = 0  # the block being filled
        self.fill = 0  # bytes in it

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        at = 0
        while at < len(view):
            if len(self.blocks) <= self.k:
                self.blocks.append(_block())
            n = min(BLOCK - self.fill, len(view) - at)
            self.blocks[self.k][self.fill:self.fill + n] = view[at:at + n]
            self.fill += n
            at += n
            if self.fill == BLOCK:
                self._flush()
        self.size += len(view)

    def _flush(self) -> None:
        """Hand the block being filled to an I/O thread, hash it meanwhile, and wait until
        the next one is free."""
        block, n = self.blocks[self.k], self.fill
        self.writing[self.k] = _io().submit(_write_all, self.fd, self.direct,
                                            block[:_round(n)], self.end)
        self.sha.update(block[:n])
        self.end += _round(n)
        self.k = (self.k + 1) % DEPTH
        self.fill = 0
        self._wait(self.k)

    def _wait(self, k: int) -> None:
        busy, self.writing[k] = self.writing[k], None
        if busy is None:
            return
        try:
            busy.result()
        except OSError as exc:
            raise CheckpointError(f"{self.path}: cannot be written ({exc.strerror})"
                                  ) from None

    def close(self) -> dict[str, Any]:
        """Write what remains, cut the padding of the last block, fsync; the file's size and
        sha256."""
        try:
            if self.fill:
                self._flush()
            for k in range(DEPTH):
                self._wait(k)
            try:
                if self.end != self.size:
                    os.ftruncate(self.fd, self.size)
                os.fsync(self.fd)
            except OSError as exc:
                raise CheckpointError(f"{self.path}: cannot be written ({exc.strerror})"
                                      ) from None
        finally:
            self.abandon()
        return {"bytes": self.size, "sha256": self.sha.hexdigest()}

    def abandon(self) -> None:
        """Wait for the writes under way, close the file, keep the blocks for the next."""
        if self.fd < 0:
            return
        for busy in self.writing:
            if busy is not None:
                busy.exception()  # (the error, if any, was or will be reported elsewhere)
        self.writing = [None] * DEPTH
        os.close(self.fd)
        self.fd = -1
        _SPARE.extend(self.blocks)
        self.blocks = []


class _Memory:
    """A shard's file kept in memory (an in-memory checkpoint): its bytes, not hashed."""

    def __init__(self) -> None:
        self.mem = bytearray()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        self.mem += view
        self.size += len(view)


def _aligned(size: int) -> np.ndarray:
    """A new byte buffer of ``size`` rounded up to ``ALIGN``, starting on an ``ALIGN``
    boundary (direct I/O reads into it)."""
    raw = np.empty(_round(size) + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + _round(size)]


def _read(path: Path, offset: int, size: int, want: dict[str, Any] | None = None
          ) -> np.ndarray:
    """Bytes ``offset`` to ``offset + size`` of ``path`` in a new buffer (read straight into
    it); ``want``: the file's manifest entry, checked on the way (the whole file)."""
    if size == 0 and want is None:
        return np.empty(0, np.uint8)
    start = offset - offset % ALIGN
    buf = _aligned(offset + size - start)
    got = _scan(path, want, [buf[at:at + BLOCK].data for at in range(0, len(buf), BLOCK)],
                start, offset + size)
    if got < offset + size - start:
        raise CheckpointError(f"{path}: shorter than its index says (partial file)")
    return buf[offset - start:offset - start + size]


def verify_file(path: Path, want: dict[str, Any]) -> None:
    """Raise :class:`CheckpointError` unless ``path`` has the size and sha256 ``want``
    (read through staging blocks, nothing kept)."""
    blocks = [_block() for _ in range(DEPTH)]
    try:
        _scan(path, want, blocks, 0, want["bytes"])
    finally:
        _SPARE.extend(blocks)


def _scan(path: Path, want: dict[str, Any] | None, dests: list[memoryview], start: int,
          stop: int) -> int:
    """Read ``path`` from ``start`` (aligned) up to ``stop`` into ``dests`` in turn (when
    there are fewer than the blocks to read, each is reused once hashed). The I/O threads
    keep up to ``DEPTH`` reads in flight while the caller hashes the blocks in order (a
    storage that serves one request at a time per process is twice as fast with two);
    with ``want``, check the file's size and sha256. Returns the bytes read."""
    sha = hashlib.sha256()
    try:
        fd, direct = _open(path, os.O_RDONLY)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror})") from None
    reads: list[tuple[memoryview, Future[int]]] = []
    done = 0
    try:
        size = os.fstat(fd).st_size
        ahead = start  # where the next read starts
        k = 0
        while True:
            while len(reads) < min(DEPTH, len(dests)) and ahead < stop:
                dest = dests[k][:_round(min(len(dests[k]), stop - ahead))]
                reads.append((dest, _io().submit(_transfer, _pread, fd, direct, dest, ahead)))
                ahead += len(dest)
                k = (k + 1) % len(dests)
            if not reads:
                break
            dest, busy = reads.pop(0)
            n = min(busy.result(), stop - start - done)
            if want is not None:
                sha.update(dest[:n])
            done += n
            if n < len(dest):
                break
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror})") from None
    finally:
        for _dest, busy in reads:
            busy.exception()
        os.close(fd)
    if want is not None and (size != want["bytes"] or done != size
                             or sha.hexdigest() != want["sha256"]):
        raise CheckpointError(f"{path}: corrupted ({size} bytes, sha256 {sha.hexdigest()[:12]}; "
                              f"the manifest says {want['bytes']} bytes, "
                              f"{want['sha256'][:12]}); restart from another checkpoint")
    return done


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
        idx = self._read_whole("idx")
        try:
            self.entries: list[Entry] = pickle.loads(idx.data)
        except Exception as exc:
            raise CheckpointError(f"{gen / (name + '.idx')}: cannot be read ({exc})") from None
        self.pkl: np.ndarray | None = None
        self.bin: np.ndarray | None = None
        if whole:
            self.pkl = self._read_whole("pkl")
            self.bin = self._read_whole("bin")

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

    def _read_whole(self, ext: str) -> np.ndarray:
        """The file in one buffer, its size and sha256 checked on the way."""
        want = self.files[f"{self.name}.{ext}"]
        return _read(self._path(ext), 0, want["bytes"], want)

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
                data = _read(self._path("pkl"), pkl_off, pkl_len).data
                raw = _read(self._path("bin"), bin_off, sum(lens)).data
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
