"""The load-balancing database on disk (LBDatabase.save / LBDatabase.read), re-targeting,
edge cut, and the synthesiser (shoal.runtime.lb.synth): round trips of every field, every
kind of bad file refused by name, synthetic sizes, distributions and graphs checked against
brute force."""

import itertools
import re
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.errors import UsageError
from shoal.runtime.lb.database import FORMAT_VERSION, LBDatabase, core_share
from shoal.runtime.lb.synth import grid_shape, random_edges, stencil_edges, synthesize

FIELDS = ("load", "pe", "migratable", "size", "wall", "idle", "background", "speed", "src",
          "dst", "messages", "bytes")


def assert_same(a: LBDatabase, b: LBDatabase) -> None:
    assert a.npes == b.npes
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert a.keys == b.keys
    if a.coords is None:
        assert b.coords is None
    else:
        np.testing.assert_array_equal(a.coords, b.coords)


def full_db(rng: np.random.Generator, n: int = 12, npes: int = 4, m: int = 20,
            keys: bool = True) -> LBDatabase:
    return LBDatabase(
        rng.exponential(1.0, n), rng.integers(0, npes, n), npes,
        migratable=rng.random(n) < 0.8, size=rng.integers(0, 10**6, n),
        wall=rng.random(npes) + 1, idle=rng.random(npes), background=rng.random(npes) / 4,
        speed=rng.random(npes) + 0.5, src=rng.integers(0, n, m), dst=rng.integers(0, n, m),
        messages=rng.integers(1, 100, m), bytes=rng.integers(0, 10**9, m),
        keys=[(int(rng.integers(0, 3)), (i, i % 3)) for i in range(n)] if keys else None,
        coords=rng.normal(size=(n, 3)))


# ------------------------------------------------------------------------------ round trips


@st.composite
def databases(draw):
    n = draw(st.integers(0, 15))
    npes = draw(st.integers(1, 5))
    m = draw(st.integers(0, 20)) if n else 0
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    keys = None
    if draw(st.booleans()):
        index = st.one_of(st.none(), st.tuples(st.integers(-(2**40), 2**40),
                                               st.lists(st.integers(-(2**62), 2**62),
                                                        max_size=4).map(tuple)))
        keys = draw(st.lists(index, min_size=n, max_size=n))
    return LBDatabase(
        rng.lognormal(0, 2, n), rng.integers(0, npes, n), npes,
        migratable=rng.random(n) < 0.5, size=rng.integers(0, 2**40, n),
        wall=rng.random(npes), idle=rng.random(npes), background=rng.random(npes),
        speed=rng.random(npes) * 2, src=rng.integers(0, max(n, 1), m),
        dst=rng.integers(0, max(n, 1), m), messages=rng.integers(0, 2**40, m),
        bytes=rng.integers(0, 2**50, m), keys=keys,
        coords=rng.normal(size=(n, draw(st.integers(0, 3)))) if draw(st.booleans()) else None)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(db=databases(), compress=st.booleans())
def test_round_trip_keeps_every_field(tmp_path, db, compress):
    path = tmp_path / "db.npz"
    db.save(path, compress=compress)
    assert_same(LBDatabase.read(path), db)


def test_round_trip_without_keys_or_edges(tmp_path):
    db = LBDatabase(np.array([1.0, 2.0, 3.0]), np.array([0, 1, 1]), 2)
    db.save(tmp_path / "plain.npz")
    back = LBDatabase.read(tmp_path / "plain.npz")
    assert_same(back, db)
    assert back.keys is None and back.src.size == 0


def test_round_trip_of_runtime_keys_and_the_exact_path(tmp_path):
    db = full_db(np.random.default_rng(1))
    db.keys = [(0, (3,)), None, (2, ()), (1, (4, 5, 6)), *db.keys[4:]]
    path = tmp_path / "step-0003.lbdb"  # written under this name, not with .npz added
    db.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-0003.lbdb"]
    assert_same(LBDatabase.read(path), db)
    assert LBDatabase.read(path, keys=False).keys is None


