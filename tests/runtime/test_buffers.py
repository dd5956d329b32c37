"""Large buffers on 2 ranks: through the shared segments of the PEs, by MPI when the
segments are full, off, or cannot be had, and the envelope tags around the shared-memory tag
(jobs/shared_memory.py, jobs/wire.py, jobs/coroutines.py)."""

import pytest
from mpi_jobs import run_job, run_ok

MB = 1 << 20


def test_an_array_bounced_between_two_pes_goes_by_shared_memory_on_every_hop():
    shared, _ = run_ok("shared_memory", 2, "bounce", shm=4 * MB)["bounce"]
    assert shared == [30 * MB, 30 * MB], shared  # every hop (and the result)


def test_large_arrays_go_by_mpi_when_shared_memory_is_off():
    shared, sent = run_ok("shared_memory", 2, "bounce", shm=0)["bounce"]
    assert shared == [0, 0], shared
    assert all(s >= 30 * MB for s in sent), sent


def test_arrays_kept_by_the_receiver_overflow_into_mpi_and_free_their_blocks_when_dropped():
    run_ok("shared_memory", 2, "overflow", shm=4 * MB)


def test_more_than_64_blocks_in_flight_are_all_taken_back_when_the_receiver_drops_them():
    run_ok("shared_memory", 2, "many_blocks", shm=8 * MB)


@pytest.mark.parametrize("shm", [None, 0], ids=["shared-memory", "mpi-only"])
def test_messages_with_several_arrays_arrive_intact_after_a_send_that_failed_to_pickle(shm):
    run_ok("wire", 2, "messages", shm=shm)


@pytest.mark.parametrize("shm", [None, 0], ids=["shared-memory", "mpi-only"])
def test_envelopes_larger_than_the_posted_receive_arrive_intact_and_in_order(shm):
    run_ok("wire", 2, "big", shm=shm)


def test_without_room_for_the_shared_window_large_buffers_go_by_mpi():
    scenarios = ("channels", "awaits", "sleeping", "suspended_migration")
    out = run_job("coroutines", 2, *scenarios, shm=1 << 50)  # a petabyte per PE: it fails
    assert out.returncode == 0, out.stderr[-3000:]
    assert all(f"OK {s}" in out.stdout for s in scenarios), out.stdout
    assert out.stderr.count("shoal: no shared memory for large messages on this node") == 1
