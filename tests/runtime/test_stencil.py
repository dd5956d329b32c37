"""examples/stencil2d.py on 2 and 3 PEs equals a serial numpy Jacobi, bit for bit."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shoal.launch import mpiexec

EXAMPLE = Path(__file__).parents[2] / "examples" / "stencil2d.py"


def serial(n: int, iters: int) -> np.ndarray:
    u = np.zeros((n + 2, n + 2))
    u[0, :] = 1.0
    for _ in range(iters):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u[1:-1, 1:-1]


@pytest.mark.parametrize("ranks,blocks,check", [(2, 4, 1), (3, 3, 5)])
def test_blocks_match_the_serial_solution(tmp_path, ranks, blocks, check):
    n, iters = 48, 40
    out = tmp_path / "grid.npy"
    done = subprocess.run([*mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLE),
                           "--n", str(n), "--blocks", str(blocks), "--iters", str(iters),
                           "--check", str(check), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{iters} iterations" in done.stdout
    assert np.array_equal(np.load(out), serial(n, iters))


def test_tolerance_stops_early(tmp_path):
    done = subprocess.run([*mpiexec(), "-n", "2", sys.executable, str(EXAMPLE), "--n", "32",
                           "--blocks", "2", "--iters", "5000", "--tol", "1e-3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    iters = int(done.stdout.split(" iterations")[0].split()[-1])
    assert 10 < iters < 5000
    change = float(done.stdout.split("max change ")[1].split(",")[0])
    assert change <= 1e-3
