"""Reductions on 2 and 4 ranks (jobs/reductions.py)."""

import pytest
from mpi_jobs import shared

# the scenarios run on each number of ranks, one job for each number
ON = {2: ("sequences", "barrier"),
      4: ("reducers", "to_entry_method", "sequences", "barrier")}


@pytest.fixture(scope="module")
def on():
    return shared("reductions", ON)


def test_builtin_and_user_reducers_combine_every_contribution_into_a_future(on):
    assert "reducers" in on(4)


def test_a_reduction_over_a_2d_array_can_be_delivered_to_an_entry_method(on):
    assert "to_entry_method" in on(4)


@pytest.mark.parametrize("ranks", [2, 4])
def test_builtin_reducers_combine_python_sequences_element_wise(on, ranks):
    assert "sequences" in on(ranks)


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_contribution_of_none_without_reducer_is_a_barrier(on, ranks):
    assert "barrier" in on(ranks)
