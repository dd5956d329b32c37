"""Load balancing inside the runtime (jobs/lb.py): AtSync steps with an element inserted and
one deleted between steps, on 2 and 3 PEs and without shared memory; periodic steps that
move elements between entry methods while messages flow. The checks of the figures are in
the job; here, what it returns."""

import pytest
from mpi_jobs import run_ok

CPU = ("--cpu-stats",)  # loads in CPU seconds: other processes on the cores do not blur them


@pytest.mark.parametrize("ranks,shm", [(2, None), (3, None), (3, 0)],
                         ids=["2-ranks", "3-ranks", "3-ranks-mpi-only"])
def test_atsync_steps_balance_move_elements_and_resume_every_element_once(ranks, shm):
    before, moved = run_ok("lb", ranks, "atsync", shm=shm, options=CPU)["atsync"]
    assert len(before) == 6 and before[0] > 1.4  # PE 0 starts with every heavy element
    assert moved > 0


@pytest.mark.parametrize("strategy", ["greedy", "refine", "greedy,refine"])
def test_each_strategy_balances_at_sync_points(strategy):
    before, moved = run_ok("lb", 2, "atsync", options=("--lb", strategy, *CPU))["atsync"]
    assert before[0] > 1.4 and moved > 0


def test_periodic_steps_move_elements_between_entry_methods_and_lose_no_message():
    steps, moved = run_ok("lb", 3, "periodic", options=("--lb-period", "0.05", *CPU))["periodic"]
    assert steps >= 1 and moved >= 1
