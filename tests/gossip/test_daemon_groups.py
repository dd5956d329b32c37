"""Hierarchical gossip in the node daemon (issue 28, item 4): daemons in two groups hold
their own group's records and a summary of each group; the second group finds its members
though its only seed is in the first; summary packets are checked like records."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from daemons import free_ports, status, wait
from test_daemon import CLI, _env

from shoal.errors import WireError
from shoal.gossip import packet, wire
from shoal.gossip.groups import group_name

GROUPS = {"rack-a": [0, 1, 2], "rack-b": [3, 4, 5]}


def _settled(states, k: int) -> dict | None:
    """Daemon k's status once it knows its 3 group members and both groups' summaries with
    3 live nodes each."""
    s = status(states[k])
    if not s or len(s["nodes"]) != 3 or len(s["groups"]) != 2:
        return None
    return s if all(g["nodes"] == 3 for g in s["groups"]) else None


def test_two_groups_hold_their_members_and_each_others_summary(tmp_path):
    ports = free_ports(6)
    states = [tmp_path / f"d{k}" for k in range(6)]
    procs = []
    try:
        for group, members in GROUPS.items():
            for k in members:
                args = [*CLI, "gossip", "daemon", "--bind", f"127.0.0.1:{ports[k]}",
                        "--interval", "100ms", "--state-dir", str(states[k]),
                        "--name", f"node{k}", "--group", group]
                if k:  # every node's only seed is node0, in rack-a
                    args += ["--join", f"127.0.0.1:{ports[0]}"]
                procs.append(subprocess.Popen(args, env=_env(), stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        views = [wait(lambda k=k: _settled(states, k), 60) for k in range(6)]
        for group, members in GROUPS.items():
            for k in members:
                view = views[k]
                assert view["group"] == group
                assert {n["name"] for n in view["nodes"]} == {f"node{j}" for j in members}
                own, other = view["groups"]
                assert own["own"] and own["group"] == group and not other["own"]
                assert own["cores"] == sum(n["cores"] for n in view["nodes"])
                assert own["busy"][0] <= own["busy"][1] <= own["busy"][2]
                others = [j for j in range(6) if j not in members]
                assert other["contact"] in {f"127.0.0.1:{ports[j]}" for j in others}
                assert other["age"] >= 0 and other["oldest"] >= 0
        metrics = subprocess.run([*CLI, "gossip", "status", "--state-dir", str(states[4])],
                                 env=_env(), capture_output=True, text=True, timeout=30)
        assert metrics.returncode == 0 and "Groups: 2" in metrics.stdout, metrics.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def test_a_hash_group_is_the_same_for_a_name_everywhere_and_groups_spread():
    names = [f"n{i}@10.0.0.{i}:7946" for i in range(400)]
    got = [group_name(None, 8, n) for n in names]
    assert got == [group_name(None, 8, n) for n in names]
    counts = np.unique(got, return_counts=True)[1]
    assert len(counts) == 8 and counts.min() > 20  # 50 expected per group
    assert group_name("rack7", None, names[0]) == "rack7"
    assert group_name(None, None, names[0]) is None


def _summary(group: str, contact: str = "10.0.0.1:7946") -> np.ndarray:
    rec = np.zeros(1, packet.SUMMARY)
    rec["nodes"], rec["cores"], rec["busy_max"], rec["oldest"] = 3, 12, 2.5, 0.4
    rec["group"], rec["contact"] = group.encode(), contact.encode()
    return rec


def test_summary_packets_round_trip_and_bad_ones_are_refused():
    ids, ages = np.array([packet.group_of("rack-a")], np.uint32), np.array([0.25])
    (data,) = packet.encode_window(7, ids, ages, _summary("rack-a"), kind=wire.KIND_SUMMARY,
                                   group=int(ids[0]))
    got = packet.decode_packet(data)
    assert got.kind == wire.KIND_SUMMARY and got.sender == 7
    assert packet.summary_fields(got.entries["state"][0])["cores"] == 12
    assert got.entries["flags"][0] == ids[0] and got.entries["age"][0] == 0.25
    for bad, says in ((_summary("rack-b"), "another group"),
                      (_summary("rack-a", "nowhere"), "not ip:port")):
        (data,) = packet.encode_window(7, ids, ages, bad, kind=wire.KIND_SUMMARY)
        with pytest.raises(WireError, match=says):
            packet.decode_packet(data)
    rec = _summary("rack-a")
    rec["busy_mean"] = np.nan
    (data,) = packet.encode_window(7, ids, ages, rec, kind=wire.KIND_SUMMARY)
    with pytest.raises(WireError, match="not finite"):
        packet.decode_packet(data)


@pytest.mark.parametrize(("args", "says"), [
    (["--group", "a", "--groups", "4"], "not both"),
    (["--group", "x" * 33], "1 to 32 bytes"),
    (["--groups", "0"], "--groups"),
])
def test_bad_group_options_exit_2(args, says, tmp_path):
    out = subprocess.run([*CLI, "gossip", "daemon", "--bind", "127.0.0.1:0", "--state-dir",
                          str(tmp_path), *args], env=_env(), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2 and says in out.stderr, out.stderr
