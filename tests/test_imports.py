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


def test_only_the_api_depends_on_the_pe_core():
    """Managers and the user's objects see the core through ``interfaces.Core`` (even their
    ``TYPE_CHECKING`` imports), so the core is in no import cycle: only the API (which
    starts it) and the package import ``shoal.runtime.pe``."""
    import ast
    from pathlib import Path

    import shoal.runtime

    root = Path(shoal.runtime.__file__).parent
    importers = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ImportFrom) and node.module == "shoal.runtime.pe") or (
                    isinstance(node, ast.ImportFrom) and node.module == "shoal.runtime"
                    and any(a.name == "pe" for a in node.names)):
                importers.add(path.relative_to(root).as_posix())
    assert importers == {"__init__.py", "api.py"}
