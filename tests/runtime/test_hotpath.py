"""The layout the hot path's measured cost depends on (see ``Runtime.__slots__``)."""

import subprocess
import sys

import pytest

from shoal._compiled import core

CODE = """
from mpi4py import MPI
import shoal
rt = shoal.Runtime(MPI.COMM_SELF)
print(len(vars(rt)), *sorted(set(type(rt).__slots__) & set(vars(rt))))
"""


@pytest.mark.skipif(core() == "compiled", reason="compiled, the core has no instance dict")
def test_the_runtime_keeps_its_instance_dict_inline():
    # Python 3.11 keeps at most 30 instance attributes inline (reads by index); one more
    # and every attribute the runtime reads per message becomes a dict lookup. (In a
    # process of its own: MPI starts there, on MPI_COMM_SELF.)
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert int(out[0]) <= 30, f"{out[0]} attributes in Runtime.__dict__: make hot ones slots"
    assert out[1:] == []  # (a slot is never shadowed by a dict entry)
