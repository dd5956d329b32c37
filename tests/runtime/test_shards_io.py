"""The file I/O under checkpoints (shards.py): staged, hashed, direct where the file system
has it, through the page cache where it has not or refuses; every way gives the same files,
the same sha256 and the same records back (no MPI)."""

import errno
import fcntl
import hashlib
import os
import signal
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.errors import CheckpointError
from shoal.runtime import shards

MODES = ["as-the-fs-gives", "page-cache", "direct-refused"]


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    """How files are opened: as the file system allows; without O_DIRECT; or with O_DIRECT
    accepted at open and refused (EINVAL) by every direct transfer, as some file systems do."""
    if request.param == "page-cache":
        monkeypatch.setattr(shards, "O_DIRECT", 0)
    elif request.param == "direct-refused":
        if not shards.O_DIRECT:
            pytest.fail("this system has no O_DIRECT: the refusal cannot be simulated")
        refused = []

        def refusing(op):
            def call(fd, *args):
                if fcntl.fcntl(fd, fcntl.F_GETFL) & shards.O_DIRECT:
                    refused.append(fd)
                    raise OSError(errno.EINVAL, "Invalid argument")
                return op(fd, *args)
            return call

        monkeypatch.setattr(shards.os, "pwrite", refusing(os.pwrite))
        monkeypatch.setattr(shards.os, "preadv", refusing(os.preadv))
        monkeypatch.setattr(shards, "_open", lambda path, flags: (
            os.open(path, flags | shards.O_DIRECT, 0o644), True))
        yield refused
        return
    yield None


def write(directory, records):
    writer = shards.ShardWriter(directory, "s")
    for key, obj in records:
        writer.add(key, obj)
    return writer.close()


def sizes_strategy():
    edges = [1, shards.OOB_MIN, shards.ALIGN - 1, shards.ALIGN + 1, shards.BLOCK - 3,
             shards.BLOCK, shards.BLOCK + shards.ALIGN + 5]
    return st.lists(st.one_of(st.sampled_from(edges), st.integers(1, 3 * shards.BLOCK)),
                    min_size=0, max_size=6)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=sizes_strategy())
def test_files_hold_the_buffers_in_order_with_their_sha256_whatever_the_sizes(
        tmp_path_factory, mode, sizes):
    where = tmp_path_factory.mktemp("s")
    rng = np.random.default_rng(len(sizes))
    arrays = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    files = write(where, [(k, {"a": a, "k": k}) for k, a in enumerate(arrays)])
    for ext in ("pkl", "bin", "idx"):
        data = (where / f"s.{ext}").read_bytes()
        assert files[f"s.{ext}"] == {"bytes": len(data),
                                     "sha256": hashlib.sha256(data).hexdigest()}
    big = [a for a in arrays if a.nbytes >= shards.OOB_MIN]
    assert (where / "s.bin").read_bytes() == b"".join(a.tobytes() for a in big)
    for whole in (True, False):
        shard = shards.Shard(where, "s", files, whole=whole)
        for k, entry in enumerate(shard.entries):
            got = shard.load(entry)
            assert got["k"] == k and np.array_equal(got["a"], arrays[k])
        shard.verify()
    if mode is not None:  # direct transfers were refused, and the files are still right
        assert mode


def test_records_come_back_on_the_buffer_read_for_them_without_a_copy(tmp_path):
    arrays = [np.arange(n, dtype=np.float64) for n in (100_000, 3, 70_000)]
    files = write(tmp_path, [(k, a) for k, a in enumerate(arrays)])
    shard = shards.Shard(tmp_path, "s", files, whole=True)
    got = [shard.load(e) for e in shard.entries]
    assert got[0].base is not None and np.shares_memory(got[0], shard.bin)
    assert np.shares_memory(got[2], shard.bin)
    got[0][5] = -1.0  # writable, as the element had it
    assert shard.bin.view(np.float64)[5] == -1.0


