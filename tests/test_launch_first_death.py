"""Which PE ``shoal run`` names as the one that died first when the launcher's watcher sees
several dead at once (it ran late): the one ``--kill`` ended, else the lowest PE."""

import socket
import subprocess
import sys
import time

import pytest

from shoal.launch import _Deaths


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(("kills", "first"), [("2@1.0", "2"), ("", "0"), ("1@3.0", "0")])
def test_ranks_seen_dead_together_name_the_injected_kill_first(tmp_path, kills, first):
    host = socket.gethostname()
    for pe in ("2", "0"):
        (tmp_path / f"{_dead_pid()}@{host}").write_text(f"{pe}\n")
    deaths = _Deaths(tmp_path, kills)
    deadline = time.monotonic() + 30
    while len(deaths.order) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # (its first pass finds both)
    deaths.stop()
    assert sorted(pe for pe, _ in deaths.order) == ["0", "2"]
    assert deaths.first()[0] == first
