"""The dashboard's server without a browser: its JSON endpoints on hand-written live files,
``since``, the token off localhost (403 without, 200 with) and the Host check on it, the
static files (shipped as package data, nothing from outside), and the command's mistakes
(a port in use, a bad --host: a message and exit code 2)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
from livefiles import expected_utilisation, write_job
from served import base, serve, stop

from shoal import live
from shoal.dashboard import data
from shoal.dashboard.server import make_server, needs_token, static_file
from shoal.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "shoal"]


@pytest.fixture
def registry(tmp_path):
    reg = tmp_path / "registry"
    write_job(reg, "job-1", npes=4, periods=20, lb_at=10)
    return reg


@pytest.fixture
def server(registry, tmp_path):
    srv = serve(root=str(registry), gossip_dir=str(tmp_path / "no-daemon"))
    yield srv
    stop(srv)


def get(url, headers=None):
    """(status, headers, body) of a GET; redirects are not followed."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_jobs_and_a_job_with_since(server, registry):
    status, _, body = get(base(server) + "/api/jobs")
    assert status == 200
    jobs = json.loads(body)["jobs"]
    assert [j["id"] for j in jobs] == ["job-1"]
    assert jobs[0]["npes"] == 4 and jobs[0]["nodes"] == 2 and jobs[0]["state"] == "done"
    assert jobs[0]["uptime"] == pytest.approx(10.0)

    status, _, body = get(base(server) + "/api/job/job-1")
    answer = json.loads(body)
    assert status == 200 and sorted(answer["pes"]) == ["0", "1", "2", "3"]
    for pe, util in enumerate(expected_utilisation(4, 20, 10)):
        rows = answer["pes"][str(pe)]
        assert len(rows) == 20
        assert live.utilisation(rows) == pytest.approx(util, rel=1e-4)
    assert [e["kind"] for e in answer["events"]] == ["lb", "checkpoint"]

    last = answer["pes"]["0"][14]["t"]  # only rows newer than since, and the later events
    status, _, body = get(base(server) + f"/api/job/job-1?since={last}")
    newer = json.loads(body)
    assert all(len(rows) == 5 for rows in newer["pes"].values())
    assert all(r["t"] > last for rows in newer["pes"].values() for r in rows)
    assert newer["events"] == [] and newer["since"] == last


def test_a_growing_job_is_read_from_where_it_stopped(server, registry):
    folder = registry / live.JOBS / "job-1"
    first = json.loads(get(base(server) + "/api/job/job-1")[2])
    t = first["pes"]["1"][-1]["t"]
    row = dict(first["pes"]["1"][-1], t=t + 0.5)
    with open(folder / live.pe_file(1), "a") as f:
        f.write(json.dumps(row) + "\n" + '{"t": 1e12, "dt"')  # and a half-written line
    newer = json.loads(get(base(server) + f"/api/job/job-1?since={t}")[2])
    assert [r["t"] for r in newer["pes"]["1"]] == [t + 0.5]
    assert newer["pes"]["0"] == []


def test_bad_requests_say_what_to_change(server):
    status, _, body = get(base(server) + "/api/job/nope")
    assert status == 404 and "no job 'nope'" in json.loads(body)["error"]
    status, _, body = get(base(server) + "/api/job/job-1?since=yesterday")
    assert status == 400 and "unix seconds" in json.loads(body)["error"]
    status, _, body = get(base(server) + "/api/nothing")
    assert status == 404 and "/api/cluster" in json.loads(body)["error"]
    assert get(base(server) + "/static/../server.py")[0] == 404
    assert get(base(server) + "/static/nothing.js")[0] == 404
    assert get(base(server) + "/elsewhere")[0] == 404


def test_cluster_without_a_daemon_lists_the_hosts_of_running_jobs(tmp_path):
    reg = tmp_path / "registry"
    write_job(reg, "running", npes=3, state="running", hosts=["a", "b", "b"])
    write_job(reg, "ended", npes=2, hosts=["c", "c"])
    view = data.cluster(tmp_path / "no-daemon", reg)
    assert view["source"] == "jobs" and "--gossip-state-dir" in view["reason"]
    assert [(n["name"], n["pes"], n["jobs"]) for n in view["nodes"]] == [
        ("a", 1, ["running"]), ("b", 2, ["running"])]


