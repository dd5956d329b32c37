"""Groups and priorities on 3 ranks (jobs/groups.py)."""

from mpi_jobs import run_ok


def test_a_group_has_one_member_on_each_pe_or_on_the_pes_it_names():
    """Group(cls) on every PE; Group(cls, pes=[0, 2]) (charm4py's onPEs) on those only,
    with its broadcasts, reductions, allreduce, sections and errors (jobs/groups.py)."""
    assert run_ok("groups", 3, "one_per_pe", "on_some_pes")["on_some_pes"] == 2


def test_messages_waiting_for_an_element_run_lowest_priority_value_first():
    run_ok("groups", 3, "priorities")
