"""Collection ids that never collide, and destroying a collection on every PE
(jobs/lifetime.py; issue 17, section 4)."""

from mpi_jobs import run_job, run_ok


def test_ids_of_collections_do_not_collide_after_2_to_the_20_on_one_pe():
    mine, theirs = run_ok("lifetime", 2, "ids")["ids"]  # before: both 2^20, a hang
    assert mine == 1 << 40 and theirs == 1  # (PE 0, number 2^20) and (PE 1, number 0)


def test_destroyed_collections_leave_nothing_behind_on_any_pe():
    assert run_ok("lifetime", 3, "destroy_frees")["destroy_frees"] == 2000


def test_calls_to_a_destroyed_collection_are_errors_at_the_caller():
    said = run_ok("lifetime", 2, "destroy_errors")["destroy_errors"]
    assert "nothing can be sent to it any more" in said


def test_destroying_a_collection_with_messages_queued_and_in_flight_ends_them_cleanly():
    out = run_job("lifetime", 3, "destroy_busy")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK destroy_busy" in out.stdout


def test_records_of_messages_and_channels_to_destroyed_collections_are_forgotten():
    sent, keep = run_ok("lifetime", 3, "destroy_links")["destroy_links"]
    # each talker sent the lasting array 6 + 7 + 8 calls and 3 channel values and, on
    # record, nothing to the 3 destroyed ones
    assert sent == [{keep: 24}] * 6, sent
