"""shoal.jit: numba's on-disk cache is loaded and saved under one lock per machine and
user, so processes compiling the same function at once never mix their cache files
(numba/numba#4807); and a cached function is compiled by one process at a time, so the
others load it instead of compiling it too."""

import fcntl
import os
import subprocess
import sys
import time

from shoal.jit import LOCK, compile_lock

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


def test_a_process_that_finds_the_function_being_compiled_waits_and_loads_it(tmp_path):
    # a kernel whose compile takes seconds (400 statements), so that the second process
    # reaches it while the first still compiles
    body = "".join(f"    x = (x * {k % 7 + 2} + {k}) % 1000003\n" for k in range(400))
    (tmp_path / "slowkern.py").write_text("from shoal.jit import njit\n\n@njit(cache=True)\n"
                                          f"def big(x):\n{body}    return x\n")
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import slowkern\n"
            "slowkern.big(1); s = slowkern.big.stats\n"
            "print(sum(s.cache_hits.values()), sum(s.cache_misses.values()), flush=True)")
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=env)
    path = compile_lock("slowkern.big", "(int64,)")
    held = False
    while not held and first.poll() is None:  # until the first process holds the lock
        with open(path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(lock, fcntl.LOCK_UN)
            except BlockingIOError:
                held = True
        time.sleep(0.02)
    assert held, "the first process compiled without taking the function's compile lock"
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert first.communicate(timeout=120)[0].split() == ["0", "1"]  # compiled it
    assert second.stdout.split() == ["1", "0"], second.stderr  # waited, then loaded it
