"""Messages, broadcasts and calls with ``ret=True`` on 3 ranks (jobs/messaging.py)."""

from mpi_jobs import run_ok

from shoal import _compiled


def test_messages_from_one_sender_to_an_element_arrive_in_send_order():
    run_ok("messaging", 3, "order")


def test_broadcasts_reach_every_element_once_in_send_order():
    run_ok("messaging", 3, "broadcasts")


def test_a_call_with_ret_gives_a_future_of_the_return_value():
    run_ok("messaging", 3, "call_ret")


def test_broadcast_with_ret_gathers_every_return_value_in_index_order():
    run_ok("messaging", 3, "broadcast_ret")


def test_messages_to_migrating_elements_are_each_delivered_exactly_once():
    assert run_ok("messaging", 3, "exactly_once")["exactly_once"] == 40 * 50


def test_every_kind_of_entry_method_is_called_with_its_arguments():
    run_ok("messaging", 3, "method_kinds")


def test_arguments_of_every_type_arrive_equal_and_of_their_types():
    # plain envelopes go by the direct way's C where it is built (and the MPI is MPICH's, as
    # the wheel's is), else by mpi4py and marshal: the job checks the values either way
    way = run_ok("messaging", 3, "plain_values")["plain_values"]
    assert way == ("Link" if _compiled.direct() is not None else "NoneType")
