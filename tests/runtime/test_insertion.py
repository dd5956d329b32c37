"""Insertion and deletion of elements at run time on 3 ranks (jobs/insertion.py)."""

import pytest
from mpi_jobs import run_ok


def test_a_message_sent_right_behind_an_insertion_reaches_the_new_element():
    run_ok("insertion", 3, "messages")


def test_reductions_count_the_elements_inserted_and_not_those_deleted():
    run_ok("insertion", 3, "counts")


def test_broadcast_with_ret_right_behind_insertion_and_deletion_waits_only_for_live_elements():
    run_ok("insertion", 3, "racing_broadcast")


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_an_inserted_elements_constructor_contributes_to_the_inserters_reduction(ranks):
    run_ok("insertion", ranks, "constructor_contributes")


def test_an_element_inserted_outside_a_dense_arrays_shape_is_named_on_every_pe():
    run_ok("insertion", 3, "outside_the_shape")


@pytest.mark.parametrize("ranks", [2, 4])
def test_inserted_elements_are_placed_by_the_arrays_map(ranks):
    got = run_ok("insertion", ranks, "mapped")["mapped"]
    assert got == sorted((i + j) % ranks for i in range(3) for j in range(3))


@pytest.mark.parametrize("ranks", [2, 3])
def test_an_index_deleted_and_inserted_again_keeps_the_order_of_its_messages(ranks):
    """The new element continues the deleted one's sequence numbers (before the fix a
    message to it waited forever behind the numbers the old one had used, and its own
    first message was refused as a duplicate)."""
    run_ok("insertion", ranks, "reinserted")
