"""examples/stencil2d.py on 2, 3 and 4 PEs (square and RxC blocks) equals a serial numpy
Jacobi, bit for bit."""

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


@pytest.mark.parametrize("ranks,blocks,check", [(2, 4, 1), (3, 3, 5), (4, "8x4", 1)])
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


HOTSPOT = EXAMPLE.with_name("stencil_hotspot.py")


@pytest.mark.parametrize("lb", ["greedy_refine", "refine", None])
def test_the_hot_spot_stencil_moves_blocks_and_changes_no_bit(tmp_path, lb):
    """examples/stencil_hotspot.py with its patch moving fast enough that every few
    iterations shift the load: blocks migrate at the sync points (none without them), and
    the grid is the serial Jacobi's, bit for bit (the patch's work writes a scratch array)."""
    import os

    n, iters = 128, 24  # the patch (30x the work) crosses from PE 0's half to PE 1's
    out = tmp_path / "grid.npy"
    cmd = [*mpiexec(), "-n", "2", sys.executable, str(HOTSPOT), "--n", str(n), "--blocks",
           "4", "--iters", str(iters), "--lb-every", "4", "--heat", "30", "--spot", "48",
           "--start", "16", "--speed", "4", "--out", str(out)]
    env = dict(os.environ, SHOAL_LB=lb) if lb else None
    done = subprocess.run(cmd + ([] if lb else ["--no-sync"]), capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    moved = int(done.stdout.split(" migrations")[0].rsplit(" ", 1)[1])
    assert (moved > 0) if lb else (moved == 0), done.stdout
    assert np.array_equal(np.load(out), serial(n, iters))
