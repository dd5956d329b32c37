"""A rank that aborts the job first lets the reader of its stderr take every byte: the
launcher kills every rank at the abort, and a line still in the pipe was lost (CI saw the
traceback of a failing rank vanish)."""

import os
import threading
import time

import pytest

from shoal.rank import _drained


def test_waits_until_the_reader_has_taken_what_was_written():
    r, w = os.pipe()
    taken = threading.Event()

    def reader():
        time.sleep(0.3)  # mpiexec's proxy, busy elsewhere
        os.read(r, 1 << 16)
        taken.set()

    with os.fdopen(w, "w") as stream:
        stream.write("rank 2: Traceback ...\n")
        stream.flush()
        thread = threading.Thread(target=reader)
        thread.start()
        _drained(stream, 30.0)
        assert taken.is_set()
        thread.join()
    os.close(r)


@pytest.mark.timeout(20)  # a wait without its limit fails here
def test_a_reader_that_never_reads_costs_at_most_the_limit():
    r, w = os.pipe()
    with os.fdopen(w, "w") as stream:
        stream.write("nobody reads this\n")
        stream.flush()
        _drained(stream, 0.2)
        assert os.read(r, 100) == b"nobody reads this\n"
    os.close(r)


def test_a_regular_file_returns_at_once(tmp_path):
    with open(tmp_path / "err.txt", "w") as stream:
        stream.write("x\n")
        stream.flush()
        _drained(stream, 30.0)
    assert (tmp_path / "err.txt").read_text() == "x\n"
