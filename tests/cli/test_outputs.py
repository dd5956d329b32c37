"""Every option that names an output file is checked before any work (Mistakes in the
README): a figure in a format matplotlib cannot write is refused in one line, exit code 2,
with the formats that work, and nothing is written, not even the command's other outputs."""

import subprocess
import sys

import pytest

FIGURES = [  # (command, its figure option): every command that draws a figure
    (["gossip", "simulate", "--nodes", "64", "--csv", "ok.csv"], "--plot"),
    (["gossip", "overhead", "-n", "2", "--csv", "ok.csv"], "--plot"),
    (["netmodel", "fit", "data.csv", "--save", "ok.toml"], "--plot"),
    (["netmodel", "fit", "data.csv", "--save", "ok.toml"], "--errors"),
    (["lb", "simulate", "db.npz", "--csv", "ok.csv"], "--plot"),
    (["lb", "plot", "trace.json", "--csv", "ok.csv"], "--out"),
    (["profile", "trace.json", "--csv", "ok.csv"], "--out"),
]


@pytest.mark.parametrize(("args", "flag"), FIGURES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else v)
def test_a_figure_format_matplotlib_cannot_write_is_refused_before_any_work(
        tmp_path, args, flag):
    out = subprocess.run([sys.executable, "-m", "shoal", *args, flag, "out.xyz"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{flag} out.xyz" in lines[0] and "png" in lines[0] \
        and "pdf" in lines[0] and "svg" in lines[0], out.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_shoal_run_refuses_a_pe_count_before_it_makes_anything(tmp_path):
    (tmp_path / "prog.py").write_text("")
    for n in ("0", "-1"):
        out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", n, "--jobdir",
                              str(tmp_path / "job"), "prog.py"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "'-n'" in out.stderr and ">=1" in out.stderr, out.stderr
        assert "job directory" not in out.stderr and not (tmp_path / "job").exists()
