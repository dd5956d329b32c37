"""Groups and priorities on 3 ranks (jobs/groups.py)."""

from mpi_jobs import run_ok


def test_a_group_has_one_member_on_each_pe_indexed_by_its_pe():
    run_ok("groups", 3, "one_per_pe")


def test_messages_waiting_for_an_element_run_lowest_priority_value_first():
    run_ok("groups", 3, "priorities")
