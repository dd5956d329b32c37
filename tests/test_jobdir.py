"""The job directory (shoal.jobdir.JobDir): where it lives, and its files."""

import os

import pytest

from shoal.errors import UsageError
from shoal.jobdir import ENV, RESIZE_ENV, SHARED_HOME, JobDir


def test_one_node_gets_tmp_and_a_job_across_nodes_the_current_directory(tmp_path,
                                                                         monkeypatch):
    local, created = JobDir.create(None, spans_nodes=False)
    try:
        assert created and str(local.path).startswith("/tmp/") and local.visible()
        assert local.environment(None)[RESIZE_ENV].startswith("/dev/shm/")
    finally:
        local.remove(created)
    assert not local.path.exists()
    monkeypatch.chdir(tmp_path)
    wide, created = JobDir.create(None, spans_nodes=True)
    assert wide.path.parent == tmp_path / SHARED_HOME and created
    env = wide.environment(None)
    assert env[ENV] == str(wide.path) and env[RESIZE_ENV] == str(wide.path / "resize")
    wide.remove(created)
    assert not (tmp_path / SHARED_HOME).exists()  # (the last job's: removed with it)


def test_a_given_directory_keeps_the_users_files_and_loses_shoals(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    home, created = JobDir.create(str(tmp_path), spans_nodes=True)
    assert not created
    home.announce(4, 1)
    home.note_pe(3)
    home.note_checkpoint(tmp_path / "ckpt")
    assert home.last_checkpoint() == str((tmp_path / "ckpt").resolve())
    assert home.pe_of(os.getpid(), os.uname().nodename) == "3"
    home.remove(created)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_a_file_in_the_way_or_a_running_job_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="a file is in the way"):
        JobDir.create(str(tmp_path / "f"), spans_nodes=False)
    JobDir(tmp_path).announce(2, 1)  # this process stands for a running supervisor
    with pytest.raises(UsageError, match=f"job {os.getpid()} runs there"):
        JobDir.create(str(tmp_path), spans_nodes=False)


def test_a_rank_that_does_not_see_the_directory_notes_nothing(tmp_path):
    gone = JobDir(tmp_path / "elsewhere")
    assert not gone.visible()
    gone.note_pe(1)  # (another node's path: the handshake reports it)
    gone.note_kill(1)
    assert not (tmp_path / "elsewhere").exists()
