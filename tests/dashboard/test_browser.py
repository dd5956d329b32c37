"""The dashboard's pages in headless Chromium (issue 29, item 5): a job page shows every PE
with the utilisation of its live rows (within 5%), the load balancing step with its
imbalance, and grows while the job runs (fetching only newer rows); the cluster page lists
the gossip daemons of 127.0.0.x; off localhost the token is needed (403 without, 200 with);
no request leaves the dashboard's origin; a real 2-PE job (busy_job.py) live, then post
mortem, against its own shoal.stats(). Screenshots go to pytest's tmp dir."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from livefiles import row, write_job
from served import base, serve, stop

from shoal import live
from shoal.dashboard import data
from shoal.errors import UsageError
from shoal.gossip.control import request
from shoal.options import LIVE_ENV

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[dev]'")
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def ready(driver, at_least: int = 1, timeout: float = 30) -> None:
    """Wait until the page has drawn ``at_least`` answers of the server."""
    def drawn(d):
        body = d.find_element(By.TAG_NAME, "body")
        return int(body.get_attribute("data-ready") or 0) >= at_least
    WebDriverWait(driver, timeout, poll_frequency=0.1).until(drawn)


def responses(driver) -> list[tuple[str, int]]:
    """(URL, status) of every response since the last call (Chromium's performance log)."""
    out = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.responseReceived":
            response = message["params"]["response"]
            out.append((response["url"], int(response["status"])))
    return out


@pytest.fixture
def page(browser):
    """The browser, its logs emptied of earlier tests'; it leaves the page at the end (a
    page still polling a stopped server would log errors into the next test)."""
    browser.get_log("browser")
    browser.get_log("performance")
    yield browser
    browser.get("about:blank")


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
            and "favicon" not in e["message"]]


def datasets(driver, css: str) -> list[dict[str, str]]:
    """The data attributes of every element ``css`` selects, read in one go (a running
    job's page redraws every second: elements found earlier go stale)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => ({...e.dataset}))", css)


def pes_shown(driver) -> dict[int, dict[str, str]]:
    """The usage chart's element of each PE: its data attributes."""
    return {int(d["pe"]): d for d in datasets(driver, "#usage g.pe")}


