"""Load balancing inside the runtime (jobs/lb.py): AtSync steps with an element inserted and
one deleted between steps, on 2 and 3 PEs and without shared memory; periodic steps that
move elements between entry methods while messages flow. The checks of the figures are in
the job; here, what it returns."""

import numpy as np
import pytest
from mpi_jobs import run_ok

from shoal.runtime.lb.database import LBDatabase

CPU = ("--cpu-stats",)  # loads in CPU seconds: other processes on the cores do not blur them


def check_atsync(before, moved, seen):
    # PE 0 starts with every heavy element (1.625; measured capacities blur it on a loaded
    # machine: 1.13 seen at load 5, see jobs/lb.py)
    assert len(before) == 6 and before[0] > 1.1
    assert moved > 0 and seen is None  # greedy_refine: a gathered database


# (on 2 PEs: test_lb_dump's run, the same job writing its databases too)
@pytest.mark.parametrize("ranks,shm", [(3, None), (3, 0)], ids=["3-ranks", "3-ranks-mpi-only"])
def test_atsync_steps_balance_move_elements_and_resume_every_element_once(ranks, shm):
    check_atsync(*run_ok("lb", ranks, "atsync", shm=shm, options=CPU)["atsync"])


@pytest.mark.parametrize("strategy", ["greedy", "refine", "greedy,refine", "orb",
                                      "distributed", "metis,refine"])
def test_each_strategy_balances_at_sync_points(strategy):
    """... and leaves non-migratable elements where they are while it moves the others
    (jobs/lb.py pinned: checked in the job, in the same run)."""
    figures = run_ok("lb", 2, "atsync", "pinned", options=("--lb", strategy, *CPU))
    before, moved, seen = figures["atsync"]
    # (as above: on a loaded machine some step, not always the first, measures the
    # imbalance: a fresh clone's suite saw 1.09 at distributed's step 1, CI 1.08 at orb's)
    assert max(before) > 1.1 and moved > 0
    assert figures["pinned"] > 0  # elements moved, none of the pinned ones
    if strategy == "distributed":  # (test_distributed's case of 2 PEs)
        check_root_objects(seen, 2)