def test_save_refuses_an_unwritable_path_and_malformed_keys(tmp_path):
    db = LBDatabase(np.ones(2), np.zeros(2, np.int64), 1)
    with pytest.raises(UsageError, match=r"nowhere/db\.npz: cannot write"):
        db.save(tmp_path / "nowhere" / "db.npz")
    with pytest.raises(ValueError, match="2 objects"):
        LBDatabase(np.ones(2), np.zeros(2, np.int64), 1, keys=[(0, (1,))]).save(
            tmp_path / "x.npz")
    with pytest.raises(ValueError, match="not \\(collection id, index tuple\\)"):
        LBDatabase(np.ones(1), np.zeros(1, np.int64), 1, keys=[(0, 1)]).save(
            tmp_path / "x.npz")


# ------------------------------------------------------------------------------ bad files


def good_arrays() -> dict[str, np.ndarray]:
    return full_db(np.random.default_rng(2))._arrays()


def write(path, arrays) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def changed(**updates) -> dict[str, np.ndarray]:
    arrays = good_arrays()
    for name, value in updates.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value
    return arrays


BAD = {
    "no format tag": (changed(format=None), "not a shoal load-balancing database"),
    "another format": (changed(format=np.array("other")), "not a shoal load-balancing"),
    "newer version": (changed(version=np.array(FORMAT_VERSION + 1)),
                      "format version 3 \\(written by a newer shoal\\); this shoal reads "
                      "versions 1, 2"),
    "version 0": (changed(version=np.array(0)), "format version 0; this shoal reads"),
    "no version": (changed(version=None), "field 'version' is missing"),
    "version not a number": (changed(version=np.array("1")), "'version' must be one integer"),
    "no npes": (changed(npes=None), "field 'npes' is missing"),
    "npes 0": (changed(npes=np.array(0)), "npes is 0, must be at least 1"),
    "no load": (changed(load=None), "field 'load' is missing"),
    "2-d load": (changed(load=np.ones((12, 1))), "'load' has shape \\(12, 1\\)"),
    "negative load": (changed(load=-np.ones(12)), "'load' has entries outside >= 0"),
    "nan load": (changed(load=np.full(12, np.nan)), "'load' has entries outside"),
    "short pe": (changed(pe=np.zeros(11, np.int64)),
                 "'pe' has shape \\(11,\\), expected \\(12, ...\\).*one row per object"),
    "pe out of range": (changed(pe=np.full(12, 4)),
                        "'pe' has entries outside \\[0, 4\\): 4 for object 0"),
    "float pe": (changed(pe=np.zeros(12)), "'pe' has dtype float64, expected integer"),
    "int migratable": (changed(migratable=np.ones(12, np.int64)), "expected boolean"),
    "negative size": (changed(size=np.full(12, -1)), "'size' has entries outside"),
    "1-d coords": (changed(coords=np.zeros(12)), "'coords' has shape \\(12,\\)"),
    "short coords": (changed(coords=np.zeros((11, 2))), "'coords' has shape \\(11, 2\\)"),
    "nan coords": (changed(coords=np.full((12, 2), np.nan)), "'coords' has entries outside"),
    "missing speed": (changed(speed=None), "field 'speed' is missing"),
    "long wall": (changed(wall=np.ones(5)), "'wall' has shape \\(5,\\).*one row per PE"),
    "negative speed": (changed(speed=-np.ones(4)), "'speed' has entries outside"),
    "infinite idle": (changed(idle=np.full(4, np.inf)), "'idle' has entries outside"),
    "short dst": (changed(dst=np.zeros(19, np.int64)), "'dst' has shape \\(19,\\)"),
    "edge to nowhere": (changed(dst=np.full(20, 12)),
                        "'dst' has entries outside \\[0, 12\\): 12 for edge 0"),
    "negative bytes": (changed(bytes=np.full(20, -5)), "'bytes' has entries outside"),
    "half the keys": (changed(key_ndims=None), "field 'key_ndims' is missing"),
    "key wider than its index": (changed(key_ndims=np.full(12, 3)),
                                 "'key_ndims' has entries outside \\[-1, 3\\)"),
    "1-d key index": (changed(key_index=np.zeros(12, np.int64)), "'key_index' has shape"),
    "pickled field": (changed(speed=np.array([{}, {}, {}, {}], dtype=object)),
                      "field 'speed' cannot be read"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_inconsistent_files_are_refused_by_name(tmp_path, case):
    arrays, message = BAD[case]
    path = tmp_path / "bad.npz"
    write(path, arrays)
    with pytest.raises(UsageError, match=message) as err:
        LBDatabase.read(path)
    assert str(err.value).startswith(f"{path}: ")


def test_unreadable_files_are_refused_by_name(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all" * 10)
    truncated = tmp_path / "truncated.npz"
    full_db(np.random.default_rng(3)).save(tmp_path / "whole.npz")
    truncated.write_bytes((tmp_path / "whole.npz").read_bytes()[:700])
    single = tmp_path / "single.npy"
    np.save(single, np.arange(3))
    pickled = tmp_path / "pickled.npz"
    pickled.write_bytes(b"\x80\x04N.")
    cases = {tmp_path / "absent.npz": "no such file", tmp_path: "is a directory",
             garbage: "not an .npz archive", truncated: "not an .npz archive",
             single: "single array \\(.npy\\)", pickled: "not an .npz archive"}
    for path, message in cases.items():
        with pytest.raises(UsageError, match=f"^{re.escape(str(path))}: .*{message}"):
            LBDatabase.read(path)


def test_a_corrupt_member_is_refused_by_name(tmp_path):
    path = tmp_path / "crc.npz"
    write(path, good_arrays())
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("speed.npy")
    head = info.header_offset  # local header: 30 bytes, then the name and extra field
    start = head + 30 + int.from_bytes(data[head + 26:head + 28], "little") + int.from_bytes(
        data[head + 28:head + 30], "little")
    data[start + info.file_size - 1] ^= 0xFF  # the array's last byte: the CRC fails
    path.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=f"^{re.escape(str(path))}: field 'speed' cannot"):
        LBDatabase.read(path)


# -------------------------------------------------------------------- edge cut, retarget


def test_a_version_1_file_reads_without_coordinates(tmp_path):
    # version 1 is version 2 without the coords field
    arrays = changed(version=np.array(1), coords=None)
    write(tmp_path / "v1.npz", arrays)
    db = LBDatabase.read(tmp_path / "v1.npz")
    assert db.coords is None
    np.testing.assert_array_equal(db.load, arrays["load"])


def test_edge_cut_counts_bytes_between_pes():
    db = full_db(np.random.default_rng(4), m=50)
    brute = sum(int(b) for s, d, b in zip(db.src, db.dst, db.bytes, strict=True)
                if db.pe[s] != db.pe[d])
    assert db.edge_cut() == brute
    assert db.edge_cut(np.zeros(db.n, np.int64)) == 0
    assert LBDatabase(np.ones(2), np.zeros(2, np.int64), 1).edge_cut() == 0


def test_retarget_moves_blocks_of_pes_and_resizes_pe_arrays():
    db = full_db(np.random.default_rng(5), n=40, npes=4)
    assert db.speed is not None and db.wall is not None
    fewer = db.retarget(2)
    np.testing.assert_array_equal(fewer.pe, db.pe // 2)
    np.testing.assert_array_equal(fewer.speed, db.speed[:2])
    more = db.retarget(6)
    np.testing.assert_array_equal(more.pe, db.pe * 6 // 4)
    np.testing.assert_array_equal(more.speed, [*db.speed, 1.0, 1.0])
    np.testing.assert_array_equal(more.wall, [*db.wall, 0.0, 0.0])
    np.testing.assert_array_equal(more.load, db.load)
    assert more.edge_cut() == db.edge_cut()  # a one-to-one map of PEs cuts the same edges
    with pytest.raises(UsageError, match="at least 1"):
        db.retarget(0)


# ------------------------------------------------------------------------------ synthesis


def test_synth_sizes_and_block_placement():
    db = synthesize(10_000, 300, "lognormal", "none", "block", seed=1, size=4096)
    assert db.n == 10_000 and db.npes == 300 and db.src.size == 0
    counts = np.bincount(db.pe, minlength=300)
    assert counts.max() - counts.min() <= 1 and np.all(np.diff(db.pe) >= 0)
    assert np.all(db.size == 4096) and np.all(db.migratable)
    assert db.wall is not None and db.idle is not None
    np.testing.assert_allclose(db.wall - db.idle, db.pe_loads())


def test_synth_lognormal_has_the_asked_sigma():
    db = synthesize(100_000, 64, "lognormal", sigma=0.5, seed=2)
    logs = np.log(db.load)
    assert abs(logs.mean()) < 0.01 and abs(logs.std() - 0.5) < 0.01


def test_synth_bimodal_has_ten_percent_heavy_objects():
    db = synthesize(20_000, 64, "bimodal", placement="random", seed=3)
    assert np.count_nonzero(db.load == 10.0) == 2_000
    assert np.count_nonzero(db.load == 1.0) == 18_000
    heavy = np.flatnonzero(db.load == 10.0)
    assert np.ptp(heavy) > 15_000  # spread over the index space, not a block
    assert 0 <= db.pe.min() and db.pe.max() < 64


def test_synth_hotspot_is_one_contiguous_heavy_block():
    db = synthesize(5_000, 16, "hotspot", heavy=0.2, factor=4.0, seed=4)
    heavy = np.flatnonzero(db.load == 4.0)
    assert heavy.size == 1_000 and np.all(np.diff(heavy) == 1)
    assert db.imbalance() > 2.0  # a block placement piles the hot block on few PEs


def test_synth_is_reproducible_from_its_seed():
    a = synthesize(1000, 8, "bimodal", "random", "random", seed=9)
    assert_same(a, synthesize(1000, 8, "bimodal", "random", "random", seed=9))
    assert not np.array_equal(a.pe, synthesize(1000, 8, "bimodal", "random", "random",
                                               seed=10).pe)


def brute_force_stencil(n: int, ndims: int) -> set[tuple[int, int]]:
    coords = np.array(np.unravel_index(np.arange(n), grid_shape(n, ndims))).T
    return {(i, j) for i, j in itertools.permutations(range(n), 2)
            if np.abs(coords[i] - coords[j]).sum() == 1}


@pytest.mark.parametrize("ndims", [2, 3])
@pytest.mark.parametrize("n", [1, 2, 5, 9, 10, 17, 27, 30, 64, 100])
def test_stencil_edges_match_brute_force(n, ndims):
    src, dst = stencil_edges(n, ndims)
    pairs = list(zip(src.tolist(), dst.tolist(), strict=True))
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == brute_force_stencil(n, ndims)


def test_grid_shapes_are_near_square_and_hold_the_objects():
    assert grid_shape(10**6, 2) == (1000, 1000)
    assert grid_shape(10**6, 3) == (100, 100, 100)
    assert grid_shape(10, 3) == (2, 3, 3)
    for n in range(1, 300):
        for d in (2, 3):
            shape = grid_shape(n, d)
            assert np.prod(shape) >= n > np.prod(shape) - np.prod(shape[1:])
            assert shape[0] <= shape[-1]


def test_full_stencil_grids_have_the_textbook_edge_count():
    # a 2-d grid of r x c has 2 (r (c - 1) + c (r - 1)) directed edges; 30^3 has 6 * 30^2 * 29
    assert synthesize(10_000, 4, graph="stencil2d").src.size == 2 * 2 * 100 * 99
    assert synthesize(27_000, 4, graph="stencil3d").src.size == 6 * 30 * 30 * 29


@pytest.mark.parametrize("n,k", [(1, 4), (2, 4), (5, 4), (6, 4), (1000, 4), (50, 10)])
def test_random_graph_has_k_distinct_neighbours_each(n, k):
    src, dst = random_edges(n, k, np.random.default_rng(n))
    per = min(k, n - 1)
    assert src.size == n * per
    assert np.all(src != dst) and np.all((dst >= 0) & (dst < n))
    np.testing.assert_array_equal(np.bincount(src, minlength=n), per)
    assert len(set(zip(src.tolist(), dst.tolist(), strict=True))) == src.size
    db = synthesize(n, 3, graph="random", degree=k, edge_bytes=100)
    assert db.src.size == n * per and np.all(db.bytes == 100) and np.all(db.messages == 1)


def test_a_million_objects_synthesise_in_seconds():
    import time

    t = time.perf_counter()
    db = synthesize(10**6, 16384, "lognormal", "stencil3d", seed=0)
    assert db.n == 10**6 and db.src.size == 6 * 100 * 100 * 99
    assert time.perf_counter() - t < 10


@pytest.mark.parametrize("kwargs,message", [
    ({"objects": 0}, "at least 1 object"), ({"pes": 0}, "1 PE"),
    ({"load": "pareto"}, "unknown load distribution 'pareto'"),
    ({"graph": "torus"}, "unknown communication graph 'torus'"),
    ({"placement": "cyclic"}, "unknown placement 'cyclic'"),
    ({"sigma": -1.0}, "sigma must be"), ({"heavy": 1.5}, "heavy fraction"),
    ({"factor": float("inf")}, "heavy factor"), ({"degree": -1}, "degree"),
    ({"size": -1}, "sizes must be >= 0"),
])
def test_synth_refuses_impossible_parameters(kwargs, message):
    args = {"objects": 10, "pes": 2, **kwargs}
    with pytest.raises(UsageError, match=message):
        synthesize(**args)


def test_capacity_is_the_share_of_the_core_while_the_pe_wanted_it():
    """Two PEs that sleep half the time: PE 1 lost half its waking time to another
    process. Its capacity is half PE 0's (of the whole wall time, only a quarter was lost:
    that would say 0.75 and hand it too much work). Without ``slept`` (older files), the
    share is of the wall time."""
    db = LBDatabase(np.ones(4), np.array([0, 0, 1, 1]), 2, wall=np.array([10.0, 10.0]),
                    idle=np.array([6.0, 6.0]), slept=np.array([5.0, 5.0]),
                    background=np.array([0.0, 2.5]))
    cap = db.capacity()
    assert cap[1] / cap[0] == pytest.approx(0.5) and cap.sum() == pytest.approx(2.0)
    db.slept = None
    db.__post_init__()
    assert db.capacity()[1] / db.capacity()[0] == pytest.approx(0.75)
    assert core_share(10.0, 10.0, 0.0) == 1.0  # asleep throughout: nothing says it is slow
    assert core_share(10.0, 0.0, 100.0) == pytest.approx(0.05)  # never below 5%


def test_the_runtime_database_counts_loads_in_the_average_pes_seconds():
    """PE 1 runs at half speed (its calibration loop took twice as long): its element's 2 s
    and PE 0's element's 1 s are the same work, 1.33 s of the average PE's; capacity
    follows speed, so the same work on the slow PE takes it twice as long (max/avg 1.5)."""
    from shoal.runtime.lb.driver import _database

    def part(pe, load, speed):
        return {"pe": pe, "keys": [(0, (pe,))], "load": [load], "size": [8],
                "migratable": [True], "pos": [(pe,)], "edges": [], "wall": 1.0, "idle": 0.0,
                "slept": 0.0, "background": 0.0, "speed": speed}

    db = _database([part(0, 1.0, 2.0), part(1, 2.0, 1.0)], 2)
    assert db.load == pytest.approx([4 / 3, 4 / 3])
    assert db.capacity() == pytest.approx([4 / 3, 2 / 3])
    assert db.imbalance() == pytest.approx(1.5)


def test_speeds_closer_than_the_probes_resolution_count_as_equal():
    """The speed probe of identical cores differs by up to 20% from step to step: PEs
    within SPEED_BAND of the median speed count as equal (their loads unscaled, equal
    capacities); one at 0.7x of the others (Acun14 Fig. 17) still counts as slower."""
    from shoal.runtime.lb.driver import SPEED_BAND, _database

    def part(pe, speed):
        return {"pe": pe, "keys": [(0, (pe,))], "load": [1.0], "size": [8],
                "migratable": [True], "pos": [(pe,)], "edges": [], "wall": 1.0, "idle": 0.0,
                "slept": 0.0, "background": 0.0, "speed": speed}

    near = 1.0 - 0.9 * SPEED_BAND
    db = _database([part(0, 1.0), part(1, near), part(2, 1.0)], 3)
    assert db.load == pytest.approx([1.0, 1.0, 1.0])
    assert db.capacity() == pytest.approx([1.0, 1.0, 1.0])
    db = _database([part(0, 1.0), part(1, 0.7), part(2, 1.0)], 3)
    assert db.load[1] == pytest.approx(0.7 * db.load[0])  # its second did less work
    assert db.capacity()[1] == pytest.approx(0.7 * db.capacity()[0])


def test_messages_inside_a_pe_count_at_the_average_bytes_of_those_between_pes():
    """Local messages travel unpickled (0 bytes in the statistics): the database gives them
    the bytes per message of the remote ones, or an earlier step's when none went between
    PEs, so a partitioner does not see neighbours it put together as strangers."""
    from shoal.runtime.lb.driver import _estimate_local_bytes

    db = LBDatabase(np.ones(4), np.array([0, 0, 1, 1]), 2, src=np.array([0, 1, 2, 3]),
                    dst=np.array([1, 2, 3, 0]), messages=np.array([4, 2, 6, 1]),
                    bytes=np.array([0, 2000, 0, 500]))
    kept = _estimate_local_bytes(db, 7.0)
    assert kept == 2500 / 3  # bytes per message between PEs: (2000 + 500) / (2 + 1)
    np.testing.assert_array_equal(db.bytes, [round(4 * kept), 2000, 6 * kept, 500])
    local = LBDatabase(np.ones(2), np.array([0, 0]), 2, src=np.array([0, 1]),
                       dst=np.array([1, 0]), messages=np.array([3, 0]),
                       bytes=np.array([0, 0]))
    assert _estimate_local_bytes(local, kept) == kept  # nothing between PEs: the last one
    np.testing.assert_array_equal(local.bytes, [round(3 * kept), 0])


def test_a_pes_background_share_is_averaged_over_time_not_steps():
    """The share of the core a PE had, smoothed: an interference that begins after a long
    quiet period shows within a few short periods, and a steady share is the same however
    the time is cut into periods (an exponential average over time, checked against its
    integral for a share that switches from 0 to 42% of the core)."""
    from shoal.runtime.lb.driver import CONTENTION_TIME, smoothed_background

    def share(periods):
        acc = [0.0, 0.0]
        for wall, bg in periods:
            out = smoothed_background(acc, bg * wall, wall, wall)
        return out / wall

    tau = CONTENTION_TIME
    for cut in (0.01, 0.05, 0.1):  # 1 s quiet, then 0.3 s at 42%, in periods of ``cut``
        got = share([(1.0, 0.0)] + [(cut, 0.42)] * round(0.3 / cut))
        # the exponential average of the share over the 1.3 s, exactly
        assert got == pytest.approx(0.42 * (1 - np.exp(-0.3 / tau)) / (1 - np.exp(-1.3 / tau)),
                                    rel=1e-9)
    # one long period stands nearly alone; steady shares stay what they are
    assert share([(0.05, 0.0)] * 20 + [(1.0, 0.42)]) == pytest.approx(0.42, rel=1e-4)
    assert share([(0.03, 0.25)] * 50) == pytest.approx(0.25)
    acc = [0.0, 0.0]
    assert smoothed_background(acc, 0.0, 0.0, 0.0) == 0.0  # nothing wanted, nothing known
