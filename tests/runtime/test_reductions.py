"""Reductions on 4 ranks (jobs/reductions.py)."""

from mpi_jobs import run_ok


def test_builtin_and_user_reducers_combine_every_contribution_into_a_future():
    run_ok("reductions", 4, "reducers")


def test_a_reduction_over_a_2d_array_can_be_delivered_to_an_entry_method():
    run_ok("reductions", 4, "to_entry_method")
