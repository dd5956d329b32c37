"""shoal.iwait (over futures and channels), shoal.future(n) and awaitable broadcasts
(jobs/futures.py)."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks", [2, 4])
def test_iwait_future_of_n_and_awaitable_broadcasts(ranks):
    got = run_ok("futures", ranks, "iwait_order", "future_of_n", "awaitable_broadcast",
                 "iwait_channels")
    assert got["iwait_order"] == [3, 0, 4, 1, 2]
    assert got["iwait_channels"] == [4, 2, 5, 1, 3]
