"""The end of a job: once main has returned and no work is left, or at shoal.exit(),
which says what it leaves behind (jobs/ending.py)."""

import pytest
from mpi_jobs import run_job


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("mode", ["returns", "plain"])
def test_work_main_started_runs_to_its_end_after_main_returned(ranks, mode):
    out = run_job("ending", ranks, mode)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    n = 2 * ranks
    total = sum(k % n for k in range(401))  # 401 calls, element k % n adds its index
    assert lines[0] == "main returned", lines
    assert sorted(lines[1:]) == sorted([f"chain done on PE {(400 % n) * ranks // n}: {total}",
                                        "nap done: 1"]), lines


def test_exit_with_work_queued_ends_the_job_and_says_so():
    out = run_job("ending", 2, "exit")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "the job ends (shoal.exit()) with" in out.stderr, out.stderr[-2000:]
    assert "queued message(s) that do not run" in out.stderr