def test_the_job_page_shows_every_pe_its_utilisation_and_the_lb_step(page, tmp_path,
                                                                      shots):
    reg = tmp_path / "registry"
    folder = write_job(reg, "job-1", npes=6, periods=40, lb_at=20)
    srv = serve(root=str(reg), gossip_dir=str(tmp_path / "none"))
    try:
        responses(page)  # (the log of earlier pages)
        page.get(base(srv) + "/job/job-1")
        ready(page)
        loaded = live.load(folder)
        shown = pes_shown(page)
        assert sorted(shown) == list(range(6)), "every PE has its element"
        for pe, attrs in shown.items():
            want = live.utilisation(loaded["pes"][pe])
            assert abs(float(attrs["util"]) - want) <= 0.05 * want, (pe, attrs, want)
            assert attrs["host"] == f"node{pe // 2 + 1}" and attrs["rows"] == "40"
        overall = page.find_element(By.CSS_SELECTOR, "#kpi-util .value").text
        rows = [r for rs in loaded["pes"].values() for r in rs]
        assert float(overall.rstrip("%")) == pytest.approx(100 * live.utilisation(rows), abs=0.1)
        # the load balancing step: a marker on the time axis and a row of the events table
        step = loaded["events"][0]
        markers = page.find_elements(By.CSS_SELECTOR, "#profile g.marker.lb")
        assert len(markers) == 1 and markers[0].get_attribute("data-step") == "1"
        assert float(markers[0].get_attribute("data-before")) == pytest.approx(step["before"])
        assert float(markers[0].get_attribute("data-after")) == pytest.approx(step["after"])
        assert f"LB 1 {step['before']:.3g}→1" in markers[0].text
        lb_rows = page.find_elements(By.CSS_SELECTOR, "#events tr.event[data-kind=lb]")
        assert len(lb_rows) == 1 and lb_rows[0].get_attribute("data-strategy") == "greedy"
        assert page.find_elements(By.CSS_SELECTOR, "#profile g.marker.checkpoint")
        # the marker stands at the step's time on the axis (halfway along the 20 s run)
        line = markers[0].find_element(By.TAG_NAME, "line")
        profile = page.find_element(By.ID, "profile")
        left, right, span, t0 = (float(profile.get_attribute(f"data-{k}"))
                                 for k in ("left", "right", "span", "t0"))
        assert span == pytest.approx(20.0) and t0 == pytest.approx(loaded["job"]["start"])
        at = t0 + (float(line.get_attribute("x1")) - left) / (right - left) * span
        assert at == pytest.approx(step["t"], abs=0.01)
        # a finished job is drawn once: post mortem
        body = page.find_element(By.TAG_NAME, "body")
        assert body.get_attribute("data-job-state") == "done"
        assert "post mortem" in page.find_element(By.ID, "status").text
        # clicking a PE shows it alone in the time profile
        page.find_element(By.CSS_SELECTOR, "#usage g.pe[data-pe='5']").click()
        assert page.find_element(By.ID, "pe-select").get_attribute("value") == "5"
        bins = page.find_elements(By.CSS_SELECTOR, "#profile g.bin")
        first = float(bins[0].get_attribute("data-util"))
        assert first == pytest.approx(0.9, abs=0.01)  # PE 5 of 6 before the step: 0.9
        # its usage histogram: 20 periods at 0.9 busy, 20 at 0.6
        hist = {float(d["lo"]): int(d["count"]) for d in datasets(page, "#histogram g.hist-bin")}
        assert hist[0.9] == 20 and hist[0.6] == 20 and sum(hist.values()) == 40
        page.save_screenshot(str(shots / "job.png"))
        assert (shots / "job.png").stat().st_size > 10_000
        assert console_errors(page) == []
        outside = [u for u, _ in responses(page) if u.startswith(("http", "ws"))
                   and not u.startswith(base(srv))]  # (chrome:// is the page's own)
        assert outside == [], "everything loads from the dashboard itself"
    finally:
        stop(srv)


def test_a_running_job_grows_on_the_page_fetching_only_newer_rows(page, tmp_path, shots,
                                                                   monkeypatch):
    reg = tmp_path / "registry"
    folder = write_job(reg, "run-1", npes=3, periods=6, lb_at=100, state="running",
                       start=time.time() - 10)
    asked = []
    real = data.job

    def job(root, ident, since=0.0):
        asked.append(since)
        return real(root, ident, since)

    monkeypatch.setattr(data, "job", job)
    srv = serve(root=str(reg), gossip_dir=str(tmp_path / "none"))
    try:
        page.get(base(srv) + "/job/run-1")
        ready(page)
        assert {a["rows"] for a in pes_shown(page).values()} == {"6"}
        last = json.loads((folder / live.pe_file(0)).read_text().splitlines()[-1])["t"]
        for pe in range(3):
            with open(folder / live.pe_file(pe), "a") as f:
                for k in range(1, 5):
                    f.write(json.dumps(row(pe, last + 0.5 * k, 0.5, 0.6, "node1")) + "\n")
        with open(folder / live.EVENTS, "a") as f:
            f.write(json.dumps({"t": last + 1.0, "kind": "lb", "step": 2, "strategy": "refine",
                                "before": 1.4, "after": 1.02, "predicted": 1.01,
                                "migrations": 3, "seconds": 0.02}) + "\n")
        WebDriverWait(page, 20, poll_frequency=0.2).until(
            lambda d: {a["rows"] for a in pes_shown(d).values()} == {"10"})
        WebDriverWait(page, 10, poll_frequency=0.2).until(
            lambda d: datasets(d, "#profile g.marker.lb[data-step='2']"))
        assert asked[0] == 0 and max(asked) > 0, "later updates ask only for newer rows"
        rows = live.load(folder)["pes"]
        for pe, attrs in pes_shown(page).items():
            assert float(attrs["util"]) == pytest.approx(live.utilisation(rows[pe]), rel=0.05)
        assert datasets(page, "body")[0]["jobState"] == "running"
        page.save_screenshot(str(shots / "running.png"))
    finally:
        stop(srv)


