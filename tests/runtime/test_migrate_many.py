"""Batch migration (jobs/migrate_many.py): every PE moves about half of its elements in one
migrate_many call, with messages queued for them, broadcasts and reductions in flight and
one element suspended in a coroutine; on 3 ranks, and on 2 with large buffers by MPI."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks,shm", [(3, None), (2, 0)], ids=["3-ranks", "2-ranks-mpi-only"])
def test_a_batch_of_migrations_keeps_every_message_in_order_and_defers_suspended_elements(
        ranks, shm):
    moves, arrivals, deferred = run_ok("migrate_many", ranks, "batch", shm=shm)["batch"]
    assert moves > 48  # 12 rounds, about half of 48 elements named, most to another PE
    assert arrivals in (moves, moves + 1)  # + the suspended element, if it moved at the end
    assert deferred >= 1  # the suspended element was named at least once
