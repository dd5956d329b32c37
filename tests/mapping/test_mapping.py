"""Patterns, mappings, the worked example of Balaji11 (Section 3.2), mapfiles, bad input."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal import UsageError
from shoal.mapping.mapfiles import read_csv, write
from shoal.mapping.mappings import ordering, orderings
from shoal.mapping.patterns import parse
from shoal.mapping.select import rank
from shoal.topology.torus import Torus


def shoal(*args):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                          text=True, timeout=300)


def test_worked_example_txyz_worst_tzxy_best_with_the_papers_counts():
    torus = Torus((8, 16, 32), cores=4)
    pattern = parse("grid 128x128 stencil=star periodic=no bytes=1MiB")
    ranked = rank(torus, pattern, ["TXYZ", "TZXY", "XYZT"])
    names = [c[0] for c in ranked]
    assert names[0] == "TZXY" and names[-1] == "TXYZ"
    metrics = {c[0]: c[1] for c in ranked}
    assert metrics["TXYZ"]["per_process"] == 24
    assert metrics["TZXY"]["per_process"] == 6
    assert metrics["TXYZ"]["max"] > 3 * metrics["TZXY"]["max"]


def test_patterns_have_the_right_partners():
    star = parse("grid 8x8 stencil=star")
    partners = np.bincount(star.src, minlength=64)
    assert partners.max() == 8 and partners.min() == 3  # interior and corners
    edges = parse("grid 4x4x4 stencil=edges periodic=yes")
    assert np.all(np.bincount(edges.src) == 6)
    star3 = parse("grid 4x4x4 stencil=star periodic=yes")
    assert np.all(np.bincount(star3.src) == 26)
    dimwise = parse("dimwise 4x6")
    assert np.all(np.bincount(dimwise.src) == 3 + 5)
    diag = parse("diagonal 5x5")
    assert np.bincount(diag.src, minlength=25)[12] == 8  # the centre sees both diagonals
    a2a = parse("alltoall 10 bytes=2KiB")
    assert len(a2a.src) == 90 and np.all(a2a.nbytes == 2048)
    col = parse("grid 4x3 stencil=edges order=column")
    row = parse("grid 4x3 stencil=edges")
    assert len(col.src) == len(row.src) and not np.array_equal(col.src, row.src)


def test_pattern_files(tmp_path):
    (tmp_path / "p.toml").write_text('kind = "grid"\nsize = "4x4"\nstencil = "edges"\n')
    assert len(parse(f"@{tmp_path / 'p.toml'}").src) == 48
    (tmp_path / "bad.toml").write_text("kind = grid\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        parse(f"@{tmp_path / 'bad.toml'}")
    (tmp_path / "bad.json").write_text("{kind")
    with pytest.raises(UsageError, match="not valid JSON"):
        parse(f"@{tmp_path / 'bad.json'}")
    (tmp_path / "g.txt").write_text("# edges\n0 1 1KiB\n1 0\n2 3 64\n")
    g = parse(f"graph {tmp_path / 'g.txt'} bytes=8")
    assert g.nprocs == 4 and list(g.nbytes) == [1024, 8, 64]


@given(st.sampled_from(["TXYZ", "ZYXT", "XTZY", "YZTX"]))
def test_an_ordering_is_a_bijection_and_round_trips_through_a_mapfile(mapping):
    torus = Torus((2, 3, 2), cores=2)
    node, core = ordering(torus, mapping)
    places = node * torus.cores + core
    assert sorted(places) == list(range(torus.processes))
    inverse = np.empty_like(places)
    inverse[places] = np.arange(len(places))
    assert np.array_equal(inverse[places], np.arange(len(places)))


def test_mapfiles(tmp_path):
    torus = Torus((2, 2, 2), cores=2)
    node, core = ordering(torus, "XTYZ")
    write(tmp_path / "m.csv", "csv", torus, node, core)
    back = read_csv(tmp_path / "m.csv", torus)
    assert np.array_equal(back[0], node) and np.array_equal(back[1], core)
    write(tmp_path / "m.bgq", "bgq", torus, node, core)
    first = (tmp_path / "m.bgq").read_text().splitlines()
    assert first[:3] == ["0 0 0 0", "1 0 0 0", "0 0 0 1"]  # X fastest, then T
    write(tmp_path / "rf", "openmpi", torus, node, core)
    assert (tmp_path / "rf").read_text().splitlines()[1] == "rank 1=node1 slot=0"
    write(tmp_path / "hosts", "slurm", torus, node, core, hosts=[f"n{i}" for i in range(8)])
    assert (tmp_path / "hosts").read_text().split()[:3] == ["n0", "n1", "n0"]
    assert len(orderings(torus)) == 24


@pytest.mark.parametrize("args,hint", [
    (["--torus", "4x4", "--cores", "2", "--pattern", "grid 8x8"], "has 64 processes"),
    (["--torus", "4x4", "--pattern", "grid 4x4", "--mappings", "TXX"], "each of TXY once"),
    (["--torus", "4x4", "--pattern", "grid 4x4", "--mappings", "TXQ"], "each of TXY once"),
    (["--torus", "4x4", "--pattern", "grid 8x8"], "has 64 processes"),
    (["--torus", "4xfour", "--pattern", "grid 4x4"], "8x16x32"),
    (["--torus", "4x4", "--pattern", "mesh 4x4"], "starts with one of"),
    (["--torus", "4x4", "--pattern", "grid 4x4 stencil=box"], "stencil=star|edges"),
])
def test_bad_input_exits_2(args, hint):
    out = shoal("map", *args)
    assert out.returncode == 2, out.stdout
    assert hint in out.stderr


def test_malformed_edge_list(tmp_path):
    (tmp_path / "g.txt").write_text("0 1\n1 two\n")
    with pytest.raises(UsageError, match=r"g\.txt:2"):
        parse(f"graph {tmp_path / 'g.txt'}")
    out = shoal("map", "--torus", "2", "--pattern", f"graph {tmp_path / 'g.txt'}")
    assert out.returncode == 2 and "g.txt:2" in out.stderr


def test_map_command_writes_the_best_mapping(tmp_path):
    out = shoal("map", "--torus", "4x4", "--cores", "2", "--pattern",
                "grid 8x4 stencil=star bytes=1KiB", "--out", str(tmp_path / "m.csv"))
    assert out.returncode == 0, out.stderr
    assert "best:" in out.stdout
    assert len((tmp_path / "m.csv").read_text().splitlines()) == 33
    out = shoal("topology", "show", "8x16x32", "--cores", "4")
    assert out.returncode == 0 and "4096 nodes" in out.stdout


def test_reorder_gives_each_process_the_rank_the_mapping_puts_there():
    from pathlib import Path

    from shoal.launch import mpiexec

    job = Path(__file__).with_name("reorder_job.py")
    out = subprocess.run([*mpiexec(), "-n", "4", sys.executable, str(job)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "OK reorder [0, 2, 1, 3]" in out.stdout


def test_the_optimiser_beats_the_best_ordering_on_diagonals_and_never_loses():
    diag = rank(Torus((4, 4), cores=4), parse("diagonal 8x8"), optimize=True, rounds=60)
    best_ordering = next(c for c in diag if c[0] != "optimized")
    optimized = next(c for c in diag if c[0] == "optimized")
    assert diag[0][0] == "optimized"
    assert optimized[1]["max"] < 0.9 * best_ordering[1]["max"]
    for torus, text in [(Torus((4, 4, 2), cores=2), "grid 8x8 stencil=star"),
                        (Torus((3, 3, 3)), "grid 3x9 stencil=edges periodic=yes")]:
        ranked = rank(torus, parse(text), optimize=True, rounds=30)
        best_ordering = next(c for c in ranked if c[0] != "optimized")
        optimized = next(c for c in ranked if c[0] == "optimized")
        assert (optimized[1]["max"], optimized[1]["mean"]) <= (best_ordering[1]["max"],
                                                               best_ordering[1]["mean"])
        node, core = optimized[2]
        places = node * torus.cores + core
        assert sorted(places) == list(range(torus.processes))  # a valid placement


def test_tiled_mappings_place_compact_blocks_and_can_beat_every_ordering():
    from shoal.mapping.mappings import tiled

    torus = Torus((4, 4), cores=4)
    pattern = parse("grid 8x8 stencil=edges periodic=yes")
    node, core = tiled(torus, pattern.grid, "row", (2, 2), "XY")
    places = node * 4 + core
    assert sorted(places) == list(range(64))
    # each node holds a 2x2 block of the logical grid
    for n in range(16):
        ranks = np.flatnonzero(node == n)
        rows, cols = np.divmod(ranks, 8)
        assert rows.max() - rows.min() == 1 and cols.max() - cols.min() == 1
    ranked = rank(torus, pattern)
    assert ranked[0][0].startswith("tile2x2")
    best_ordering = next(c for c in ranked if not c[0].startswith("tile"))
    assert ranked[0][1]["max"] * 2 <= best_ordering[1]["max"]
    with pytest.raises(UsageError, match="does not divide"):
        tiled(torus, (8, 8), "row", (3, 2), "XY")


def test_a_tile_on_a_box_of_nodes_keeps_the_block_on_the_box():
    from shoal.mapping.mappings import placement

    torus = Torus((4, 4, 2), cores=2)
    node, core = placement(torus, "tile4x2/2x2x1:XYZ", grid=(8, 8), order="row")
    assert sorted(node * 2 + core) == list(range(64))
    coords = torus.coords(node)
    for r0 in range(0, 8, 4):
        for c0 in range(0, 8, 2):
            ranks = [r * 8 + c for r in range(r0, r0 + 4) for c in range(c0, c0 + 2)]
            box = coords[ranks]
            assert np.ptp(box[:, 0]) <= 1 and np.ptp(box[:, 1]) <= 1 and np.ptp(box[:, 2]) == 0
    with pytest.raises(UsageError, match="does not divide the torus"):
        placement(torus, "tile4x2/3x1x1:XYZ", grid=(8, 8))
