"""Debian's Chromium driven by selenium through Debian's chromedriver (apt: chromium, chromium-driver; both from
one source package, so their versions always match): what the site's browser tests and the archive benchmark
open pages with.

Headless, with audio allowed to play without a click (the tests press play from a script), and every host name
but localhost resolving to nothing: a page that asked another host for anything would fail to load it, and the
request still shows in the performance log (``requests``), which the tests read. selenium is told where the
driver is, so its own driver manager never looks for (or downloads) one.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("PODSCRIBE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("PODSCRIBE_CHROMEDRIVER", "/usr/bin/chromedriver")


def missing() -> str | None:
    """Why no browser can be started here (None: one can)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).is_file() or shutil.which(path)):
            return f"{path} not found (apt-get install chromium chromium-driver; scripts/setup.sh does)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def chromium(width: int = 1000, height: int = 800):
    """A headless Chromium session (selenium's WebDriver), closed after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in CI's container
        "--disable-dev-shm-usage",
        "--autoplay-policy=no-user-gesture-required",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--mute-audio",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def requests(driver) -> list[str]:
    """The URLs the page asked for since the last call (Chromium's performance log: Network.requestWillBeSent)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def console_errors(driver) -> list[str]:
    """Errors the pages wrote to the console since the last call (uncaught exceptions, failed loads)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def elsewhere(urls: list[str], allowed_http: str | None = None) -> list[str]:
    """The URLs among ``urls`` that are not the page's own: file:// or the test's own server (``allowed_http``)."""
    own = ("file://", "data:", "blob:", "about:") + ((allowed_http,) if allowed_http else ())
    return [u for u in urls if not u.startswith(own)]
