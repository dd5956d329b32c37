"""The CLI's promise (issue 17, section 7): a user's mistake is one line on stderr and exit
code 2, found before any work or MPI launch, with nothing lost and nothing half-written.

Each row runs ``shoal ARGS`` (``{tmp}`` is a scratch directory holding the files of
:func:`files`) and states the exit code, a hint the message must hold, and the files that
must not exist afterwards. The commands run under an address-space limit, so that a size
that does not fit in memory fails in the command rather than on the machine."""

import resource
import subprocess
import sys

import numpy as np
import pytest

from shoal.netmodel.data import synthetic, write_csv
from shoal.netmodel.models import Model

LIMIT = 6 << 30  # bytes of address space per command


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def shoal(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_limit)


PROFILE = """[[regime]]
name = "all"
low = 0.0
high = inf
model = "maxrate"
alpha = {alpha}
rc = {rc}
rn = 2e9
"""


@pytest.fixture
def files(tmp_path):
    """Input files, good and bad, in ``tmp_path``."""
    bw = Model("maxrate", {"alpha": 2e-6, "rc": 3.7e9, "rn": 5.5e9})
    write_csv(tmp_path / "good.csv", synthetic(bw, [1, 2, 4], 2.0 ** np.arange(10, 16)))
    (tmp_path / "u16.csv").write_text("k,n,seconds\n1,8,1e-6\n", encoding="utf-16")
    (tmp_path / "u16.toml").write_text("kind = 'grid'\nsize = '4x4'\n", encoding="utf-16")
    (tmp_path / "edges.txt").write_text("0 1\n1 0\n", encoding="utf-16")
    binary = bytes(range(128, 256)) * 3
    for name in ("bin.csv", "bin.toml", "bin.json"):
        (tmp_path / name).write_bytes(binary)
    (tmp_path / "huge.csv").write_text(
        "k,n,seconds\n1,8,1e-6\n1,64,2e-6\n1,1024,1e300\n2,8,2e-6\n2,64,3e-6\n2,1024,4e-6\n")
    (tmp_path / "fast.toml").write_text(PROFILE.format(alpha='"fast"', rc="1e9"))
    (tmp_path / "five.toml").write_text("regime = 5\n")
    (tmp_path / "neg.toml").write_text(PROFILE.format(alpha="1e-6", rc="-1e9"))
    (tmp_path / "nan.toml").write_text(PROFILE.format(alpha="nan", rc="1e9"))
    (tmp_path / "zero.toml").write_text(PROFILE.format(alpha="1e-6", rc="0.0"))
    (tmp_path / "adir").mkdir()
    return tmp_path


SIM = ["gossip", "simulate", "--nodes", "64", "--units", "30"]
FIT = ["netmodel", "fit", "{tmp}/good.csv", "--thresholds", "none"]
MAP = ["map", "--torus", "4x4", "--pattern", "grid 4x4"]
RUN = ["gossip", "run", "-n", "2", "--duration", "1s"]
BENCH = ["netmodel", "bench", "-n", "2", "--pseudo-nodes", "2x1", "--k", "1", "--sizes", "8",
         "--repeat", "1", "--min-time", "1ms"]

