"""Migration under traffic (jobs/migration.py) on 4 and 2 ranks, and on 4 ranks with every
large buffer by MPI (the path between nodes, on one node)."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks,shm", [(4, None), (2, None), (4, 0)],
                         ids=["4-ranks", "2-ranks", "4-ranks-mpi-only"])
def test_migrating_elements_under_traffic_lose_no_message_and_keep_send_order(ranks, shm):
    sent, moves = run_ok("migration", ranks, "traffic", shm=shm)["traffic"]
    assert sent == 24 * 30 * 8
    assert moves > 50  # about 30% of 720 ticks ask to move, 3 in 4 (1 in 2) to another PE