def test_pages_and_static_files(server):
    for page in ("/", "/cluster", "/jobs", "/job/job-1"):
        status, headers, body = get(base(server) + page)
        assert status == 200 and b"/static/dashboard.js" in body
        assert "default-src 'none'" in headers["Content-Security-Policy"]
    status, headers, body = get(base(server) + "/static/dashboard.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert body == static_file("dashboard.js")


def test_no_asset_loads_from_outside():
    """Login nodes have no internet: no URL of another host in the page, script or styles
    (the SVG namespace is a name, not a download)."""
    folder = ROOT / "src/shoal/dashboard/static"
    names = sorted(p.name for p in folder.iterdir())
    assert {"index.html", "dashboard.js", "dashboard.css"} <= set(names)
    for name in names:
        text = (folder / name).read_text()
        text = text.replace("http://www.w3.org/2000/svg", "")
        assert not re.search(r"(https?:)?//[A-Za-z0-9.-]+\.[a-z]{2,}", text), name
        assert "@import" not in text and "url(" not in text, name


def test_static_files_are_package_data():
    """A non-editable install has them: pyproject.toml names them as package data."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["shoal.dashboard"]
    folder = ROOT / "src/shoal/dashboard/static"
    for path in folder.iterdir():
        assert any(path.match(p) for p in patterns), f"{path.name} is not package data"


def test_the_token_rule():
    assert not needs_token("127.0.0.1") and not needs_token("localhost")
    assert not needs_token("::1") and not needs_token("[::1]")
    assert needs_token("0.0.0.0") and needs_token("127.0.0.2") and needs_token("10.1.2.3")


def test_off_localhost_a_token_is_needed(registry, tmp_path):
    srv = serve(host="127.0.0.2", root=str(registry), gossip_dir=str(tmp_path / "none"))
    try:
        assert srv.token and len(srv.token) >= 24
        assert srv.url().startswith(f"http://127.0.0.2:{srv.port}/?token=")
        url = base(srv, "127.0.0.2")
        for path in ("/", "/api/jobs", "/api/job/job-1", "/static/dashboard.js"):
            status, _, body = get(url + path)
            assert status == 403 and b"token" in body, path
        assert get(url + "/api/jobs?token=wrong")[0] == 403
        assert get(url + "/api/jobs", {"Cookie": f"{srv.cookie}=wrong"})[0] == 403
        # ?token= on a page: a cookie, and the same page without the token in the address
        status, headers, _ = get(url + f"/job/job-1?token={srv.token}")
        assert status == 302 and headers["Location"] == "/job/job-1"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert cookie == f"{srv.cookie}={srv.token}" and "HttpOnly" in headers["Set-Cookie"]
        assert get(url + "/api/jobs", {"Cookie": cookie})[0] == 200
        assert get(url + "/job/job-1", {"Cookie": cookie})[0] == 200
        assert get(url + f"/api/jobs?token={srv.token}")[0] == 200
        assert get(url + "/api/jobs", {"Authorization": f"token {srv.token}"})[0] == 200
    finally:
        stop(srv)


def test_a_given_token_is_needed_on_localhost_too(registry):
    srv = serve(token="s3cret", root=str(registry))
    try:
        assert get(base(srv) + "/api/jobs")[0] == 403
        assert get(base(srv) + "/api/jobs?token=s3cret")[0] == 200
    finally:
        stop(srv)


def test_on_localhost_other_host_names_are_refused(server):
    """Without a token only requests for this machine's loopback are answered: a page of
    another site cannot read the dashboard by pointing its own name at 127.0.0.1."""
    assert get(base(server) + "/api/jobs", {"Host": "evil.example:80"})[0] == 403
    assert get(base(server) + "/api/jobs", {"Host": f"localhost:{server.port}"})[0] == 200
    assert get(base(server) + "/api/jobs", {"Host": f"[::1]:{server.port}"})[0] == 200


def test_make_server_refuses_what_cannot_work():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"port {port} is in use.*--port"):
            make_server("127.0.0.1", port)
    with pytest.raises(UsageError, match="does not resolve"):
        make_server("no-such-host.invalid", 0)
    with pytest.raises(UsageError, match="not an address of this machine"):
        make_server("192.0.2.1", 0)  # TEST-NET-1: never this machine's (bound, no traffic)
    with pytest.raises(UsageError, match="not a TCP port"):
        make_server("127.0.0.1", 70000)
    with pytest.raises(UsageError, match="--token is empty"):
        make_server("127.0.0.1", 0, token=" ")


def test_the_command_exits_2_with_a_message(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([*CLI, "dashboard", "--port", str(port)], capture_output=True,
                             text=True, timeout=60)
    assert out.returncode == 2 and f"port {port} is in use" in out.stderr
    out = subprocess.run([*CLI, "dashboard", "--host", "no-such-host.invalid"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--host 'no-such-host.invalid' does not resolve" in out.stderr
    out = subprocess.run([*CLI, "dashboard", "--port", "web"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--port 'web' is not a number" in out.stderr
    out = subprocess.run([*CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert re.search(r"^\s+dashboard\s+Serve a web dashboard", out.stdout, re.M)


def test_the_command_prints_its_url_with_a_generated_token(tmp_path, registry):
    proc = subprocess.Popen([*CLI, "dashboard", "--host", "127.0.0.2", "--port", "0",
                             "--registry", str(registry)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.match(r"shoal dashboard: (http://127\.0\.0\.2:\d+)/\?token=(\S+)$", line)
        assert match, line
        url, token = match.groups()
        assert get(url + "/api/jobs")[0] == 403
        status, _, body = get(url + f"/api/jobs?token={token}")
        assert status == 200 and json.loads(body)["jobs"][0]["id"] == "job-1"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0  # SIGTERM: the socket closed, a clean exit


def test_a_nan_in_the_rows_is_sent_as_null():
    assert json.loads(data.finite_json({"pes": {"0": [{"t": 1.0, "idle": float("nan")}]},
                                        "x": [float("inf"), 2.0]})) == {
        "pes": {"0": [{"t": 1.0, "idle": None}]}, "x": [None, 2.0]}
