"""What the balancer's communication costs come from (runtime/lb/costs.py): a netmodel
profile's small-message time and large-message slope, within a node and between nodes;
traffic_seconds prices each cut edge and move by its link."""

import math
import subprocess
import sys

import numpy as np
import pytest

from shoal.errors import UsageError
from shoal.netmodel.models import Model
from shoal.netmodel.profile import Profile, RegimeModels
from shoal.runtime.lb.common import edge_seconds, traffic_seconds
from shoal.runtime.lb.costs import DEFAULT, Costs, Link, link_for, load
from shoal.runtime.lb.database import LBDatabase


def profile(path, alpha, beta):
    """A profile of one postal regime: T(n) = alpha + beta n."""
    Profile([RegimeModels("all", 0.0, math.inf,
                          {"postal": Model("postal", {"alpha": alpha, "beta": beta})})],
            {}).save(path)
    return str(path)


def test_a_profile_gives_the_time_of_a_small_message_and_the_slope_of_large_ones(tmp_path):
    link = load(profile(tmp_path / "p.toml", 3e-6, 2.5e-10)).intra
    assert link.message == pytest.approx(3e-6 + 8 * 2.5e-10)
    assert link.byte == pytest.approx(2.5e-10)
    costs = load(f"{profile(tmp_path / 'a.toml', 1e-6, 1e-10)},"
                 f"{profile(tmp_path / 'b.toml', 2e-5, 1e-9)}")
    assert costs.intra.message == pytest.approx(1e-6 + 8e-10)
    assert costs.inter.message == pytest.approx(2e-5 + 8e-9)
    with pytest.raises(UsageError, match="one netmodel profile, or two"):
        load("a,b,c")


def database():
    """4 objects on 4 PEs (two nodes: PEs 0-1 and 2-3); edges 0-1 and 0-2, 10 messages and
    1000 bytes each; each object packs to 100 bytes."""
    return LBDatabase(load=np.ones(4), pe=np.arange(4), npes=4, size=np.full(4, 100),
                      src=[0, 0], dst=[1, 2], messages=[10, 10], bytes=[1000, 1000])


def test_cut_edges_and_moves_are_priced_by_the_link_they_cross():
    db = database()
    nodes = np.array([0, 0, 1, 1])
    costs = Costs(Link(1.0, 0.001), Link(100.0, 0.1))
    placement = np.array([0, 1, 2, 3])  # edge 0-1 within node 0, edge 0-2 between nodes
    assert traffic_seconds(db, placement, costs, nodes) == pytest.approx(
        (10 * 1.0 + 1000 * 0.001) + (10 * 100.0 + 1000 * 0.1))
    moved = np.array([1, 1, 2, 3])  # object 0 moves within its node; edge 0-1 no longer cut
    assert traffic_seconds(db, moved, costs, nodes) == pytest.approx(
        (10 * 100.0 + 1000 * 0.1) + (1.0 + 100 * 0.001))
    # without the node map every pair is within a node; the defaults as before
    assert traffic_seconds(db, placement, costs) == pytest.approx(2 * (10 + 1))
    assert traffic_seconds(db, placement) == pytest.approx(2 * (10 * 10e-6 + 1000 * 1e-9))
    assert edge_seconds(db, costs.inter).tolist() == [1100.0, 1100.0]
    assert link_for(costs, nodes) == costs.inter and link_for(costs, None) == costs.intra
    assert link_for(DEFAULT, np.zeros(4)) == DEFAULT.intra


def test_shoal_run_refuses_a_profile_it_cannot_read_in_one_line(tmp_path):
    (tmp_path / "bad.toml").write_text("[[regime]]\nname = 1\n")
    for spec in (str(tmp_path / "missing.toml"), str(tmp_path / "bad.toml")):
        out = subprocess.run([sys.executable, "-m", "shoal", "run", "--lb-costs", spec,
                              "prog.py"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert "job directory" not in out.stderr
