"""The tests of the runtime's core itself, run again under the pure-Python core
(``SHOAL_PURE=1``: shoal._compiled, docs/compiled.md) in a pytest of their own: the rest of
the suite runs under the installed core, compiled where it was built. One item of the
suite's, so that it runs beside the others' instead of after them (a second pytest session
after the first took 12 s of the suite's wall time)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE_TESTS = ["tests/test_compiled.py", *(f"tests/runtime/test_{name}.py" for name in (
    "messaging", "migration", "protocol", "hotpath", "runtime_units", "buffers"))]
# (not this worker's: the inner pytest is a session of its own)
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SHOAL_PURE"))}


def test_the_cores_own_tests_pass_under_the_pure_python_core():
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                          "no:cacheprovider", *PURE_TESTS], capture_output=True, text=True,
                         cwd=ROOT, env={**ENV, "SHOAL_PURE": "1"}, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    assert " passed" in out.stdout.splitlines()[-1] and " failed" not in out.stdout
