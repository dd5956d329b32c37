"""Per-PE state, set-up code on every PE and single chares spread over PEs
(jobs/perpe.py)."""

import pytest
from mpi_jobs import run_ok


@pytest.mark.parametrize("ranks", [2, 4])
def test_run_on_all_and_broadcast_globals_reach_every_pe(ranks):
    run_ok("perpe", ranks, "run_on_all", "globals_everywhere")


@pytest.mark.parametrize("ranks", [2, 4])
def test_create_places_single_chares_round_robin_at_one_message_each(ranks):
    got = run_ok("perpe", ranks, "create_spread")
    assert got["create_spread"] == [(1 + k) % ranks for k in range(ranks)]


def test_a_single_chare_names_itself_as_charm4py_writes_it():
    run_ok("perpe", 2, "own_index")