def test_a_failing_write_is_an_error_naming_the_file_and_leaves_nothing_open(
        tmp_path, monkeypatch):
    def full(fd, view, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(shards.os, "pwrite", full)
    writer = shards.ShardWriter(tmp_path, "s")
    with pytest.raises(CheckpointError, match=r"s\.bin: cannot be written \(No space left"):
        writer.add("a", np.ones(3 * shards.BLOCK // 8))  # the third block waits for the first
    writer.abandon()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_file_longer_or_shorter_than_the_manifest_says_is_corrupted(tmp_path):
    files = write(tmp_path, [("a", np.ones(5000))])
    path = tmp_path / "s.bin"
    data = path.read_bytes()
    for changed in (data + b"x", data[:-1]):
        path.write_bytes(changed)
        with pytest.raises(CheckpointError, match=r"s\.bin: corrupted"):
            shards.Shard(tmp_path, "s", files, whole=True)
        with pytest.raises(CheckpointError, match=r"s\.bin: corrupted"):
            shards.verify_file(path, files["s.bin"])


def test_a_record_beyond_the_end_of_a_truncated_file_is_refused(tmp_path):
    files = write(tmp_path, [("a", np.ones(5000)), ("b", np.ones(5000))])
    path = tmp_path / "s.bin"
    path.write_bytes(path.read_bytes()[:50_000])
    shard = shards.Shard(tmp_path, "s", files)
    assert np.array_equal(shard.load(shard.entries[0]), np.ones(5000))
    with pytest.raises(CheckpointError, match=r"s\.bin: shorter than its index says"):
        shard.load(shard.entries[1])


def test_staging_blocks_are_reused_from_file_to_file(tmp_path, monkeypatch):
    mapped = []
    real = shards.mmap.mmap

    def counting(*args):
        mapped.append(args)
        return real(*args)

    monkeypatch.setattr(shards, "_SPARE", [])
    monkeypatch.setattr(shards.mmap, "mmap", counting)
    for k in range(4):
        where = tmp_path / str(k)
        where.mkdir()
        files = write(where, [("a", np.ones(4 * shards.BLOCK // 8))])
        shards.verify_file(where / "s.bin", files["s.bin"])
    # bin: DEPTH blocks in flight, pkl and idx one each: the first file maps them all
    assert len(mapped) <= shards.DEPTH + 2


def test_a_shard_kept_in_memory_holds_the_bytes_of_the_files(tmp_path):
    records = [("pe", {"n": 1}), ((0, (1,)), np.arange(9000.0)), ((0, (2,)), [1, 2])]
    files = write(tmp_path, records)
    memory = shards.ShardWriter(None, "s")
    for key, obj in records:
        memory.add(key, obj)
    image = memory.image()
    assert image.pkl == (tmp_path / "s.pkl").read_bytes()
    assert image.bin == (tmp_path / "s.bin").read_bytes()
    on_disk = shards.Shard(tmp_path, "s", files, whole=True)
    assert image.entries == on_disk.entries
    got = image.shard().load(image.entries[1])
    assert np.array_equal(got, np.arange(9000.0))
    got[0] = 7.0  # restored elements do not write into the image the store keeps
    assert image.shard().load(image.entries[1])[0] == 0.0


def test_a_process_forked_after_a_checkpoint_writes_one_too(tmp_path):
    write(tmp_path, [("a", np.ones(3 * shards.BLOCK // 8))])  # the I/O thread runs now
    pid = os.fork()
    if pid == 0:  # the child: no I/O thread was inherited, another one starts
        code = 1
        try:
            (tmp_path / "child").mkdir()
            files = write(tmp_path / "child", [("b", np.full(3 * shards.BLOCK // 8, 2.0))])
            shard = shards.Shard(tmp_path / "child", "s", files, whole=True)
            code = 0 if np.all(shard.load(shard.entries[0]) == 2.0) else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30  # (before the fix the child hung: end it, then fail)
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid and done[1] == 0, "the forked child's checkpoint did not finish"
