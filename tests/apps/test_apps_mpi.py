"""PTRANS and the six-step FFT on 2-4 ranks against numpy."""

import subprocess
import sys
from pathlib import Path

import pytest

from shoal.launch import mpiexec

JOB = Path(__file__).with_name("apps_job.py")


@pytest.mark.parametrize("ranks", [2, 4])
def test_kernels_match_numpy(ranks):
    out = subprocess.run([*mpiexec(), "-n", str(ranks), sys.executable, str(JOB)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK ptrans" in out.stdout
    assert out.stdout.count("OK fft") == 2
    assert "OK benchmarks" in out.stdout
    assert "OK cosmo" in out.stdout
