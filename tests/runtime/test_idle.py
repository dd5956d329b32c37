"""What a waiting PE costs, in counts, on 2 ranks (jobs/idle.py): it hands a shared core to
the PE it waits for, and large arrays bounced between PEs travel in memory whose pages are
mapped already."""

import pytest
from mpi_jobs import run_ok

COLD = 256  # minor faults of a 1 MiB block whose pages were never touched (4 KiB pages)


def test_a_pe_waiting_for_its_peer_on_a_shared_core_yields_the_core():
    # both PEs pinned to one core and spinning without sleeps (poll_spin 1 s): a PE that
    # polled through its time slice made about 7,000 polls per round trip here, one that
    # yields after 20 us makes 20-230
    small, big = run_ok("idle", 2, "one_core", options=("--poll-spin", "1"))["one_core"]
    assert max(small) < 1000 and max(big) < 1000, (small, big)


@pytest.mark.parametrize("shm", [None, 0], ids=["shared-memory", "mpi-only"])
def test_a_large_array_bounced_between_pes_travels_in_warm_memory(shm):
    faults = run_ok("idle", 2, "warm_blocks", shm=shm)["warm_blocks"]
    assert max(faults) < COLD / 8, faults
