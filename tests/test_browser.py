"""End to end: headless Chromium (Debian's chromium + chromium-driver) drives the search page of a live server.

Set WHITEVEC_SCREENSHOT=path.png to also keep the screenshot somewhere outside the pytest temporary folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
pytest.importorskip("selenium", reason="selenium is not installed (dev extra)")
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.index_helpers import HashEncoder
from whitevec.index import Document, Retriever
from whitevec.index import SearchHit as Hit
from whitevec.index.retriever import UNKNOWN_QUERY_NOTE, QueryHits
from whitevec.service.app import create_app
from whitevec.service.settings import ServeSettings

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = pytest.mark.skipif(
    not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)",
)

XSS = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'
DOCS = [
    "the aerodynamics of a wing in a slipstream",
    "boundary layer flow over a flat plate",
    "heat transfer in hypersonic flow",
    "buckling of thin cylindrical shells",
    "supersonic flow past a cone",
    XSS + " wing flutter",
    "lift and drag of a delta wing",
]


def _vector(text: str, dim: int = 32) -> np.ndarray:
    vec = np.zeros(dim, dtype=np.float32)
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vec[digest[0] % dim] += 1.0
    return vec / max(float(np.linalg.norm(vec)), 1e-9)


class PageRetriever:
    manifest = {  # noqa: RUF012 - a fixed fake manifest
        "model": "all-MiniLM-L6-v2",
        "pooling": "first-last-avg",
        "transform": "whitening-256",
        "dims": 32,
        "metric": "cosine",
    }

    def __init__(self) -> None:
        self.matrix = np.stack([_vector(t) for t in DOCS])

    @property
    def count(self) -> int:
        return len(DOCS)

    def ranking(self, query: str, k: int) -> list[tuple[str, float]]:
        scores = self.matrix @ _vector(query)
        order = sorted(range(len(DOCS)), key=lambda i: (-float(scores[i]), i))[:k]
        return [(f"cran-{i + 1}", float(scores[i])) for i in order]

    def search(self, queries: list[str], k: int = 10) -> list[list[Hit]]:
        return [self._hits(query, k) for query in queries]

    def _hits(self, query: str, k: int) -> list[Hit]:
        if not any(c.isalnum() for c in query):  # as the Retriever answers a query with no token it knows
            unknown = QueryHits()
            unknown.note = UNKNOWN_QUERY_NOTE
            return unknown
        return [Hit(i, s, DOCS[int(i[5:]) - 1], None) for i, s in self.ranking(query, k)]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([_vector(t) for t in texts])


@pytest.fixture
def live_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, PageRetriever]]:
    retriever = PageRetriever()
    with serving(retriever, getattr(request, "param", None) or ServeSettings()) as base:
        yield base, retriever


@contextlib.contextmanager
def serving(retriever: Any, settings: ServeSettings) -> Iterator[str]:
    """``retriever`` served by uvicorn on a free local port, in a thread; the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(retriever, settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console lines, CSP violations among them
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager fetch a browser or driver
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def test_search_page_end_to_end(
    live_server: tuple[str, PageRetriever], browser: webdriver.Chrome, tmp_path: Path
) -> None:
    base, retriever = live_server
    browser.get(base + "/")
    wait = WebDriverWait(browser, 20)
    assert browser.title == "whitevec search"

    # The index's model and transform are shown.
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '#index-info [data-field="transform"]')))
    facts = {
        el.get_attribute("data-field"): el.find_element(By.CLASS_NAME, "value").text
        for el in browser.find_elements(By.CSS_SELECTOR, "#index-info .fact")
    }
    assert facts["model"] == "all-MiniLM-L6-v2" and facts["transform"] == "whitening-256"
    assert facts["documents"] == str(len(DOCS))

    # Type a query, press Enter, read the ranked results.
    query = "wing flutter and lift"
    box = browser.find_element(By.ID, "query")
    box.send_keys(query)
    k_box = browser.find_element(By.ID, "k")
    k_box.clear()
    k_box.send_keys("5")
    box.send_keys(Keys.ENTER)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li.hit")) == 5)
    hits = browser.find_elements(By.CSS_SELECTOR, "#results li.hit")
    shown = [
        (h.find_element(By.CLASS_NAME, "doc-id").text, float(h.find_element(By.CLASS_NAME, "score").text))
        for h in hits
    ]
    expected = retriever.ranking(query, 5)
    assert [f"id {i}" for i, _ in expected] == [i for i, _ in shown]
    np.testing.assert_allclose([s for _, s in shown], [s for _, s in expected], atol=1e-4)
    assert "5 results" in browser.find_element(By.ID, "status").text

    # A document holding markup shows as text: no element made from it, no script run.
    texts = [h.find_element(By.CLASS_NAME, "doc-text").text for h in hits]
    assert any(XSS in t for t in texts)
    assert browser.find_elements(By.CSS_SELECTOR, "#results img, #results script") == []
    assert browser.title == "whitevec search"

    shot = tmp_path / "serve-page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    keep = os.environ.get("WHITEVEC_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


def _search_on_page(browser: webdriver.Chrome, base: str, query: str) -> None:
    """Open the search page, type ``query`` and press Enter."""
    browser.get(base + "/")
    box = browser.find_element(By.ID, "query")
    box.send_keys(query)
    box.send_keys(Keys.ENTER)


