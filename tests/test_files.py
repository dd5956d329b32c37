"""Outputs are written whole or not at all (issue 17, section 7)."""

import pytest

from shoal.errors import UsageError
from shoal.files import atomic, check_outputs, write_text


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "result.csv"
    target.write_text("old results\n")
    with pytest.raises(RuntimeError), atomic(target) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old results\n"
    assert [p.name for p in tmp_path.iterdir()] == ["result.csv"]
    write_text(target, "new results\n")
    assert target.read_text() == "new results\n"
    assert [p.name for p in tmp_path.iterdir()] == ["result.csv"]


def test_outputs_are_checked_together(tmp_path):
    check_outputs({"--csv": [tmp_path / "a.csv", tmp_path / "a.csv.json"],
                   "--plot": tmp_path / "a.png", "--out": None})
    assert list(tmp_path.iterdir()) == []  # the probes are gone
    with pytest.raises(UsageError, match="--csv and --plot name the same file"):
        check_outputs({"--csv": [tmp_path / "a", tmp_path / "a.json"],
                       "--plot": tmp_path / "sub" / ".." / "a"})
