"""Reductions on 4 ranks (jobs/reductions.py)."""

import pytest
from mpi_jobs import run_ok


def test_builtin_and_user_reducers_combine_every_contribution_into_a_future():
    run_ok("reductions", 4, "reducers")


def test_a_reduction_over_a_2d_array_can_be_delivered_to_an_entry_method():
    run_ok("reductions", 4, "to_entry_method")


@pytest.mark.parametrize("ranks", [2, 4])
def test_builtin_reducers_combine_python_sequences_element_wise(ranks):
    run_ok("reductions", ranks, "sequences")


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_contribution_of_none_without_reducer_is_a_barrier(ranks):
    run_ok("reductions", ranks, "barrier")
