"""Insertion and deletion of elements at run time on 1-4 ranks (jobs/insertion.py)."""

import pytest
from mpi_jobs import shared

# the scenarios run on each number of ranks, one job for each number
ON = {1: ("constructor_contributes",),
      2: ("constructor_contributes", "mapped", "reinserted"),
      3: ("messages", "counts", "racing_broadcast", "outside_the_shape", "reinserted"),
      4: ("constructor_contributes", "mapped")}


@pytest.fixture(scope="module")
def on():
    return shared("insertion", ON)


def test_a_message_sent_right_behind_an_insertion_reaches_the_new_element(on):
    assert "messages" in on(3)


def test_reductions_count_the_elements_inserted_and_not_those_deleted(on):
    assert "counts" in on(3)


def test_broadcast_with_ret_right_behind_insertion_and_deletion_waits_only_for_live_elements(on):
    assert "racing_broadcast" in on(3)


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_an_inserted_elements_constructor_contributes_to_the_inserters_reduction(on, ranks):
    assert "constructor_contributes" in on(ranks)


def test_an_element_inserted_outside_a_dense_arrays_shape_is_named_on_every_pe(on):
    assert "outside_the_shape" in on(3)


@pytest.mark.parametrize("ranks", [2, 4])
def test_inserted_elements_are_placed_by_the_arrays_map(on, ranks):
    got = on(ranks)["mapped"]
    assert got == sorted((i + j) % ranks for i in range(3) for j in range(3))


@pytest.mark.parametrize("ranks", [2, 3])
def test_an_index_deleted_and_inserted_again_keeps_the_order_of_its_messages(on, ranks):
    """The new element continues the deleted one's sequence numbers (before the fix a
    message to it waited forever behind the numbers the old one had used, and its own
    first message was refused as a duplicate)."""
    assert "reinserted" in on(ranks)
