"""Broadcasts while elements migrate (jobs/broadcasts.py; issue 17, section 5): any number
of broadcasts, each run once and in order by every element, however far apart the PEs
are; the PEs an element left replay what its new PE has forgotten."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks,shm", [(4, None), (3, 0)], ids=["4-ranks", "3-ranks-mpi-only"])
def test_300_broadcasts_in_a_loop_while_elements_migrate_run_once_each_in_order(ranks, shm):
    moves, _ = run_ok("broadcasts", ranks, "many", shm=shm)["many"]  # before: an abort
    assert moves > 200  # 20% of 300 x 32 broadcasts ask to move, most to another PE


def test_elements_behind_a_pe_that_forgot_their_broadcasts_get_them_from_the_pe_they_left():
    figures = run_ok("broadcasts", 4, "behind", "many", options=("--history", "8"))
    assert figures["behind"][1:] == [4, 4, 4]  # each PE off PE 0 replayed to its 4 elements
    moves, replays = figures["many"]
    assert moves > 200 and replays > 0
