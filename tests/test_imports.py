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


def test_shoal_run_launches_without_importing_numpy_or_the_runtime(tmp_path):
    """The launching process of ``shoal run`` (its flags checked there, one line and exit 2
    on a bad one) imports neither numpy nor the runtime: they cost every job about 0.2 s of
    CPU before its ranks started (``-X importtime`` applies to this process only). (``--lb``
    and ``--lb-machine`` are checked by the balancers' own code, which imports both.)"""
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "shoal", "run", "-n", "1",
                          "--tune", "lb_every", "--power-threshold", "60C", "--trace",
                          str(tmp_path / "t.json"), "--checkpoint-every", "1s",
                          str(prog)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ran" in out.stdout, out.stderr[-3000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "shoal.supervise" in imported  # (this process launched the job)
    assert not {m for m in imported if m.split(".")[0] == "numpy" or m.startswith(
        "shoal.runtime")}, sorted(imported)
