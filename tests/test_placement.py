"""Placement from the gossip daemon's view (:mod:`shoal.placement`): Slurm's compact lists
read, the ranks of a launch on the least-loaded live nodes (checked against every way of
spreading them on small cases), and the share of a core each PE of a job gets."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import placement
from shoal.errors import UsageError
from shoal.placement import NodeLoad, hostfile, node_loads


@pytest.mark.parametrize(("text", "hosts"), [
    ("n1", ["n1"]),
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("n[1-2,7],gpu[08-10]", ["n1", "n2", "n7", "gpu08", "gpu09", "gpu10"]),
    ("r[1-2]-n[1-2],login", ["r1-n1", "r1-n2", "r2-n1", "r2-n2", "login"]),
])
def test_slurms_host_lists_are_read_in_order(text, hosts):
    assert placement.expand_hostlist(text) == hosts


def test_slurms_cpus_per_node_are_read_and_bad_lists_refused():
    assert placement.expand_cpus("4,1(x2)") == [4, 1, 1]
    assert placement.expand_cpus("2(x3)") == [2, 2, 2]
    for bad in ("4,x", "2(3)"):
        with pytest.raises(UsageError, match="CPUs per node"):
            placement.expand_cpus(bad)
    with pytest.raises(UsageError, match="host list"):
        placement.expand_hostlist("n[a-b]")


def view(*nodes):
    return [{"name": f"{h}@10.0.0.{i}:7946", "cores": c, "busy": b, "shoal": s, "state": st}
            for i, (h, c, b, s, st) in enumerate(nodes)]


def test_the_daemons_view_gives_each_host_its_background_without_shoals_pes():
    loads = node_loads(view(("n1.site", 8, 3.0, 2.5, "alive"), ("n2", 8, 1.0, 2.0, "dead")))
    assert loads["n1.site"] == loads["n1"] == NodeLoad(8, 0.5, "alive")
    assert loads["n2"] == NodeLoad(8, 0.0, "dead")  # never below zero


def test_ranks_avoid_a_busy_node_while_others_have_free_cores():
    loads = node_loads(view(("n1", 2, 0.0, 0, "alive"), ("n2", 2, 1.9, 0, "alive"),
                            ("n3", 2, 0.1, 0, "alive")))
    nodes, cpus = ["n1", "n2", "n3"], [1, 1, 1]
    assert hostfile(2, nodes, cpus, loads) == ["n1", "n3"]
    # a third rank shares n1 (beyond Slurm's CPU there) rather than n2's busy cores
    assert hostfile(3, nodes, cpus, loads) == ["n1", "n1", "n3"]
    assert hostfile(6, nodes, cpus, loads).count("n2") == 1  # n2's turn comes at last


def test_suspect_dead_and_lost_nodes_get_no_rank_unless_none_is_left():
    loads = node_loads(view(("n1", 4, 0, 0, "dead"), ("n2", 4, 0, 0, "suspect"),
                            ("n3", 4, 3.5, 0, "alive")))
    assert hostfile(2, ["n1", "n2", "n3"], [4, 4, 4], loads) == ["n3", "n3"]
    assert set(hostfile(2, ["n1", "n2"], [4, 4], loads)) <= {"n1", "n2"}
    assert hostfile(4, ["n1", "n2", "n3"], [2, 2, 2], {}, exclude={"n2"}) == [
        "n1", "n1", "n3", "n3"]  # no daemon: the CPUs Slurm allocated, node by node
    with pytest.raises(UsageError, match="no node of the allocation is left"):
        hostfile(1, ["n1"], [1], {}, exclude={"n1"})


def _min_share(counts, loads):
    return min(load.share(k) for k, load in zip(counts, loads, strict=True) if k)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.floats(0, 5)), min_size=1, max_size=4),
       st.integers(1, 7))
def test_the_slowest_rank_gets_as_much_as_any_spread_allows(nodes, nprocs):
    """Exhaustive reference: no other way of spreading the ranks gives its least-served rank
    a larger share of a core; every rank is placed, node by node in the allocation's order."""
    names = [f"n{i}" for i in range(len(nodes))]
    loads = {n: NodeLoad(c, b) for n, (c, b) in zip(names, nodes, strict=True)}
    hosts = hostfile(nprocs, names, [c for c, _ in nodes], loads)
    assert len(hosts) == nprocs and hosts == sorted(hosts, key=names.index)
    got = _min_share([hosts.count(n) for n in names], list(loads.values()))
    best = max(_min_share(counts, list(loads.values()))
               for counts in itertools.product(range(nprocs + 1), repeat=len(names))
               if sum(counts) == nprocs)
    assert got == pytest.approx(best)


def test_each_pe_gets_the_share_its_nodes_cores_leave_it():
    loads = node_loads(view(("n1", 2, 2.0, 0, "alive"), ("n2", 4, 0.0, 0, "alive")))
    # n1: 2 PEs and 2 busy cores' worth of other work share 2 cores; n2 has room; n3 unknown
    assert placement.pe_shares(["n1", "n1", "n2", "n3"], loads) == [0.5, 0.5, 1.0, 1.0]
    assert placement.pe_shares(["n1", "n2"], {}) == [1.0, 1.0]


def test_a_launch_under_srun_names_each_ranks_host_only_when_it_has_a_reason(tmp_path):
    """No daemon and no host to leave out: srun places the ranks. Hosts lost: the others
    take them, beyond their CPUs if need be; an allocation it cannot read is refused."""
    from shoal.launch import _placed

    env = {"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_JOB_CPUS_PER_NODE": "2(x3)",
           "SHOAL_GOSSIP_STATE_DIR": str(tmp_path)}  # (no daemon answers there)
    assert _placed(4, env, frozenset()) == (None, False)
    assert _placed(4, env, frozenset({"n2"})) == (["n1", "n1", "n3", "n3"], False)
    assert _placed(5, env, frozenset({"n2"})) == (["n1", "n1", "n1", "n3", "n3"], True)
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST"):
        _placed(2, {**env, "SLURM_JOB_CPUS_PER_NODE": "2"}, frozenset({"n2"}))
