"""Checkpoint to disk and restart on any number of PEs (jobs/checkpoint.py), and the
on-disk format (no MPI)."""

import ast
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi_jobs import JOBS, TIMEOUT

from shoal.errors import CheckpointError
from shoal.launch import mpiexec
from shoal.runtime import shards

JOB = JOBS / "checkpoint.py"


def job(ranks: int, *args: str) -> dict:
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(JOB), *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


def failing(cmd: list[str]) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode != 0, out.stdout[-2000:]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The uninterrupted run on 2 PEs, and a checkpoint taken at iteration 3 of 6 by a run
    on 2 PEs that stopped there, and by one on 3 PEs."""
    where = tmp_path_factory.mktemp("ckpt")
    plain = job(2, "ring", where / "unused", "plain")
    job(2, "ring", where / "on2", "stop")
    job(3, "ring", where / "on3", "stop")
    return {"plain": plain, "dir": where}


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_run_restarted_on_any_number_of_pes_ends_bit_identical(reference, ranks, tmp_path):
    """The checkpoint holds numpy state, proxies in ``state``, and values waiting in channel
    buffers (posted before the checkpoint, received after it: lost, the run would hang)."""
    got = job(ranks, "ring", tmp_path / "unused", "plain", "--restart",
              reference["dir"] / "on2")
    assert got["digest"] == reference["plain"]["digest"]
    assert got["pes"] == ranks
    assert got["count"] == ranks  # a group reduction counts one member per new PE
    # member p keeps saved member p's state; a new PE's member is a copy of member 0
    assert got["group"] == [(0, 6), (1, 6), (0, 6)][:ranks]


def test_a_checkpoint_taken_on_3_pes_restarts_on_2_and_the_third_member_is_dropped(
        reference, tmp_path):
    got = job(2, "ring", tmp_path / "unused", "plain", "--restart", reference["dir"] / "on3")
    assert got["digest"] == reference["plain"]["digest"]
    assert got["group"] == [(0, 6), (1, 6)]


def test_a_run_that_checkpoints_and_goes_on_ends_as_the_uninterrupted_one(reference,
                                                                          tmp_path):
    got = job(2, "ring", tmp_path / "c", "ckpt")
    assert got["digest"] == reference["plain"]["digest"]
    info = got["info"]
    assert info["generation"] == 1 and info["elements"] == 7 + 2
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["pes"] == 2 and manifest["bytes"] == info["bytes"]
    assert sorted(c["kind"] for c in manifest["collections"]) == ["array", "group"]


def test_destroyed_collections_stay_destroyed_across_restarts_on_other_numbers_of_pes(
        tmp_path):
    # made on PE 2 of 3 and destroyed; restarted on 2 PEs, then on 3 again: the new PE 2
    # counts its collections from 0, and used to make an array with the destroyed id, which
    # the stale proxy then reached (and a call through it waited forever in between)
    doomed = job(3, "doomed", tmp_path / "a")["doomed"]
    assert doomed & 0xFFFFF == 2
    for ranks, src, dst in ((2, "a", "b"), (3, "b", "c")):
        got = job(ranks, "doomed", tmp_path / dst, "", "--restart", tmp_path / src)
        assert got["doomed"] == doomed
        assert f"collection {doomed} was destroyed" in got["said"], got
        assert doomed not in got["made"] and len(set(got["made"])) == ranks, got


def test_pinned_elements_and_a_group_on_some_pes_restart_in_place_or_are_refused(tmp_path):
    """Non-migratable elements moved off their homes come back where they were on the same
    number of PEs, still not migratable; a group on PEs [1, 2] keeps its members and their
    state there; on 2 PEs that group is refused, naming the PEs it needs."""
    first = job(3, "placed", tmp_path / "a")["where"]
    assert [pe for pe, _ in first] == [(i * 3 // 6 + (1 - i % 2)) % 3 for i in range(6)]
    assert [m for _, m in first] == [i % 2 == 1 for i in range(6)]
    got = job(3, "placed", tmp_path / "b", "", "--restart", tmp_path / "a")
    assert got["where"] == first and got["g"] == [(1, 2), (2, 2)], got
    assert "is not migratable" in got["again"], got
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(JOB), "placed", str(tmp_path / "c"), "",
           "--restart", str(tmp_path / "a")]
    err = failing(cmd).stderr
    assert "has members on PEs [1, 2]" in err and "restart on at least 3 PEs" in err, err


def test_a_second_call_before_the_first_completes_waits_for_it(tmp_path):
    got = job(2, "serial", tmp_path / "s")
    assert (got["first"], got["second"]) == (1, 2)  # one after the other in one directory
    assert got["elements"] == 7
    assert shards.read_manifest(tmp_path / "s", verify=True)["generation"] == 2
    assert [p.name for p in sorted((tmp_path / "s").iterdir())] == ["g000002",
                                                                    "manifest.json"]


def test_a_refused_checkpoint_names_the_element_and_leaves_the_previous_one(tmp_path):
    got = job(2, "refused", tmp_path / "r")
    suspended, unpicklable = got["errors"]
    assert "Sleeper[3] has a suspended coroutine (wait_forever)" in suspended
    assert "Sleeper[3] cannot be saved" in unpicklable and "lock" in unpicklable
    assert got["left"] == ["g000001", "manifest.json"]  # no temporary generation left
    assert job(3, "show", tmp_path / "x", "--restart", tmp_path / "r") == {"n": 1}


def damaged(reference, tmp_path, how: str) -> Path:
    where = tmp_path / how
    shutil.copytree(reference["dir"] / "on2", where)
    gen = where / "g000001"
    if how == "flipped":
        data = bytearray((gen / "pe-00001.bin").read_bytes())
        data[100] ^= 1
        (gen / "pe-00001.bin").write_bytes(bytes(data))
    elif how == "missing":
        (gen / "pe-00001.pkl").unlink()
    elif how == "truncated":
        data = (gen / "pe-00000.bin").read_bytes()
        (gen / "pe-00000.bin").write_bytes(data[:-10])
    elif how == "version":
        manifest = json.loads((where / "manifest.json").read_text())
        manifest["format"] = shards.FORMAT + 1
        (where / "manifest.json").write_text(json.dumps(manifest))
    elif how == "no-manifest":
        (where / "manifest.json").unlink()
    return where


@pytest.mark.parametrize(("how", "names", "says"), [
    ("flipped", "pe-00001.bin", "corrupted"),
    ("missing", "pe-00001.pkl", "missing"),
    ("truncated", "pe-00000.bin", "partial"),
    ("version", "manifest.json", "format"),
    ("no-manifest", "manifest.json", "no complete checkpoint"),
])
def test_shoal_run_refuses_a_damaged_checkpoint_in_one_line_naming_the_file(
        reference, tmp_path, how, names, says):
    where = damaged(reference, tmp_path, how)
    out = failing([sys.executable, "-m", "shoal", "run", "-n", "2", "--restart", str(where),
                   str(JOB), "ring", str(tmp_path / "x"), "plain"])
    assert out.returncode == 2
    line = out.stderr.strip()
    assert "\n" not in line and line.startswith("shoal: error: ")
    assert names in line and says in line


def test_a_corrupted_shard_stops_a_restart_by_shoal_start_naming_the_file(reference,
                                                                         tmp_path):
    where = damaged(reference, tmp_path, "flipped")
    out = failing([*mpiexec(), "-n", "2", sys.executable, str(JOB), "ring",
                   str(tmp_path / "x"), "plain", "--restart", str(where)])
    assert "pe-00001.bin: corrupted" in out.stderr
    assert "RESULT" not in out.stdout


def test_a_missing_checkpoint_is_refused_by_shoal_start_before_the_runtime_starts(tmp_path):
    out = failing([*mpiexec(), "-n", "2", sys.executable, str(JOB), "show", str(tmp_path),
                   "--restart", str(tmp_path / "none")])
    assert "CheckpointError" in out.stderr and "none: no checkpoint there" in out.stderr


# ----------------------------------------------------------------- the format, no MPI
def test_records_round_trip_and_large_buffers_are_written_raw(tmp_path):
    big = np.arange(50_000, dtype=np.float64)
    small = np.arange(10, dtype=np.int32)
    writer = shards.ShardWriter(tmp_path, "s")
    writer.add("a", {"big": big, "small": small, "text": "x"})
    writer.add(("b", 1), [big[::2].copy(), 7])
    files = writer.close()
    raw = (tmp_path / "s.bin").read_bytes()
    assert raw == big.tobytes() + big[::2].tobytes()  # the buffers themselves, in order
    assert files["s.pkl"]["bytes"] < 1000  # not a copy inside the pickle
    for whole in (True, False):
        shard = shards.Shard(tmp_path, "s", files, whole=whole)
        a, b = (shard.load(e) for e in shard.entries)
        assert [e[0] for e in shard.entries] == ["a", ("b", 1)]
        assert np.array_equal(a["big"], big) and np.array_equal(a["small"], small)
        assert np.array_equal(b[0], big[::2]) and b[1] == 7
        a["big"][0] = 5.0  # writable, as the element had it
        shard.verify()


def test_a_changed_byte_fails_verification_naming_the_file(tmp_path):
    writer = shards.ShardWriter(tmp_path, "s")
    writer.add("a", np.ones(10_000))
    files = writer.close()
    data = bytearray((tmp_path / "s.bin").read_bytes())
    data[-1] ^= 0x80
    (tmp_path / "s.bin").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"s\.bin: corrupted"):
        shards.Shard(tmp_path, "s", files, whole=True)
    with pytest.raises(CheckpointError, match=r"s\.bin: corrupted"):
        shards.Shard(tmp_path, "s", files).verify()


def test_a_commit_replaces_the_manifest_atomically_and_keeps_the_old_generation_until(
        tmp_path):
    """Generation 1 committed; generation 2 written but not committed (a crash before the
    rename): the manifest still names 1, whose files are intact."""
    root = tmp_path / "c"
    for gen in (1, 2):
        tmp = shards.prepare(root, gen)
        writer = shards.ShardWriter(tmp, "main")
        writer.add("state", {"gen": gen})
        files = writer.close()
        if gen == 1:
            shards.commit(root, gen, tmp, {"format": shards.FORMAT, "shoal": shards.__version__,
                                           "generation": gen, "dir": "", "pes": 1,
                                           "collections": [], "files": files})
    manifest = shards.read_manifest(root, verify=True)
    assert manifest["generation"] == 1 and (root / "g000002.tmp").is_dir()
    assert shards.next_generation(root) == 2
    gen1 = {k.split("/", 1)[1]: v for k, v in manifest["files"].items()}
    shard = shards.Shard(root / "g000001", "main", gen1, whole=True)
    assert shard.load(shard.entries[0]) == {"gen": 1}
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        shards.read_manifest(tmp_path)
    assert pickle.loads((root / "g000001" / "main.idx").read_bytes())[0][0] == "state"


# ----------------------------------------------------------------- supervised restart
def shoal_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", "run", *map(str, args)],
                          capture_output=True, text=True, timeout=4 * TIMEOUT)


def result(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    return ast.literal_eval(lines[0][len("RESULT "):])


def test_a_job_killed_at_random_moments_and_restarted_ends_bit_identical(reference,
                                                                         tmp_path):
    """The job checkpoints after each of its 6 iterations; a SIGKILL of one PE at a random
    moment (seeded) ends the job, ``--restarts`` relaunches it from the last complete
    checkpoint, and the result is the uninterrupted run's."""
    rng = np.random.default_rng(14)
    for k, (pe, at) in enumerate(zip(rng.integers(0, 2, 6), rng.uniform(0.1, 1.1, 6),
                                     strict=True)):
        out = shoal_run("-n", 2, "--restarts", 2, "--kill", f"{pe}@{at:.3f}s", JOB, "every",
                        tmp_path / f"k{k}")
        got = result(out)
        assert got["digest"] == reference["plain"]["digest"], (pe, at)
        assert got["group"] == [(0, 6), (1, 6)]
        assert "restart 1 of 2 " in out.stderr, out.stderr[-2000:]


def test_shrink_on_failure_relaunches_on_fewer_pes(reference, tmp_path):
    out = shoal_run("-n", 3, "--restarts", 1, "--shrink-on-failure", "--kill", "2@0.5s",
                    JOB, "every", tmp_path / "s")
    got = result(out)
    assert got["pes"] == 2 and got["digest"] == reference["plain"]["digest"]
    assert "on 2 PE(s)" in out.stderr


def test_a_job_that_keeps_failing_ends_when_its_restarts_are_used_up(tmp_path):
    out = shoal_run("-n", 2, "--restarts", 1, JOB, "no-such-scenario", tmp_path)
    assert out.returncode != 0
    assert "restart 1 of 1 as first started (no checkpoint completed)" in out.stderr
    assert "1 restart(s) are used up" in out.stderr


@pytest.mark.parametrize(("kill", "says"), [("1", "PE@time"), ("5@1s", "does not exist"),
                                            ("1@soon", "cannot read")])
def test_a_bad_kill_is_refused_in_one_line(tmp_path, kill, says):
    out = shoal_run("-n", 2, "--kill", kill, JOB, "every", tmp_path)
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1
