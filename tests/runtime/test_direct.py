"""The direct way's codec (shoal.runtime.wire._direct, C): what it writes is byte for byte
marshal's version 2 of the same envelope, what it reads is what marshal reads, and what is
not plain it leaves to pickle. (Its MPI calls run in every job: tests/runtime/
test_messaging.py checks that plain envelopes take them.)"""

import marshal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from marshal_reads import depth, plain, same

from shoal.runtime.wire import transport

direct = pytest.importorskip("shoal.runtime.wire._direct",
                             reason="the direct way is not built (a pure install)")
NOT_PLAIN, LEFT = transport.NOT_PLAIN, transport.PLAIN_LEFT
READS = str(Path(__file__).with_name("marshal_reads.py"))


@given(plain)
def test_a_plain_envelope_is_written_as_marshal_writes_it_and_read_back_the_same(env):
    if depth(env) > 4 or not transport._plain(env, 3):  # (too deep, or a lone surrogate)
        assert direct.dumps(env, 1 << 20) in (NOT_PLAIN, LEFT)
        return
    data = direct.dumps(env, 1 << 20)
    assert data == marshal.dumps(env, 2)
    assert same(direct.loads(data), env)
    assert same(direct.loads(data + b"rest of the receive's memory"), env)


def test_any_bytes_read_as_marshal_reads_them():
    # garbage and truncated envelopes, in a process whose address space is capped (why:
    # marshal_reads.py); hypothesis prints the falsifying bytes there
    out = subprocess.run([sys.executable, READS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


@pytest.mark.parametrize("env", [
    ([1],), ({"a": 1},), (np.float64(1.5),), (np.int64(3),), (1 + 2j,), (frozenset(),),
    (((((1,),),),),), (True, type(None)), 5, [1, 2], (bytearray(b"x"),), (Ellipsis,),
])
def test_what_is_not_plain_is_left_to_pickle(env):
    assert direct.dumps(env, 1 << 20) == NOT_PLAIN


@pytest.mark.parametrize("env", [(2**64,), (-2**63 - 1,), ("\ud800",), (b"x" * 100,)])
def test_plain_but_not_taken_is_left_to_marshal(env):
    # beyond 64 bits, a lone surrogate (marshal writes it "surrogatepass"), or beyond the
    # limit (the Link's is EAGER)
    assert direct.dumps(env, 64) == LEFT
    assert marshal.loads(marshal.dumps(env, 2)) == env


def test_a_not_plain_value_after_one_not_taken_still_says_pickle():
    assert direct.dumps((2**64, [1]), 1 << 20) == NOT_PLAIN
    assert direct.dumps((b"x" * 100, [1]), 64) == NOT_PLAIN


def test_ints_take_the_shortest_form_marshal_takes():
    for x in (0, 1, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**45, 2**60, 2**62,
              2**63 - 1, -2**63):
        data = direct.dumps((x,), 64)
        assert data == marshal.dumps((x,), 2), x
        assert direct.loads(data) == (x,)


ONE_RANK = """
import sys
from mpi4py import MPI
import numpy as np
from shoal.runtime.wire.transport import Transport
t = Transport(MPI.COMM_SELF)
assert t._direct is not None
sent = t.send(0, (7, "take", (1, 2.5), None))          # plain: the direct way
assert sent > 0 and t.bytes_sent == sent
assert t.poll() == (7, "take", (1, 2.5), None)
t.send(0, (7, np.arange(3)))                            # not plain: pickled, by mpi4py
got = t.poll()
assert got[0] == 7 and got[1].tolist() == [0, 1, 2]
try:
    t._direct.send((1,), 2**32)
except OverflowError as exc:
    print("overflow:", exc)
t.close()
try:
    t.poll()                                            # its handles died with MPI's
except Exception as exc:
    print("after close:", type(exc).__name__)
"""


def test_a_transport_on_one_rank_sends_by_its_link_and_fails_cleanly_after_close():
    # (a process of its own: MPI is initialized there, not in the test worker)
    out = subprocess.run([sys.executable, "-c", ONE_RANK], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "overflow: rank 4294967296 is out of an int's range" in out.stdout
    assert "after close:" in out.stdout  # a Python exception, not MPI's abort


def test_a_link_not_made_says_so():
    link = direct.Link.__new__(direct.Link)
    for call in (link.poll, link.start, lambda: link.send((1,), 0)):
        with pytest.raises(RuntimeError, match="this Link was not made"):
            call()


def test_a_link_whose_library_is_not_loaded_is_refused_and_keeps_no_reference():
    code = ("import sys; from shoal.runtime.wire import _direct\n"
            "o = object(); n = sys.getrefcount(o)\n"
            "try:\n"
            "    _direct.Link(0, 0, 0, bytearray(8), 1, 4096, o, '/nowhere/MPI.so')\n"
            "except RuntimeError as exc:\n"
            "    print(exc, sys.getrefcount(o) == n)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "/nowhere/MPI.so is not loaded: import mpi4py.MPI first True"
