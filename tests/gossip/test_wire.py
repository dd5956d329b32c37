import numpy as np
import pytest

from shoal import WireError
from shoal.gossip import wire
from shoal.gossip.records import state_dtype

STATE = state_dtype(64)


def _message(n=8, nodes=(0, 3, 5), ages=(0.0, 1.5, 2.0), sender=0):
    recs = np.zeros(len(nodes), STATE)
    recs["load"] = [1.0, 2.0, 3.0][: len(nodes)]
    return bytes(wire.encode(sender, np.array(nodes), np.array(ages), recs))


def test_round_trip():
    msg = _message()
    assert len(msg) == wire.message_size(3, STATE)
    sender, entries = wire.decode(msg, 8, STATE)
    assert sender == 0
    assert entries["node"].tolist() == [0, 3, 5]
    assert entries["age"].tolist() == [0.0, 1.5, 2.0]
    assert entries["state"]["load"].tolist() == [1.0, 2.0, 3.0]


def _corrupt(offset, value):
    b = bytearray(_message())
    b[offset] = value
    return bytes(b)


@pytest.mark.parametrize("buf,reason", [
    (b"", "shorter"),
    (_message()[:-1], "announces"),
    (_message() + b"\0", "announces"),
    (_corrupt(0, ord("X")), "magic"),
    (_corrupt(4, 9), "version"),
    (_message(nodes=(0, 9, 5)), "node 9"),
    (_message(nodes=(0, 3, 3)), "twice"),
    (_message(ages=(0.0, -1.0, 2.0)), "future"),
    (_message(ages=(0.0, float("nan"), 2.0)), "future"),
    (_message(sender=12), "out of range"),
])
def test_malformed_messages_are_refused(buf, reason):
    with pytest.raises(WireError, match=reason):
        wire.decode(buf, 8, STATE)


def test_record_size_mismatch():
    with pytest.raises(WireError, match="entry-size"):
        wire.decode(_message(), 8, state_dtype(128))
