"""The browser the dashboard's page tests drive: Debian's headless Chromium through its
chromedriver and Selenium (no browser download: the machines have no internet).

Where chromium or chromedriver is missing the fixture installs them (``make browser-deps``'s
apt-get) when it runs as root with apt-get, and skips the test with the reason otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1300,1800")


def _installable() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def _ensure_browser() -> str | None:
    """None when chromium and chromedriver are there (installed now if need be), else why
    the browser tests cannot run."""
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return None
    if not _installable():
        return (f"{CHROMIUM} or {CHROMEDRIVER} is missing and cannot be installed here (not "
                "root, or no apt-get): `apt-get install chromium chromium-driver` as root "
                "runs the browser tests")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], env=env, check=False, timeout=600,
                   capture_output=True)
    out = subprocess.run(["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"],
                         env=env, timeout=1200, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"apt-get install chromium chromium-driver failed: {out.stderr[-2000:]}")
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium under Selenium, one per test module, with a fresh profile."""
    why = _ensure_browser()
    if why:
        pytest.skip(why)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed: pip install -e '.[dev]'")
    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    driver = webdriver.Chrome(options=options,
                              service=Service(executable_path=CHROMEDRIVER,
                                              log_output=str(log)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where a test's screenshots go (artifacts under pytest's tmp dir, not committed)."""
    folder = tmp_path / "screenshots"
    folder.mkdir()
    return folder
