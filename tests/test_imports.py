"""What ``import shoal`` costs every PE at start: the graph strategies' scipy and the mapping
code load when a strategy first needs them, not at import."""

import subprocess
import sys


def test_import_shoal_loads_neither_scipy_nor_the_mapping_code():
    code = ("import sys, shoal; print(sorted({m.split('.')[0] if m.startswith('scipy') else m "
            "for m in sys.modules if m.startswith(('scipy', 'shoal.mapping'))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "[]"


def test_the_graph_strategies_still_find_scipy_when_they_run():
    import numpy as np

    from shoal.runtime.lb.common import _match

    # two parts on two PEs, part 0's objects sit on PE 1: the matching swaps them
    part, home = np.array([0, 0, 1]), np.array([1, 1, 0])
    assert list(_match(part, home, np.array([0, 1]), 2)) == [1, 0]