def _status(state):
    try:
        return request(state, {"op": "status"}, timeout=1.0)
    except UsageError:
        return None


@contextlib.contextmanager
def gossip_daemons(tmp_path, groups=None):
    """3 gossip daemons node0-2 on 127.0.0.1-3 (one port), node0 the others' seed, each in
    its group of ``groups`` if given; yields their state directories once node0 knows its
    group's nodes (and every group's summary)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    states = [tmp_path / f"d{k}" for k in range(3)]
    procs = []
    try:
        for k in range(3):
            args = [sys.executable, "-m", "shoal", "gossip", "daemon", "--bind",
                    f"127.0.0.{k + 1}:{port}", "--interval", "100ms", "--state-dir",
                    str(states[k]), "--name", f"node{k}"]
            if k:
                args += ["--join", f"127.0.0.1:{port}"]
            if groups:
                args += ["--group", groups[k]]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        members = [k for k in range(3) if not groups or groups[k] == groups[0]]
        want_groups = len(set(groups)) if groups else 0

        def settled():  # (a group's summary counts its nodes a few rounds after they met)
            s = _status(states[0])
            return s and len(s["nodes"]) == len(members) and len(s["groups"]) == want_groups \
                and all(n["state"] == "alive" for n in s["nodes"]) \
                and all(g["nodes"] == groups.count(g["group"]) for g in s["groups"])
        end = time.monotonic() + 60
        while not settled():
            assert time.monotonic() < end, "the daemons did not find each other in 60 s"
            time.sleep(0.1)
        yield states, port
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def rows_of(driver, css):
    """Data attributes and text of each row ``css`` selects, read at once (the page redraws
    every 2 s)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(e => ({...e.dataset, text: e.innerText}))", css)


def test_the_cluster_page_lists_the_gossip_daemons(page, tmp_path, shots):
    with gossip_daemons(tmp_path) as (states, port):
        srv = serve(gossip_dir=str(states[0]), root=str(tmp_path / "registry"))
        try:
            page.get(base(srv) + "/cluster")
            ready(page)
            nodes = {n["name"]: n for n in rows_of(page, "#nodes tr.node")}
            assert sorted(nodes) == ["node0", "node1", "node2"]
            assert {n["state"] for n in nodes.values()} == {"alive"}
            assert nodes["node0"]["self"] == "1" and nodes["node1"]["self"] == "0"
            assert f"127.0.0.3:{port}" in nodes["node2"]["text"]
            assert int(nodes["node2"]["cores"]) >= 1 and float(nodes["node2"]["age"]) >= 0
            source = page.find_element(By.ID, "cluster-source").text
            assert "node0" in source and "3 nodes, 3 alive" in source
            assert page.find_elements(By.CSS_SELECTOR, "#groups") == []
            page.save_screenshot(str(shots / "cluster.png"))
            assert console_errors(page) == []
        finally:
            stop(srv)


def test_the_cluster_page_shows_groups_and_their_summaries(page, tmp_path, shots):
    with gossip_daemons(tmp_path, groups=["rack-a", "rack-a", "rack-b"]) as (states, _):
        srv = serve(gossip_dir=str(states[0]), root=str(tmp_path / "registry"))
        try:
            page.get(base(srv) + "/cluster")
            ready(page)
            nodes = rows_of(page, "#nodes tr.node")
            assert sorted(n["name"] for n in nodes) == ["node0", "node1"]  # its own group
            groups = {g["group"]: g for g in rows_of(page, "#groups tr.group")}
            assert sorted(groups) == ["rack-a", "rack-b"]
            assert groups["rack-a"]["own"] == "1" and groups["rack-a"]["nodes"] == "2"
            assert groups["rack-b"]["own"] == "0" and groups["rack-b"]["nodes"] == "1"
            assert "in group rack-a" in page.find_element(By.ID, "cluster-source").text
            page.save_screenshot(str(shots / "cluster-groups.png"))
        finally:
            stop(srv)


