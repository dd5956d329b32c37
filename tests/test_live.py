"""The live-data reader (shoal.live) on files written by hand."""

import json
import os
import socket

import pytest

from shoal import live


def row(pe, t, entries, dt=0.5, idle=0.1):
    busy = sum(s for _, s in entries.values())
    return {"t": t, "dt": dt, "pe": pe, "host": "h", "entries": entries, "idle": idle,
            "overhead": max(0.0, dt - busy - idle), "sent": 3, "received": 2,
            "bytes_sent": 300, "bytes_received": 200, "rss": 1 << 20, "queue": 0,
            "elements": 4}


def job_json(job_id="j1", start=100.0, state="running", pid=None, jobdir="", **more):
    return {"id": job_id, "name": "app.py", "argv": ["app.py"], "npes": 2,
            "hosts": ["h", "h"], "start": start, "end": None, "state": state,
            "pid": os.getpid() if pid is None else pid, "host": socket.gethostname(),
            "jobdir": jobdir, "period": 0.5, **more}


def write_lines(path, objects, tail=""):
    path.write_text("".join(json.dumps(o) + "\n" for o in objects) + tail)


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "live"
    d.mkdir()
    (d / live.JOB).write_text(json.dumps(job_json()))
    write_lines(d / live.pe_file(0), [row(0, 10.5, {"A.f": [2, 0.2]}),
                                      row(0, 10.0, {"A.f": [1, 0.3]})])
    # PE 1's last line is being written: half an object, no newline
    write_lines(d / live.pe_file(1), [row(1, 10.0, {"A.g": [5, 0.4]})],
                tail='{"t": 10.5, "dt": 0.5, "pe": 1, "ent')
    write_lines(d / live.EVENTS, [{"t": 10.4, "kind": "checkpoint", "generation": 1},
                                  {"t": 10.2, "kind": "lb", "step": 1, "before": 1.5,
                                   "after": 1.1}])
    return d


def test_load_sorts_rows_and_skips_the_half_written_line(folder):
    data = live.load(folder)
    assert data["job"]["id"] == "j1"
    assert sorted(data["pes"]) == [0, 1]
    assert [r["t"] for r in data["pes"][0]] == [10.0, 10.5]
    assert [r["t"] for r in data["pes"][1]] == [10.0]  # the incomplete line is not a row
    assert [e["kind"] for e in data["events"]] == ["lb", "checkpoint"]


def test_the_rest_of_a_line_is_read_once_written(folder):
    live.load(folder)
    with open(folder / live.pe_file(1), "a") as f:
        f.write('ries": {"A.g": [1, 0.1]}}\n')  # (the writer finishes the line)
        f.write("not json after a crash\n")
        f.write(json.dumps(row(1, 11.0, {"A.g": [2, 0.2]})) + "\n")
    rows = live.load(folder)["pes"][1]
    assert [r["t"] for r in rows] == [10.0, 10.5, 11.0]
    assert rows[1]["entries"] == {"A.g": [1, 0.1]}


def test_since_keeps_only_later_rows_and_events(folder):
    data = live.load(folder, since=10.3)
    assert [r["t"] for r in data["pes"][0]] == [10.5]
    assert data["pes"][1] == []
    assert [e["t"] for e in data["events"]] == [10.4]


def test_a_replaced_file_is_read_again_from_the_start(folder):
    live.load(folder)
    path = folder / live.pe_file(0)
    tmp = folder / "new"
    write_lines(tmp, [row(0, 20.0, {"B.h": [1, 0.25]})])
    tmp.replace(path)
    assert [r["t"] for r in live.load(folder)["pes"][0]] == [20.0]


def test_utilisation_is_entry_seconds_over_time_covered():
    rows = [row(0, 1.0, {"A.f": [2, 0.2], "A.g": [1, 0.1]}, dt=0.5),
            row(0, 2.0, {"A.f": [1, 0.5]}, dt=1.0)]
    assert live.utilisation(rows) == pytest.approx(0.8 / 1.5)
    assert live.utilisation([]) == 0.0
    assert live.entry_totals(rows) == {"A.f": (3, pytest.approx(0.7)),
                                       "A.g": (1, pytest.approx(0.1))}


def test_an_empty_or_missing_folder_loads_as_nothing(tmp_path):
    assert live.load(tmp_path) == {"job": {}, "pes": {}, "events": []}
    assert live.load(tmp_path / "missing") == {"job": {}, "pes": {}, "events": []}


def test_jobs_lists_the_registry_newest_first_and_finds_the_files(tmp_path, folder):
    reg = tmp_path / "state"
    # a running job: registered, its files in its job directory's live/
    jobdir = folder.parent / "jobdir"
    (jobdir / live.LIVE).mkdir(parents=True)
    running = job_json("run-1", start=200.0, jobdir=str(jobdir))
    (jobdir / live.LIVE / live.JOB).write_text(json.dumps({**running, "npes": 3}))
    entry = live.registry_dir("run-1", reg)
    entry.mkdir(parents=True)
    (entry / live.JOB).write_text(json.dumps(running))
    # an ended job: its files moved into the registry
    ended = live.registry_dir("old-1", reg)
    ended.mkdir(parents=True)
    for f in folder.iterdir():
        (ended / f.name).write_text(f.read_text())
    (ended / live.JOB).write_text(json.dumps(job_json("old-1", start=50.0, state="done")))
    # a job whose supervisor is gone without saying so
    dead = live.registry_dir("dead-1", reg)
    dead.mkdir(parents=True)
    (dead / live.JOB).write_text(json.dumps(job_json("dead-1", start=100.0, pid=2**22 + 7)))
    (reg / live.JOBS / "junk").mkdir()  # (no job.json: not a job)

    found = live.jobs(reg)
    assert [j["id"] for j in found] == ["run-1", "dead-1", "old-1"]
    assert [j["alive"] for j in found] == [True, False, False]
    assert found[0]["path"] == str(jobdir / live.LIVE) and found[0]["npes"] == 3
    assert found[2]["path"] == str(ended)
    assert sorted(live.load(found[2]["path"])["pes"]) == [0, 1]
    assert live.find("old", reg) == ended
    assert live.find("run-1", reg) == jobdir / live.LIVE
    assert live.find(str(jobdir), reg) == jobdir / live.LIVE
    assert live.find("nope", reg) is None
    assert live.find(str(tmp_path / "state"), reg) is None  # a directory, not a job's


def test_the_registry_root_is_the_environments_or_home(monkeypatch, tmp_path):
    monkeypatch.setenv(live.STATE_ENV, str(tmp_path))
    assert live.root() == tmp_path
    assert live.jobs() == []
    monkeypatch.delenv(live.STATE_ENV)
    assert live.root() == live.Path.home() / ".local" / "state" / "shoal"
