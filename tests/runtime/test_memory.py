"""Memory bounds (jobs/memory.py; issue 17, section 6): the receive-buffer pool is bounded in
bytes; a sender's outstanding messages to a receiver are bounded, and PEs that flood each
other, alone or in a cycle, finish without holding the other's messages in MPI."""

from mpi_jobs import run_ok

MIB = 1 << 20


def test_receive_buffers_kept_for_reuse_stay_within_the_pools_bytes():
    kept, limit, buffers = run_ok("memory", 2, "pool", shm=0,
                                  options=("--pool-bytes", str(4 * MIB)))["pool"]
    assert limit == 4 * MIB
    assert 0 < kept <= limit  # before: one buffer per distinct size, 40 of 1-2 MiB
    assert buffers <= 4


def test_two_pes_flooding_each_other_finish_in_order_without_growing_per_message_in_mpi():
    (before, after, waits) = run_ok("memory", 2, "mutual")["mutual"]
    grown = [a - b for a, b in zip(after, before, strict=True)]
    # each PE holds the other's 200,000 messages until its own entry method returns: as
    # received bytes (about 200 B each), no longer in MPICH's unexpected queue (4.8 KB
    # each: 900 MiB)
    assert max(grown) < 200, grown
    assert max(waits) > 0  # windows held a sender back (which one: a matter of timing)


def test_a_cycle_of_pes_flooding_the_next_one_makes_progress_and_keeps_order():
    waits = run_ok("memory", 4, "ring")["ring"]
    assert sum(waits) > 0


def test_single_migrate_calls_of_one_turn_move_in_one_batch():
    calls = run_ok("memory", 2, "single_migrates")["single_migrates"]
    assert calls == [1, 0]  # before: one migrate_many (a pass over the queue) per element


def test_a_pe_waiting_for_a_window_counts_the_wait_as_idle_time_asleep():
    idle, waited, slept = run_ok("memory", 2, "blocked")["blocked"]
    assert waited > 0.3, waited  # PE 0 was held 1 s with 128 messages outstanding
    assert idle >= waited  # (before: the wait was in no count; the balancer saw background)
    assert slept > 0.5 * waited, (slept, waited)  # it polls with back-off


def test_a_sender_whose_windows_are_full_goes_on_with_its_work():
    # PE 0 is held until PE 1 signals, which PE 1 does after sending PE 0 300 messages
    # (two windows: 128): waiting for the windows there, PE 1 never signalled
    assert run_ok("memory", 2, "backlog")["backlog"] == [True]