# (id, arguments, exit code, hint in stderr, paths that must not exist afterwards)
ROWS = [
    # output paths: checked before the work, all of them, nothing left behind
    ("csv-missing-dir", [*SIM, "--csv", "{tmp}/no/a.csv"], 2, "--csv", []),
    ("csv-is-dir", [*SIM, "--csv", "{tmp}/adir"], 2, "is a directory", []),
    ("csv-unwritable", [*SIM, "--csv", "/proc/shoal-a.csv"], 2, "--csv", []),
    ("second-output-fails", [*SIM, "--csv", "{tmp}/a.csv", "--plot", "{tmp}/no/a.png"], 2,
     "--plot", ["a.csv", "a.csv.json"]),
    ("csv-and-plot-same", [*SIM, "--csv", "{tmp}/same", "--plot", "{tmp}/same"], 2,
     "same file", ["same", "same.json"]),
    ("csv-and-sidecar", [*SIM, "--csv", "{tmp}/s", "--plot", "{tmp}/s.json"], 2,
     "same file", ["s", "s.json"]),
    ("fit-save-missing-dir", [*FIT, "--save", "{tmp}/no/p.toml"], 2, "--save", []),
    ("fit-errors-dir", [*FIT, "--save", "{tmp}/p.toml", "--errors", "{tmp}/adir"], 2,
     "--errors", ["p.toml"]),
    ("map-out-missing-dir", [*MAP, "--out", "{tmp}/no/m.csv"], 2, "--out", []),
    ("bench-csv-before-launch", [*BENCH, "--csv", "{tmp}/no/b.csv"], 2, "--csv", []),
    ("overhead-csv-before-launch", ["gossip", "overhead", "-n", "4", "--every", "2",
                                    "--intervals", "4ms", "--repeat", "1", "--csv",
                                    "{tmp}/no/o.csv"], 2, "--csv", []),
    # input files that are not UTF-8 text
    ("fit-utf16", ["netmodel", "fit", "{tmp}/u16.csv"], 2, "UTF-8", []),
    ("fit-binary", ["netmodel", "fit", "{tmp}/bin.csv"], 2, "UTF-8", []),
    ("profile-binary", ["netmodel", "predict", "--profile", "{tmp}/bin.toml"], 2, "UTF-8", []),
    ("pattern-utf16", ["map", "--torus", "4x4", "--pattern", "@{tmp}/u16.toml"], 2, "UTF-8",
     []),
    ("pattern-json-binary", ["map", "--torus", "4x4", "--pattern", "@{tmp}/bin.json"], 2,
     "UTF-8", []),
    ("edges-utf16", ["map", "--torus", "2", "--pattern", "graph {tmp}/edges.txt"], 2, "UTF-8",
     []),
    # sizes that cannot fit in memory: estimated and refused up front
    ("sim-nodes", ["gossip", "simulate", "--nodes", "100000"], 2, "memory", []),
    ("sim-units", ["gossip", "simulate", "--nodes", "64", "--units", "1000000000"], 2,
     "memory", []),
    ("alltoall-huge", ["map", "--torus", "100000", "--pattern", "alltoall 100000"], 2,
     "memory", []),
    ("grid-huge", ["map", "--torus", "100000x100000", "--pattern", "grid 100000x100000"], 2,
     "memory", []),
    ("torus-huge", ["map", "--torus", "100000x100000x100", "--pattern",
                    "grid 100000x100000x100 stencil=edges"], 2, "memory", []),
    # values a command cannot use
    ("seed-negative", [*SIM, "--seed", "-1"], 2, "--seed", []),
    ("data-1e300", ["netmodel", "fit", "{tmp}/huge.csv", "--thresholds", "none"], 2,
     "seconds", []),
    ("profile-alpha-text", ["netmodel", "predict", "--profile", "{tmp}/fast.toml"], 2,
     "alpha", []),
    ("profile-regime-number", ["netmodel", "predict", "--profile", "{tmp}/five.toml"], 2,
     "regime", []),
    ("profile-negative-rate", ["netmodel", "predict", "--profile", "{tmp}/neg.toml"], 2, "rc",
     []),
    ("profile-nan-latency", ["netmodel", "predict", "--profile", "{tmp}/nan.toml"], 2,
     "alpha", []),
    ("profile-zero-rate", ["netmodel", "advise", "--profile", "{tmp}/zero.toml"], 2, "rc", []),
    ("torus-9d", ["map", "--torus", "2x2x2x2x2x2x2x2x2", "--pattern", "alltoall 512"], 2,
     "dimensions", []),
    # checks made before launching MPI ranks
    ("entry-size-small", [*RUN, "--entry-size", "1B"], 2, "--entry-size", []),
    ("entry-size-huge", [*RUN, "--entry-size", "1TiB"], 2, "--entry-size", []),
    ("max-outstanding-0", [*RUN, "--max-outstanding", "0"], 2, "--max-outstanding", []),
    ("gossip-run-without-n", ["gossip", "run", "--duration", "1s"], 2, "-n", []),
    ("bench-one-host", ["netmodel", "bench", "-n", "2", "--k", "1", "--sizes", "8",
                        "--csv", "{tmp}/b.csv"], 2, "--pseudo-nodes", ["b.csv"]),
    ("bench-sizes-huge", [*BENCH[:-6], "--sizes", "64GiB", "--csv", "{tmp}/b.csv"], 2,
     "memory", ["b.csv"]),
    ("overhead-size-negative", ["gossip", "overhead", "-n", "4", "--every", "2", "--size",
                                "-64"], 2, "--size", []),
    ("rows-negative", [*RUN, "--rows", "-1"], 2, "--rows", []),
    # the smaller ones
    ("bytes-twice", ["map", "--torus", "4x4", "--pattern", "grid 4x4 bytes=1 bytes=2"], 2,
     "bytes", []),
    ("dor-order-adaptive", [*MAP, "--dor-order", "YX"], 2, "--dor-order", []),
]


@pytest.mark.parametrize("args,code,hint,absent", [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_mistake_is_one_line_before_any_work(files, args, code, hint, absent):
    out = shoal(*[a.replace("{tmp}", str(files)) for a in args])
    assert out.returncode == code, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "Abort" not in out.stderr, out.stderr[-2000:]
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert out.stderr.startswith("shoal: error:") or "Error:" in out.stderr
    assert hint in out.stderr
    assert out.stdout == "", "the work ran before the mistake was found"
    for name in absent:
        assert not (files / name).exists(), f"{name} was left behind"


def test_alltoall_of_one_process_has_no_warning():
    out = shoal("map", "--torus", "1", "--pattern", "alltoall 1")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert "best: TX" in out.stdout


def test_a_huge_torus_is_described_without_memory():
    out = shoal("topology", "show", "100000x100000x100")
    assert out.returncode == 0, out.stderr
    nodes = 100000 * 100000 * 100
    assert f"{nodes}" in out.stdout.replace(",", "")
    assert str(6 * nodes) in out.stdout  # directed links: 2 per node and dimension
    assert str(50000 + 50000 + 50) in out.stdout  # diameter
