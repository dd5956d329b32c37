"""``shoal lb synth`` and ``shoal lb simulate`` end to end on small synthetic databases, in
process through the real entry point (one line on stderr and exit code 2 for a user's
mistake), and once as a subprocess."""

import csv
import json
import subprocess
import sys

import pytest

from shoal.cli.main import main
from shoal.runtime.lb import NAMES
from shoal.runtime.lb.database import LBDatabase
from shoal.runtime.lb.strategies import STRATEGIES


def shoal(monkeypatch, capsys, *args):
    """Run ``shoal ARGS`` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["shoal", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def small_db(tmp_path, monkeypatch, capsys):
    path = tmp_path / "db.npz"
    code, out, err = shoal(monkeypatch, capsys, "lb", "synth", "--objects", "2000", "--pes",
                           "16", "--load", "bimodal", "--graph", "stencil2d", "--seed", "5",
                           "--out", path)
    assert code == 0, err
    assert "Synthetic load-balancing database" in out
    return path


def test_synth_writes_the_asked_database(small_db):
    db = LBDatabase.read(small_db)
    assert db.n == 2000 and db.npes == 16
    assert (db.load == 10.0).sum() == 200
    # 44 full rows of 45 and a row of 20: pairs along the rows, then between the rows
    assert db.src.size == 2 * ((44 * 44 + 19) + (43 * 45 + 20))
    assert db.keys is None


def test_synth_accepts_counts_as_powers_of_ten(tmp_path, monkeypatch, capsys):
    path = tmp_path / "p.npz"
    code, _, err = shoal(monkeypatch, capsys, "lb", "synth", "--objects", "10^3", "--pes",
                         "1e1", "--load", "hotspot", "--placement", "random", "--out", path)
    assert code == 0, err
    db = LBDatabase.read(path)
    assert db.n == 1000 and db.npes == 10


def test_simulate_prints_every_strategy_and_writes_csv_and_plot(small_db, tmp_path,
                                                                   monkeypatch, capsys):
    out_csv = tmp_path / "lb.csv"
    png = tmp_path / "loads.png"
    code, out, err = shoal(monkeypatch, capsys, "lb", "simulate", small_db, "--csv", out_csv,
                           "--plot", png)
    assert code == 0, err
    assert "topo left out: it needs the machine (--torus)" in out
    names = [name for name in STRATEGIES if name != "topo"]
    for name in names:
        assert f"{name}: done in" in out
        assert any(line.startswith(f"│ {name} ") for line in out.splitlines())
    assert "2000 objects on 16 PEs" in out
    with out_csv.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["strategy"] for r in rows] == names
    assert list(rows[0]) == ["strategy", "objects", "pes", "edges", "avg_load",
                             "max_load_before", "max_load_after", "max_avg_before",
                             "max_avg_after", "migrations", "migrated_fraction",
                             "bytes_moved", "edge_cut_before", "edge_cut_after",
                             "hop_bytes_before", "hop_bytes_after", "strategy_s", "rounds",
                             "phases", "messages"]
    db = LBDatabase.read(small_db)
    for r in rows:
        assert float(r["max_avg_before"]) == pytest.approx(db.imbalance())
        assert float(r["max_avg_after"]) < float(r["max_avg_before"])
        assert int(r["edge_cut_before"]) == db.edge_cut()
        assert int(r["bytes_moved"]) == 16384 * int(r["migrations"])
        assert float(r["migrated_fraction"]) == int(r["migrations"]) / 2000
        assert r["hop_bytes_after"] == ""
        assert (r["rounds"] != "") == (r["strategy"] == "distributed")
    dist = rows[names.index("distributed")]
    assert int(dist["rounds"]) == 4 and int(dist["messages"]) > 2 * 15  # log2 16 rounds
    metis_row, greedy_row = rows[names.index("metis")], rows[names.index("greedy")]
    assert int(metis_row["edge_cut_after"]) < int(greedy_row["edge_cut_after"])
    meta = json.loads((tmp_path / "lb.csv.json").read_text())
    assert meta["objects"] == 2000 and meta["pes"] == 16 and meta["retarget"] is None
    assert png.stat().st_size > 10_000


def test_simulate_on_a_torus_reports_hop_bytes_and_runs_topo(small_db, tmp_path,
                                                              monkeypatch, capsys):
    out_json = tmp_path / "t.json"
    code, out, err = shoal(monkeypatch, capsys, "lb", "simulate", small_db, "--strategy",
                           "all,metis+refine", "--torus", "2x2x2", "--cores", "2", "--json",
                           out_json)
    assert code == 0, err
    assert "torus 2x2x2" in out
    doc = json.loads(out_json.read_text())
    assert doc["torus"] == "2x2x2" and doc["cores"] == 2
    rows = {r["strategy"]: r for r in doc["results"]}
    assert list(rows) == [*STRATEGIES, "metis+refine"]
    db = LBDatabase.read(small_db)
    from shoal.runtime.lb.machine import Machine
    from shoal.topology.torus import Torus

    machine = Machine.block(Torus((2, 2, 2), 2), 16)
    for r in rows.values():
        assert r["hop_bytes_before"] == machine.hop_bytes(db)
        assert r["hop_bytes_after"] >= 0
    assert rows["topo"]["hop_bytes_after"] <= rows["metis"]["hop_bytes_after"]
    assert rows["metis+refine"]["max_avg_after"] <= 1.05 + 1e-9


def test_simulate_checks_its_outputs_before_the_work(small_db, tmp_path, monkeypatch, capsys):
    code, out, err = shoal(monkeypatch, capsys, "lb", "simulate", small_db, "--csv",
                           tmp_path / "absent" / "x.csv")
    assert code == 2 and "--csv" in err and "does not exist" in err
    assert "done in" not in out  # refused before any strategy ran
    code, _, err = shoal(monkeypatch, capsys, "lb", "simulate", small_db, "--json", tmp_path)
    assert code == 2 and "is a directory" in err


def test_simulate_chains_and_retargets(small_db, tmp_path, monkeypatch, capsys):
    out_csv = tmp_path / "r.csv"
    code, out, err = shoal(monkeypatch, capsys, "lb", "simulate", small_db, "--strategy",
                           "refine, greedy+refine", "--pes", "4", "--csv", out_csv)
    assert code == 0, err
    assert "re-targeted from 16 to 4 PEs" in out
    with out_csv.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["strategy"] for r in rows] == ["refine", "greedy+refine"]
    assert {r["pes"] for r in rows} == {"4"}
    assert json.loads((tmp_path / "r.csv.json").read_text())["pes_in_file"] == 16


@pytest.mark.parametrize("args,hint", [
    (["lb", "simulate", "absent.npz"], "absent.npz: no such file"),
    (["lb", "simulate", "DB", "--strategy", "fastest"],
     "unknown strategy 'fastest' in --strategy 'fastest': use all, or a list of greedy"),
    (["lb", "simulate", "DB", "--strategy", "greedy,"], "unknown strategy ''"),
    (["lb", "simulate", "DB", "--pes", "0"], "--pes must be at least 1"),
    (["lb", "simulate", "DB", "--pes", "many"], "--pes must be a whole number"),
    (["lb", "simulate", "DB", "--pes", "2.5"], "--pes must be a whole number"),
    (["lb", "simulate", "DB", "--strategy", "topo"], "strategy 'topo' needs the machine"),
    (["lb", "simulate", "DB", "--torus", "2x2"], "16 PEs do not fit a torus of 4 nodes"),
    (["lb", "simulate", "DB", "--torus", "2xq"], "cannot read torus '2xq'"),
    (["lb", "simulate", "DB", "--machine-file", "m.csv"], "--machine-file needs --torus"),
    (["lb", "simulate", "DB", "--torus", "4x4", "--machine-file", "m.csv"],
     "cannot read mapping m.csv"),
    (["lb", "synth", "--out", "x.npz", "--objects", "0"], "--objects must be at least 1"),
    (["lb", "synth", "--out", "x.npz", "--heavy", "120%"], "between 0% and 100%"),
    (["lb", "synth", "--out", "x.npz", "--size", "4 parsecs"], "unknown unit"),
    (["lb", "synth", "--out", "x.npz", "--load", "pareto"], "Invalid value for '--load'"),
    (["lb", "synth"], "Missing option '--out'"),
])
def test_mistakes_are_one_line_and_exit_code_2(args, hint, small_db, tmp_path, monkeypatch,
                                                capsys):
    monkeypatch.chdir(tmp_path)
    args = [str(small_db) if a == "DB" else a for a in args]
    code, _, err = shoal(monkeypatch, capsys, *args)
    assert code == 2
    assert hint in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("shoal: error: ")


def test_a_bad_database_file_is_refused_with_its_name(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"garbage" * 50)
    code, _, err = shoal(monkeypatch, capsys, "lb", "simulate", bad)
    assert code == 2 and f"{bad}: not a shoal load-balancing database" in err


def test_help_names_every_strategy(monkeypatch, capsys):
    assert NAMES == tuple(STRATEGIES)  # (the light list the CLI and the PEs check names by)
    for cmd in (["lb"], ["lb", "synth"], ["lb", "simulate"]):
        code, out, _ = shoal(monkeypatch, capsys, *cmd, "--help")
        assert code == 0 and "Usage:" in out
    code, out, _ = shoal(monkeypatch, capsys, "lb", "simulate", "--help")
    assert all(name in out for name in STRATEGIES)


def test_the_installed_command_lists_and_runs_lb(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shoal", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "\n  lb " in out.stdout
    path = tmp_path / "s.npz"
    out = subprocess.run([sys.executable, "-m", "shoal", "lb", "synth", "--objects", "500",
                          "--pes", "8", "--out", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-m", "shoal", "lb", "simulate", str(path),
                          "--strategy", "greedy"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "│ greedy " in out.stdout
