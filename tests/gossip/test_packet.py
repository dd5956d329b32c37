"""The daemon's packets and its open vector: the cap, the parts of a window, every byte
string either decoded or refused with WireError, the version-first merge."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import WireError
from shoal.gossip import packet, wire
from shoal.gossip.vector import OpenVector


def _records(names, versions=None):
    rec = np.zeros(len(names), packet.RECORD)
    for k, name in enumerate(names):
        rec[k]["name"], rec[k]["addr"] = name.encode(), f"127.0.0.{k + 1}:7946".encode()
        rec[k]["keys"] = packet.encode_keys({"k": str(k)})
        rec[k]["version"] = 0 if versions is None else versions[k]
    return rec


def _ids(names):
    return np.array([packet.node_id(n) for n in names], np.uint32)


def test_a_large_window_goes_out_in_capped_parts_youngest_first():
    names = [f"node{k}" for k in range(13)]
    ages = np.arange(13.0)[::-1].copy()
    parts = packet.encode_window(_ids(names)[0], _ids(names), ages, _records(names))
    assert len(parts) == 3 and packet.PER_PACKET == 5
    assert all(len(p) <= packet.MAX_PACKET for p in parts)
    got = np.concatenate([packet.decode_packet(p)[1] for p in parts])
    assert got["age"].tolist() == sorted(ages.tolist())
    assert sorted(got["state"]["name"].tolist()) == sorted(n.encode() for n in names)
    assert packet.record_fields(got[0]["state"])["keys"] == {"k": "12"}


def test_a_service_message_is_refused_by_the_daemon_and_the_reverse():
    names = ["a", "b"]
    msg = bytes(wire.encode(0, _ids(names), np.zeros(2), _records(names)))
    with pytest.raises(WireError, match="kind"):
        packet.decode_packet(msg)
    daemon = packet.encode_window(_ids(names)[0], _ids(names), np.zeros(2), _records(names))[0]
    with pytest.raises(WireError):
        wire.decode(daemon, 2**32 - 1, packet.RECORD)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_are_refused_never_a_crash(data):
    with pytest.raises(WireError):
        packet.decode_packet(data)


GOOD = packet.encode_window(_ids(["a", "b", "c"])[0], _ids(["a", "b", "c"]),
                            np.array([0.0, 0.5, 1.0]), _records(["a", "b", "c"]))[0]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GOOD) - 1), st.integers(1, 255), st.integers(0, len(GOOD)))
def test_garbled_or_truncated_real_packets_decode_or_are_refused(pos, flip, cut):
    data = bytearray(GOOD)
    data[pos] ^= flip
    for candidate in (bytes(data), bytes(data[:cut])):
        try:
            entries = packet.decode_packet(candidate).entries
        except WireError:
            continue
        for e in entries:  # what is accepted is a record a daemon could have sent
            fields = packet.record_fields(e["state"])
            assert packet.node_id(fields["name"]) == int(e["node"])


def test_the_higher_version_wins_whatever_the_age():
    names = ["me", "peer"]
    vec = OpenVector(packet.node_id("me"), packet.RECORD, capacity=2)
    ids = _ids(names)[1:]
    assert vec.merge(ids, np.array([0.0]), _records(["peer"], [10]), now=100.0) == 1
    # an older birth with a higher version (the peer restarted, its clock is its own)
    assert vec.merge(ids, np.array([50.0]), _records(["peer"], [11]), now=100.0) == 1
    # a younger record with a lower version (stale, from before the restart) is ignored
    assert vec.merge(ids, np.array([0.0]), _records(["peer"], [10]), now=200.0) == 0
    assert int(vec.vector.records["version"][vec.slot[int(ids[0])]]) == 11


def test_the_open_vector_grows_as_nodes_join():
    vec = OpenVector(packet.node_id("me"), packet.RECORD, capacity=2)
    names = [f"n{k}" for k in range(40)]
    assert vec.merge(_ids(names), np.zeros(40), _records(names), now=1.0) == 40
    assert len(vec) == 41 and vec.vector.nodes >= 41
    assert len(vec.window(8)) == 8
    assert set(vec.ids[vec.window(41)].tolist()) == set(_ids(names).tolist())