def test_search_page_shows_the_note_of_a_query_with_no_known_token(
    live_server: tuple[str, PageRetriever], browser: webdriver.Chrome
) -> None:
    _search_on_page(browser, live_server[0], "ⓩⓩⓩ")
    WebDriverWait(browser, 20).until(lambda d: UNKNOWN_QUERY_NOTE in d.find_element(By.ID, "status").text)
    assert browser.find_elements(By.CSS_SELECTOR, "#results li.hit") == []


def test_search_page_shows_a_server_error(
    live_server: tuple[str, PageRetriever], browser: webdriver.Chrome
) -> None:
    # Over max_text_chars: the page shows the server's message, not a blank list.
    _search_on_page(browser, live_server[0], "x" * 2001)
    WebDriverWait(browser, 20).until(lambda d: "Error" in d.find_element(By.ID, "status").text)
    assert "max_text_chars" in browser.find_element(By.ID, "status").text
    assert browser.find_elements(By.CSS_SELECTOR, "#results li") == []


@pytest.mark.parametrize("live_server", [ServeSettings(api_key="page-key-1")], indirect=True)
def test_search_page_asks_for_the_api_key(
    live_server: tuple[str, PageRetriever], browser: webdriver.Chrome
) -> None:
    base, retriever = live_server
    browser.get(base + "/")
    wait = WebDriverWait(browser, 20)
    key_box = wait.until(ec.visibility_of_element_located((By.ID, "api-key")))  # shown after the 401
    key_box.send_keys("page-key-1", Keys.TAB)  # change event: kept for this tab, info reloaded
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '#index-info [data-field="model"]')))
    box = browser.find_element(By.ID, "query")
    box.send_keys("supersonic cone", Keys.ENTER)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li.hit")) == len(DOCS))
    first = browser.find_element(By.CSS_SELECTOR, "#results li.hit .doc-id").text
    assert first == "id " + retriever.ranking("supersonic cone", 1)[0][0]


@pytest.mark.parametrize("live_server", [ServeSettings(api_key="docs-key-1")], indirect=True)
def test_api_docs_render_from_this_server_alone(
    live_server: tuple[str, PageRetriever], browser: webdriver.Chrome, tmp_path: Path
) -> None:
    base, _ = live_server
    browser.get(base + "/docs")
    wait = WebDriverWait(browser, 30)
    # Swagger UI has read /openapi.json and drawn one block per operation.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) >= 4)
    paths = {el.text for el in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert {"/health", "/info", "/search", "/embed"} <= paths, paths
    assert browser.find_elements(By.CSS_SELECTOR, ".btn.authorize")  # the X-API-Key scheme is offered
    # Everything the page fetched came from this server, and the page's CSP refused nothing it needed.
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert fetched and all(url.startswith(base + "/") for url in fetched), fetched
    refused = [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == [], refused
    shot = tmp_path / "docs-page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    keep = os.environ.get("WHITEVEC_DOCS_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


def test_search_page_switches_mode_and_shows_the_rankers(tmp_path: Path, browser: webdriver.Chrome) -> None:
    docs = [Document(f"cran-{i + 1}", text) for i, text in enumerate(DOCS)]
    folder = tmp_path / "hybrid-index"
    with (
        Retriever.build(docs, folder, encoder=HashEncoder(), lexical="bm25", transform="none") as retriever,
        serving(retriever, ServeSettings()) as base,
    ):
        browser.get(base + "/")
        wait = WebDriverWait(browser, 20)
        mode = wait.until(ec.visibility_of_element_located((By.ID, "mode")))  # shown once /info says lexical
        assert Select(mode).first_selected_option.get_attribute("value") == "hybrid"  # the index's own
        query = "wing flutter"
        for chosen in ("lexical", "hybrid"):
            Select(mode).select_by_value(chosen)
            box = browser.find_element(By.ID, "query")
            box.clear()
            box.send_keys(query, Keys.ENTER)
            expected = retriever.search([query], k=10, mode=chosen)[0]
            wanted = ["id " + hit.id for hit in expected]

            def shows_wanted(d: webdriver.Chrome, w: list[str] = wanted) -> bool:
                return _texts(d, "#results .doc-id") == w

            wait.until(shows_wanted)
            shown = _texts(browser, "#results .rankers")
            assert shown == [
                " · ".join(f"{name} #{place['rank']}" for name, place in (hit.rankers or {}).items())
                for hit in expected
            ]
        assert any("dense #" in text and "lexical #" in text for text in shown)  # the hybrid hits: both rankers
        assert all(text.startswith("lexical") or text.startswith("dense") for text in shown)


def test_search_page_hides_the_mode_of_a_dense_index(
    live_server: tuple[str, PageRetriever], browser: webdriver.Chrome
) -> None:
    base, _ = live_server
    browser.get(base + "/")
    wait = WebDriverWait(browser, 20)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '#index-info [data-field="model"]')))
    assert not browser.find_element(By.ID, "mode").is_displayed()
    _search_on_page(browser, base, "supersonic cone")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li.hit")) == len(DOCS))
    assert browser.find_elements(By.CSS_SELECTOR, "#results .rankers") == []  # dense hits: no ranker line


def _texts(browser: webdriver.Chrome, selector: str) -> list[str]:
    """The text of every element ``selector`` finds, read in one script (the list may be redrawn meanwhile)."""
    script = "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)"
    return list(browser.execute_script(script, selector))
