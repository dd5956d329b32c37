"""Messages, broadcasts and calls with ``ret=True`` on 3 ranks (jobs/messaging.py)."""

import pytest
from mpi_jobs import run_ok

from shoal import _compiled

SCENARIOS = ("order", "broadcasts", "call_ret", "broadcast_ret", "exactly_once",
             "method_kinds", "plain_values")


@pytest.fixture(scope="module")
def job():  # one launch for every scenario (why: mpi_jobs.shared)
    return run_ok("messaging", 3, *SCENARIOS)


def test_messages_from_one_sender_to_an_element_arrive_in_send_order(job):
    assert "order" in job


def test_broadcasts_reach_every_element_once_in_send_order(job):
    assert "broadcasts" in job


def test_a_call_with_ret_gives_a_future_of_the_return_value(job):
    assert "call_ret" in job


def test_broadcast_with_ret_gathers_every_return_value_in_index_order(job):
    assert "broadcast_ret" in job


def test_messages_to_migrating_elements_are_each_delivered_exactly_once(job):
    assert job["exactly_once"] == 40 * 50


def test_every_kind_of_entry_method_is_called_with_its_arguments(job):
    assert "method_kinds" in job


def test_arguments_of_every_type_arrive_equal_and_of_their_types(job):
    # plain envelopes go by the direct way's C where it is built (and the MPI is MPICH's, as
    # the wheel's is), else by mpi4py and marshal: the job checks the values either way
    way = job["plain_values"]
    assert way == ("Link" if _compiled.direct() is not None else "NoneType")
