"""shoal.jit: numba's on-disk cache is loaded and saved under one lock per machine and
user, so processes compiling the same function at once never mix their cache files
(numba/numba#4807)."""

import fcntl
import os
import subprocess
import sys
import time

from shoal.jit import LOCK

# numba's own place for the cache, beside the source (the suite's checked cache is elsewhere)
ENV = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
KERNEL = "from shoal.jit import njit\n\n@njit(cache=True)\ndef inc(x):\n    return x + 1\n"


def test_a_cache_load_waits_while_another_process_holds_the_lock(tmp_path):
    (tmp_path / "kern.py").write_text(KERNEL)
    code = (f"import sys, time; sys.path.insert(0, {str(tmp_path)!r}); import kern\n"
            "print('calling', flush=True); print(kern.inc(1), time.time(), flush=True)")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, env=ENV)
    assert first.stdout.split()[:2] == ["calling", "2"], first.stderr  # compiled, saved
    assert list(tmp_path.glob("__pycache__/kern.inc-*.nbi"))
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            second = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                      text=True, env=ENV)
            assert second.stdout.readline().strip() == "calling"
            time.sleep(3.0)  # (loading it takes about a second: it would be done)
        finally:
            released = time.time()
            fcntl.flock(lock, fcntl.LOCK_UN)
        value, finished = second.communicate(timeout=120)[0].split()
        assert value == "2"
        assert float(finished) >= released, "the cache was loaded while the lock was held"