def check_root_objects(seen, ranks):
    assert len(seen) == 6 and seen[0] == (24 // ranks, 24)
    assert all(mine < total for mine, total in seen)


@pytest.mark.parametrize("ranks,shm", [(3, None), (4, None), (4, 0)],
                         ids=["3-ranks", "4-ranks", "4-ranks-mpi-only"])
def test_distributed_balances_over_messages_without_gathering_the_database(ranks, shm):
    """lb="distributed": GrapevineLB on the runtime's messages; at every step PE 0 held
    only its own elements (checked against where each element ran, in the job), first its
    block of the 24 elements (on 2 PEs: test_each_strategy's run of distributed)."""
    options = ("--lb", "distributed", *CPU)
    before, moved, seen = run_ok("lb", ranks, "atsync", shm=shm, options=options)["atsync"]
    assert max(before) > 1.1 and moved > 0  # (the job says why not 1.4, nor at step 1)
    check_root_objects(seen, ranks)


@pytest.mark.parametrize("strategy", ["greedy_refine", "distributed"])
def test_periodic_steps_move_elements_between_entry_methods_and_lose_no_message(strategy):
    options = ("--lb-period", "0.05", "--lb", strategy, *CPU)
    steps, moved, used = run_ok("lb", 3, "periodic", options=options)["periodic"]
    assert steps >= 1 and moved >= 1 and used == [strategy]


@pytest.mark.parametrize("ranks,shm", [(3, None), (2, 0)], ids=["3-ranks", "2-ranks-mpi-only"])
def test_periodic_steps_while_broadcasts_and_reductions_span_them(ranks, shm):
    steps, moved = run_ok("lb", ranks, "periodic_collectives", shm=shm,
                          options=("--lb-period", "0.03", *CPU))["periodic_collectives"]
    assert steps >= 1 and moved >= 1


def test_lb_dump_writes_each_steps_database_with_every_element(tmp_path):
    """... in the run of atsync on 2 PEs that test_atsync's checks hold for too."""
    figures = run_ok("lb", 2, "atsync", options=("--lb-dump", str(tmp_path / "steps"), *CPU))
    check_atsync(*figures["atsync"])
    files = sorted((tmp_path / "steps").iterdir())
    assert [f.name for f in files] == [f"step-{k:04d}.npz" for k in range(1, 7)]
    for k, f in enumerate(files, start=1):
        db = LBDatabase.read(f)
        workers = [i for i, key in enumerate(db.keys) if key[0] == db.keys[0][0]]
        # 24 workers (plus the one inserted in iteration 2, less the one deleted in 3)
        assert len(workers) == {1: 24, 2: 24, 3: 25}.get(k, 24), (k, db.keys)
        assert db.npes == 2 and np.all(db.load >= 0) and np.all(db.size > 0)
        assert len(db.src) > 0  # the messages between neighbours
        for i in workers:  # positions: the element's index
            index = db.keys[i][1]
            np.testing.assert_array_equal(db.coords[i, :len(index)], index)


def test_lb_none_resumes_every_sync_point_at_once_without_a_step():
    """lb="none" (the baseline of benchmarks): 200 AtSync points, every iteration runs once
    on every element, and no step is taken (elements without work: 7 CPU-s of spinning
    less than auto_balanced's, which lb_meta's test runs under lb="auto")."""
    assert run_ok("lb", 2, "none_balanced", options=("--lb", "none"))["none_balanced"] == 0


def test_topo_balances_inside_the_runtime_with_the_machine_it_is_given():
    """lb="topo" with lb_machine: a ring whose neighbours start on different PEs of a 1-D
    torus of 4 nodes (32 crossings of one hop); each step records its hop-bytes, and the
    first brings neighbours together (every element and every message once: in the job)."""
    steps = run_ok("lb", 4, "topo_ring",
                   options=("--lb", "topo", "--lb-machine", "4", *CPU))["topo_ring"]
    before, after, moved = steps[0]
    assert 32 * 2**16 < before < 32 * (2**16 + 512)  # 32 halos of 64 KiB + envelope, 1 hop
    assert after < before and moved > 0
    assert len(steps) == 4 and all(b > 0 and a >= 0 for b, a, _ in steps), steps


def test_an_element_that_syncs_every_k_iterations_is_weighed_by_its_whole_period(tmp_path):
    """The first step's database (lb_dump) holds what each element worked in the 5
    iterations before it (CPU seconds), the heavy ones 4x the light ones, even though no
    single call holds a period's work (before: the last call only, a fifth of it)."""
    worked = dict(run_ok("lb", 2, "every_k", options=("--lb-dump", str(tmp_path), *CPU)
                         )["every_k"])
    db = LBDatabase.read(tmp_path / "step-0001.npz")
    # in the PE's own seconds: the database counts loads in the average PE's, and on a
    # loaded machine the PEs' speed probes may differ by more than SPEED_BAND (a full test
    # run saw a light element at 0.36, then 0.41, of its two periods' work)
    own = db.load / db.speed[db.pe]
    loads = {key[1][0]: load for key, load in zip(db.keys, own, strict=True)}
    assert sorted(loads) == sorted(worked)
    for i, load in loads.items():
        # the first period is half of each element's work (2 periods); the runtime's own
        # time in the calls (sends, at_sync) adds a little
        assert 0.45 * worked[i] < load < 0.75 * worked[i], (i, load, worked[i])
    heavy = np.mean([v for i, v in loads.items() if i < 4])
    light = np.mean([v for i, v in loads.items() if i >= 4])
    assert 3.0 < heavy / light < 5.0, loads
