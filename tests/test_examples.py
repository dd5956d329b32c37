"""Every program in examples/ runs as its docstring says, with its defaults (smaller sizes
only where a default is sized for a benchmark), and ends well."""

import subprocess
import sys
from pathlib import Path

import pytest

from shoal.launch import mpiexec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUN = [sys.executable, "-m", "shoal", "run", "-n", "2", "--timeout", "120s"]
CASES = {  # example: (how it is launched, its arguments, what its output says)
    "amr.py": ([*RUN[:4], "-n", "1", *RUN[6:]],  # 1 PE: 2 and 3 in tests/apps/test_amr.py
               ["--block", "4", "--max-level", "4", "--steps", "32", "--remesh-every", "2",
                "--serial"], "the same bits"),
    "hello.py": (RUN, [], "2 PEs on 1 node(s), 8 elements"),
    "barneshut.py": (RUN, ["--n", "2000", "--steps", "4", "--lb-every", "2", "--check", "50"],
                     "99th percentile"),
    "checkpoint.py": (RUN, [], "20 iterations, checksum"),
    "control_pipeline.py": (RUN, ["--iters", "150", "--floats", "65536"], "measured stages="),
    "gossip_service.py": ("mpiexec", [], "busy"),
    "gossip_sweep.py": ([sys.executable], ["--nodes", "64", "--out", "fig.png"],
                        "wrote fig.png"),
    "leanmd.py": (RUN, [], "energy drift"),
    "phold.py": (RUN, [], "conservation ok"),
    "pingpong.py": (RUN, [], "1048576"),
    "power_jacobi.py": ([*RUN, "--power-threshold", "50C", "--lb", "auto"],
                        ["--n", "256", "--iters", "40", "--sync-every", "5"],
                        "EMULATED max temperature"),
    "resize.py": (RUN, ["--elements", "200", "--kib", "16", "--iterations", "50"],
                  "50 iterations on 2 PEs"),
    "stencil2d.py": (RUN, ["--n", "512", "--iters", "10"], "10 iterations"),
    "stencil_hotspot.py": (RUN, ["--n", "512", "--iters", "20"], "LB steps"),
    "vmpi_jacobi.py": ([*RUN, "--lb", "greedy_refine"],
                       ["--n", "256", "--iters", "40", "--heavy", "2", "--migrate-every", "10"],
                       "16 ranks on 2 PEs"),
}


def test_every_example_is_in_the_table():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_example_runs(tmp_path, name):
    launcher, args, says = CASES[name]
    if launcher == "mpiexec":
        launcher = [*mpiexec(), "-n", "2", sys.executable]
    out = subprocess.run([*launcher, str(EXAMPLES / name), *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert says in out.stdout, out.stdout[-2000:]
    assert "Traceback" not in out.stderr
