"""The docs site in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by selenium, on the site built once per session (conftest.py) and
served from a localhost http.server.

Checks that the index and a reference page render, that the search (furo's JavaScript) finds
``pull_subscribe``, and that no internal link is broken: every ``<a href>`` of every page of
the site leads to a file of the site, and its ``#anchor`` to an id in that file.

Screenshots go to the directory in ``JSS_ARTIFACTS`` (a temporary one by default), never into
the source tree. Skips with the reason when selenium, chromium or chromedriver is missing."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set, Tuple
from urllib.parse import unquote, urljoin, urlsplit

import pytest

WAIT = 60.0  # seconds: a deadline for the page or the search, on a loaded 2-core machine


def _find(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return ""


@pytest.fixture(scope="module")
def site(docs_html: Path) -> Iterator[str]:
    """The built site served on localhost: its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(docs_html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=WAIT)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """Where screenshots go: $JSS_ARTIFACTS, else a temporary directory."""
    given = os.environ.get("JSS_ARTIFACTS")
    path = Path(given) if given else Path(tempfile.mkdtemp(prefix="jss-artifacts-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, or a skip naming what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    chromium = _find("chromium", "chromium-browser")
    driver_path = _find("chromedriver")
    if not chromium:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    if not driver_path:
        pytest.skip("chromedriver is not installed (Debian: apt-get install chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, condition: Any, what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(condition)
    except TimeoutException:
        pytest.fail(f"{what}: not within {WAIT:.0f} s on {driver.current_url}", pytrace=False)


def test_the_index_renders(browser: Any, site: str, artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(site + "index.html")
    heading = _wait(
        browser, lambda d: d.find_element(By.CSS_SELECTOR, "article h1"), "the index's heading"
    )
    assert heading.text.strip().rstrip("#¶").strip() == "jetstream_sync"
    assert "jetstream_sync" in browser.title
    nav = browser.find_element(By.CSS_SELECTOR, ".sidebar-tree")
    links = nav.find_elements(By.CSS_SELECTOR, "a.reference")
    entries = [a.text.strip() for a in links if a.text.strip()]
    for expected in ("Getting started", "Guides", "API reference", "Benchmarks", "Changelog"):
        assert expected in entries, f"{expected!r} not in the navigation: {entries}"
    hrefs = [a.get_attribute("href") or "" for a in links]
    assert site + "architecture.html" in hrefs, hrefs
    assert browser.find_element(By.CSS_SELECTOR, ".sidebar-search").is_displayed()
    shot = artifacts / "docs-index.png"
    assert browser.save_screenshot(str(shot)), shot
    assert shot.stat().st_size > 0
    print(f"screenshot: {shot}")


def test_a_reference_page_renders(browser: Any, site: str, artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(site + "api/jetstream_sync.jetstream.pull.html")
    target = "jetstream_sync.jetstream.pull.PullSubscriber.pull_subscribe"
    signature = _wait(
        browser, lambda d: d.find_element(By.ID, target), "the pull_subscribe signature"
    )
    assert signature.is_displayed()
    assert "pull_subscribe" in signature.text
    # its docstring is rendered under the signature
    body = signature.find_element(By.XPATH, "following-sibling::dd")
    assert body.text.strip(), "pull_subscribe's description is empty"
    assert "jetstream_sync.jetstream.pull" in browser.title
    browser.execute_script("arguments[0].scrollIntoView()", signature)
    browser.save_screenshot(str(artifacts / "docs-reference.png"))


def test_the_search_finds_pull_subscribe(browser: Any, site: str, artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(site + "search.html?q=pull_subscribe")

    def results(d: Any) -> List[Any]:
        return d.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a")

    links = _wait(browser, results, "search results for pull_subscribe")
    hrefs = [a.get_attribute("href") or "" for a in links]
    texts = [a.text for a in links]
    assert any("pull_subscribe" in h for h in hrefs), (hrefs, texts)
    browser.save_screenshot(str(artifacts / "docs-search.png"))


class _Page(HTMLParser):
    """The hrefs of a page's <a> elements and the ids (and names) it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: List[str] = []
        self.ids: Set[str] = set()

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Any]]) -> None:
        attributes = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attributes.get(key):
                self.ids.add(attributes[key])
        if tag == "a" and attributes.get("href") is not None:
            self.hrefs.append(attributes["href"])


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _broken_links(root: Path) -> Tuple[int, List[str]]:
    pages: Dict[Path, _Page] = {p: _parse(p) for p in sorted(root.rglob("*.html"))}
    broken = []
    checked = 0
    for path, page in pages.items():
        base = "http://site/" + path.relative_to(root).as_posix()
        for href in page.hrefs:
            url = urlsplit(urljoin(base, href))
            if url.scheme not in ("http", "https") or url.netloc != "site":
                continue  # another site, mailto:, javascript:
            checked += 1
            target = root / unquote(url.path.lstrip("/"))
            if url.path.endswith("/"):
                target = target / "index.html"
            where = f"{path.relative_to(root)}: {href}"
            if not target.is_file():
                broken.append(f"{where} (no file {target.relative_to(root)})")
                continue
            fragment = unquote(url.fragment)
            if fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if fragment not in ids:
                    broken.append(f"{where} (no id {fragment!r} in {target.relative_to(root)})")
    return checked, broken


def test_no_internal_link_is_broken(docs_html: Path) -> None:
    checked, broken = _broken_links(docs_html)
    assert checked > 1000  # every page's navigation alone has dozens
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:50])


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text(
        '<a href="a.html#there">ok</a> <a href="a.html#gone">anchor</a>'
        ' <a href="missing.html">file</a> <a href="https://example.org/x">external</a>'
    )
    (tmp_path / "a.html").write_text('<h1 id="there">A</h1> <a href="index.html">back</a>')
    checked, broken = _broken_links(tmp_path)
    assert checked == 4
    assert len(broken) == 2
    assert "'gone'" in broken[0] and "missing.html" in broken[1]


def test_the_browser_sees_only_good_links(browser: Any, site: str, docs_html: Path) -> None:
    # the links as the browser has them after furo's scripts ran, on the index and a reference
    # page: each resolves to a file of the site
    from selenium.webdriver.common.by import By

    for page in ("index.html", "api/jetstream_sync.html"):
        browser.get(site + page)
        _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "article h1"), page)
        hrefs = browser.execute_script(
            "return Array.from(document.querySelectorAll('a[href]'), a => a.href)"
        )
        internal = [h for h in hrefs if h.startswith(site)]
        assert len(internal) > 10, hrefs
        for href in internal:
            path = unquote(urlsplit(href).path)[1:] or "index.html"
            assert (docs_html / path).is_file(), f"{page}: {href}"
