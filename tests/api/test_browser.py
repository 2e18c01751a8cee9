"""`/docs` in a real browser: Debian's headless Chromium, against the real gunicorn and nginx."""

import http.client
import json
import re
from urllib.parse import urlsplit

import pytest

# selenium comes with the `outside` extra, which the fast set is run without.
pytest.importorskip("selenium", reason="the browser tests need the `outside` extra")

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait

from plantstore.testing.gunicorn_server import GunicornServer, send, server_environ
from tests.support.browser import open_docs
from tests.support.nginx_proxy import NginxProxy

pytestmark = pytest.mark.slow

TOKEN = "browser-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Seconds the browser gets for each thing it is waited for: loading 1.5 MB of script on a
#: busy machine, or a request it sends.
PATIENCE = 30


@pytest.fixture
def gunicorn():
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN))
    yield server
    _, errors = server.stop()
    assert "Traceback" not in errors, errors


@pytest.fixture
def behind_nginx(tmp_path):
    """gunicorn on a unix socket, behind deploy/nginx.conf mounting it under `/plantstore`."""
    (tmp_path / "nginx").mkdir()
    socket_path = tmp_path / "gunicorn.sock"
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN), unix_path=socket_path)
    proxy = NginxProxy(tmp_path / "nginx", f"unix:{socket_path}", prefix="/plantstore")
    yield proxy
    log = proxy.stop()
    _, errors = server.stop()
    assert not re.search(r"\[(emerg|alert|crit)\]", log), log
    assert "Traceback" not in errors, errors


def the_document(gunicorn) -> dict:
    status, _, body = gunicorn.request("GET", "/openapi.json")
    assert status == 200
    return json.loads(body)


def what_the_page_loaded(driver) -> list[str]:
    """Every URL the page fetched: its files and the document (the Resource Timing API)."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(entry => entry.name)"
    )


def create_from_the_page(driver, token: str, plant: dict) -> tuple[str, str]:
    """Authorize with `token`, try `POST /plants` with `plant`; give the status and body shown."""
    wait = WebDriverWait(driver, PATIENCE)
    driver.find_element(By.CSS_SELECTOR, ".auth-wrapper .authorize").click()
    wait.until(shown.visibility_of_element_located((By.ID, "auth-bearer-value"))).send_keys(token)
    driver.find_element(By.CSS_SELECTOR, ".auth-btn-wrapper .authorize").click()
    wait.until(shown.element_to_be_clickable((By.CSS_SELECTOR, ".auth-btn-wrapper .btn-done")))
    driver.find_element(By.CSS_SELECTOR, ".auth-btn-wrapper .btn-done").click()
    wait.until(shown.invisibility_of_element_located((By.CSS_SELECTOR, ".modal-ux")))

    operation = "#operations-default-addPlant"
    driver.find_element(By.CSS_SELECTOR, f"{operation} .opblock-summary-control").click()
    wait.until(
        shown.element_to_be_clickable((By.CSS_SELECTOR, f"{operation} .try-out__btn"))
    ).click()
    body = wait.until(
        shown.visibility_of_element_located((By.CSS_SELECTOR, f"{operation} .body-param__text"))
    )
    body.send_keys(Keys.CONTROL, "a")
    body.send_keys(Keys.DELETE)
    body.send_keys(json.dumps(plant))
    driver.find_element(By.CSS_SELECTOR, f"{operation} .execute").click()
    answer = f"{operation} .live-responses-table .response"
    status = wait.until(
        shown.visibility_of_element_located((By.CSS_SELECTOR, f"{answer} .response-col_status"))
    )
    body = driver.find_element(By.CSS_SELECTOR, f"{answer} .response-col_description")
    return status.text, body.text


def test_the_page_shows_the_title_and_every_operation_from_the_service_alone(browser, gunicorn):
    base = f"http://127.0.0.1:{gunicorn.port}"
    open_docs(browser, f"{base}/docs", PATIENCE)

    assert browser.find_element(By.CSS_SELECTOR, ".info .title").text.startswith("Plant Store")
    document = the_document(gunicorn)
    expected = {
        f"operations-default-{operation['operationId']}": (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    # The events the service sends, each shown under its name in a section of its own.
    expected |= {
        f"operations-webhooks-{name}": (method.upper(), name)
        for name, operations in document["webhooks"].items()
        for method in operations
    }
    shown_operations = {
        block.get_attribute("id"): (
            block.find_element(By.CSS_SELECTOR, ".opblock-summary-method").text,
            block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").text,
        )
        for block in browser.find_elements(By.CSS_SELECTOR, ".opblock")
    }
    assert shown_operations == expected

    loaded = what_the_page_loaded(browser)
    assert f"{base}/openapi.json" in loaded
    assert f"{base}/docs/swagger-ui-bundle.js" in loaded
    assert all(url.startswith(f"{base}/") for url in loaded), loaded


def test_trying_post_plants_with_a_token_from_the_page_creates_the_plant(browser, gunicorn):
    open_docs(browser, f"http://127.0.0.1:{gunicorn.port}/docs", PATIENCE)
    plant = {"id": 4021, "name": "maidenhair fern", "tag": "shade"}

    status, body = create_from_the_page(browser, TOKEN, plant)

    assert status == "200"
    assert '"maidenhair fern"' in body
    status, _, body = gunicorn.request("GET", "/plants/4021", headers=AUTH)
    assert (status, json.loads(body)) == (200, {"name": "maidenhair fern", "tag": "shade"})


def test_a_token_the_service_does_not_accept_creates_nothing(browser, gunicorn):
    open_docs(browser, f"http://127.0.0.1:{gunicorn.port}/docs", PATIENCE)

    status, body = create_from_the_page(browser, "not-the-token", {"id": 7, "name": "ivy"})

    assert status == "401"
    assert "The bearer token is not accepted." in body

    status, _, _ = gunicorn.request("GET", "/plants/7", headers=AUTH)
    assert status == 404


def test_the_page_works_behind_nginx_under_a_path_prefix(browser, behind_nginx):
    base = f"http://127.0.0.1:{behind_nginx.port}/plantstore"
    open_docs(browser, f"{base}/docs", PATIENCE)

    loaded = what_the_page_loaded(browser)
    assert f"{base}/openapi.json" in loaded
    assert {urlsplit(url).path.rpartition("/")[0] for url in loaded} == {
        "/plantstore",
        "/plantstore/docs",
    }
    assert browser.find_element(By.CSS_SELECTOR, ".servers select").text == "/plantstore"

    assert create_from_the_page(browser, TOKEN, {"id": 1, "name": "fern"})[0] == "200"
    connection = http.client.HTTPConnection("127.0.0.1", behind_nginx.port, timeout=10)
    status, _, body = send(connection, "GET", "/plantstore/plants/1", headers=AUTH)
    assert (status, json.loads(body)) == (200, {"name": "fern"})