def test_off_localhost_the_page_needs_the_token(page, tmp_path, shots):
    reg = tmp_path / "registry"
    write_job(reg, "job-7", npes=2, periods=8, lb_at=4)
    srv = serve(host="127.0.0.2", root=str(reg), gossip_dir=str(tmp_path / "none"))
    try:
        url = base(srv, "127.0.0.2")
        responses(page)
        page.get(url + "/jobs")
        assert "403" in page.find_element(By.TAG_NAME, "body").text
        assert (url + "/jobs", 403) in responses(page)
        page.save_screenshot(str(shots / "forbidden.png"))
        page.get(srv.url("/jobs"))  # ?token=...: a cookie, then the page without it
        ready(page)
        assert page.current_url == url + "/jobs"
        jobs = page.find_elements(By.CSS_SELECTOR, "#jobs tr.job")
        assert [j.get_attribute("data-id") for j in jobs] == ["job-7"]
        seen = responses(page)
        assert (url + "/jobs", 200) in seen and (url + "/api/jobs", 200) in seen
        page.get(url + "/job/job-7")  # the cookie carries the token from now on
        ready(page)
        assert sorted(pes_shown(page)) == [0, 1]
        page.save_screenshot(str(shots / "with-token.png"))
    finally:
        stop(srv)


def test_a_real_job_live_then_post_mortem_agrees_with_its_stats(page, tmp_path, shots):
    """A 2-PE job (PE 0 about 8 times as busy as PE 1) started with a short live period: its
    page updates while it runs, and once it ended each PE's utilisation shown agrees within
    5 points with what the job's own ``shoal.stats()`` measured (entry seconds over entry
    plus idle seconds) and with the rows' utilisation."""
    reg, out = tmp_path / "registry", tmp_path / "stats.json"
    env = dict(os.environ, SHOAL_STATE_DIR=str(reg), **{LIVE_ENV: "0.25"})
    job = Path(__file__).with_name("busy_job.py")
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2",
                             "--timeout", "2min", str(job), str(out), "6"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    srv = serve(root=str(reg), gossip_dir=str(tmp_path / "none"))
    try:
        end = time.monotonic() + 60
        while not (found := live.jobs(reg)) or not live.load(found[0]["path"])["pes"]:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < end, "the job published nothing in 60 s"
            time.sleep(0.2)
        ident = found[0]["id"]
        page.get(base(srv) + f"/job/{ident}")
        ready(page)
        assert datasets(page, "body")[0]["jobState"] == "running"
        seen = int(datasets(page, "body")[0]["ready"])
        WebDriverWait(page, 30, poll_frequency=0.2).until(
            lambda d: int(datasets(d, "body")[0]["ready"]) >= seen + 2)  # live: it updates
        page.save_screenshot(str(shots / "real-running.png"))
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, output
        WebDriverWait(page, 30, poll_frequency=0.2).until(
            lambda d: datasets(d, "body")[0].get("jobState") in ("done", "failed"))
        assert datasets(page, "body")[0]["jobState"] == "done"
        stats = {s["pe"]: s for s in json.loads(out.read_text())["pes"]}
        rows = live.load(live.jobs(reg)[0]["path"])["pes"]
        shown = pes_shown(page)
        assert sorted(shown) == [0, 1]
        for pe, attrs in shown.items():
            util = float(attrs["util"])
            measured = stats[pe]["busy"] / (stats[pe]["busy"] + stats[pe]["idle"])
            assert util == pytest.approx(live.utilisation(rows[pe]), abs=0.01), pe
            assert abs(util - measured) <= 0.05, (pe, util, measured)
        assert float(shown[0]["util"]) > 2 * float(shown[1]["util"])
        page.save_screenshot(str(shots / "real-done.png"))
    finally:
        stop(srv)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
