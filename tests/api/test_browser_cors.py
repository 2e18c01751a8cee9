"""CORS in a real browser: a page on another origin calls the real gunicorn with a token.

Debian's headless Chromium loads a page from a small HTTP server of the test's own, on another
loopback port (so another origin), whose script sends `POST /plants` with a bearer token and
reads the answer. The browser, not the test, decides whether the page may: what the service
answers to its preflight and to the request is what is checked.
"""

import http.server
import json
import threading
from urllib.parse import urlencode

import pytest

# selenium comes with the `outside` extra, which the fast set is run without.
pytest.importorskip("selenium", reason="the browser tests need the `outside` extra")

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait

from plantstore.testing.gunicorn_server import GunicornServer, server_environ

pytestmark = pytest.mark.slow

TOKEN = "cors-browser-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Seconds the browser gets to load the page and have its request answered, on a busy machine.
PATIENCE = 30

#: The page of a shop on another origin: it creates PLANT in the service named in its query
#: (`?service=http://…`) and writes what came of it as JSON into `data-outcome` of `#outcome`.
#: A request the browser blocks rejects with a TypeError, and the page learns nothing else.
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>A shop</title></head>
<body><p id="outcome"></p>
<script>
const service = new URLSearchParams(location.search).get("service");
const outcome = document.getElementById("outcome");
const report = (what) => { outcome.dataset.outcome = JSON.stringify(what); };
fetch(service + "/plants", {
  method: "POST",
  headers: {
    "Authorization": "Bearer TOKEN",
    "Content-Type": "application/json",
    "X-Request-ID": "from-the-shop",
  },
  body: JSON.stringify(PLANT),
})
  .then(async (response) => report({
    status: response.status,
    requestId: response.headers.get("X-Request-ID"),
    body: await response.json(),
  }))
  .catch((error) => report({error: error.name}));
</script>
</body></html>
"""
PLANT = {"id": 5173, "name": "bird's nest fern", "tag": "shade"}


class Page:
    """An HTTP server on a loopback port of its own, serving PAGE: a page of another origin."""

    def __init__(self) -> None:
        body = PAGE.replace("TOKEN", TOKEN).replace("PLANT", json.dumps(PLANT)).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                """Say nothing: the test reads what the browser and gunicorn saw."""

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever)
        self._thread.start()

    def open(self, browser, service: str) -> dict:
        """Open the page in `browser`, calling `service`; give what it reported."""
        browser.get(f"{self.origin}/?{urlencode({'service': service})}")
        outcome = WebDriverWait(browser, PATIENCE).until(
            shown.presence_of_element_located((By.CSS_SELECTOR, "#outcome[data-outcome]"))
        )
        return json.loads(outcome.get_attribute("data-outcome"))

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def page():
    serving = Page()
    yield serving
    serving.stop()


def call_the_service(browser, page: Page, cors_origins: str | None) -> tuple[dict, int, str]:
    """Run gunicorn with `cors_origins` (None: unset) and let the page call it.

    Give what the page reported, the status of `GET /plants/{id}` for its plant afterwards, and
    gunicorn's access log.
    """
    environ = {"PLANTSTORE_TOKENS": TOKEN}
    if cors_origins is not None:
        environ["PLANTSTORE_CORS_ORIGINS"] = cors_origins
    server = GunicornServer(server_environ(**environ))
    try:
        outcome = page.open(browser, f"http://127.0.0.1:{server.port}")
        status, _, _ = server.request("GET", f"/plants/{PLANT['id']}", headers=AUTH)
    finally:
        access_log, errors = server.stop()
    assert "Traceback" not in errors, errors
    return outcome, status, access_log


@pytest.mark.parametrize("listed", ["{page}", "https://shop.example,{page}", "*"])
def test_a_page_on_a_listed_origin_creates_a_plant_with_its_token(browser, page, listed):
    outcome, status, access_log = call_the_service(browser, page, listed.format(page=page.origin))

    assert outcome == {
        "status": 200,
        "requestId": "from-the-shop",
        "body": {"name": "bird's nest fern", "tag": "shade"},
    }
    assert status == 200
    assert '"OPTIONS /plants" status=204' in access_log
    assert '"POST /plants" status=200' in access_log


@pytest.mark.parametrize("cors_origins", [None, "https://shop.example"])
def test_a_page_on_an_origin_not_listed_is_blocked_by_the_browser(browser, page, cors_origins):
    outcome, status, access_log = call_the_service(browser, page, cors_origins)

    assert outcome == {"error": "TypeError"}
    assert status == 404
    # The browser asked, was not let, and never sent the request itself.
    assert '"OPTIONS /plants" status=204' in access_log
    assert "POST /plants" not in access_log
