"""The launcher's watcher of dying ranks (launch._Deaths): it keeps the order in which the
ranks of this host died, and stopping it does not wait for its poll interval."""

import socket
import subprocess
import sys

import pytest

from shoal import launch


@pytest.mark.timeout(60)
def test_a_dead_rank_is_named_and_stop_wakes_the_watcher_at_once(tmp_path, monkeypatch):
    # an interval of an hour: stop() returns only because it wakes the watcher
    monkeypatch.setattr(launch, "WATCH_MAX", 3600.0)
    ranks = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
             for _ in range(2)]
    try:
        for pe, rank in enumerate(ranks):
            (tmp_path / f"{rank.pid}@{socket.gethostname()}").write_text(f"{pe}\n")
        deaths = launch._Deaths(tmp_path)
        ranks[1].kill()
        ranks[1].wait()
        deaths.stop()
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    # the watcher looks at the notes before each wait, and rank 1 was dead before the wake
    assert deaths.order == [("1", ranks[1].pid)]
    assert deaths.first() == ("1", ranks[1].pid)
    deaths.stop()  # twice: nothing left to close
