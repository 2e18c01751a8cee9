"""`/docs`: Swagger UI's page and its files, served by the app to anyone, under any prefix."""

import gc
import re
import warnings
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from plantstore.api.docs import PAGE, PAGE_FILES, swagger_ui_assets
from tests.api.test_read_list_delete import assert_head_answers_as_get


class References(HTMLParser):
    """Every `src` and `href` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href")]


def page_urls(page: str) -> list[str]:
    """What the page loads: its scripts, style and icon, and the document Swagger UI reads."""
    references = References()
    references.feed(page)
    (document,) = re.findall(r'\burl: "([^"]*)"', page)
    return [*references.urls, document]


def test_the_page_is_html_and_needs_no_token(anonymous):
    result = anonymous.simulate_get("/docs")
    assert result.status_code == 200
    assert result.headers["content-type"] == "text/html; charset=utf-8"
    assert result.text == PAGE
    assert '<div id="swagger-ui">' in result.text
    assert "SwaggerUIBundle(" in result.text


def test_the_page_asks_nothing_of_another_site(anonymous):
    """Every URL is relative to the page (no scheme, host or root), and no validator badge."""
    urls = page_urls(anonymous.simulate_get("/docs").text)
    assert len(urls) == 4
    for url in urls:
        parts = urlsplit(url)
        assert not (parts.scheme or parts.netloc or url.startswith("/")), url
    assert re.search(r"\bvalidatorUrl: null\b", PAGE)


@pytest.mark.parametrize("prefix", ["", "/plantstore", "/a/b"])
def test_every_url_of_the_page_is_served_beside_it_under_a_prefix(anonymous, prefix):
    """As a browser resolves them from `<prefix>/docs`, each reaches the app, with no token."""
    page = anonymous.simulate_get("/docs", extras={"SCRIPT_NAME": prefix})
    assert page.status_code == 200
    resolved = [urljoin(f"http://plants.example{prefix}/docs", url) for url in page_urls(page.text)]
    assert resolved[-1] == f"http://plants.example{prefix}/openapi.json"
    for url in resolved:
        path = urlsplit(url).path
        assert path.startswith(f"{prefix}/"), url
        result = anonymous.simulate_get(path.removeprefix(prefix), extras={"SCRIPT_NAME": prefix})
        assert result.status_code == 200, url
        assert result.content
    document = anonymous.simulate_get("/openapi.json", extras={"SCRIPT_NAME": prefix}).json
    assert document["openapi"] == "3.1.0"


@pytest.mark.parametrize("prefix", ["", "/plantstore", "/a/b"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_page_with_a_slash_redirects_to_the_page_under_any_prefix(anonymous, prefix, method):
    """`/docs/`, as people type it, is the page's address for good, wherever it is mounted."""
    result = anonymous.simulate_request(method, "/docs/", extras={"SCRIPT_NAME": prefix})
    assert result.status_code == 301
    target = urljoin(f"http://plants.example{prefix}/docs/", result.headers["location"])
    assert target == f"http://plants.example{prefix}/docs"
    page = anonymous.simulate_get(
        urlsplit(target).path.removeprefix(prefix), extras={"SCRIPT_NAME": prefix}
    )
    assert page.text == PAGE


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("swagger-ui-bundle.js", "text/javascript"),
        ("swagger-ui.css", "text/css"),
        ("favicon-32x32.png", "image/png"),
    ],
)
def test_the_assets_are_served_with_their_types(anonymous, name, content_type):
    result = anonymous.simulate_get(f"/docs/{name}")
    assert result.status_code == 200
    assert result.headers["content-type"] == content_type
    assert int(result.headers["content-length"]) == len(result.content) > 0
    assert "etag" in result.headers


def test_only_the_files_the_page_loads_are_served(anonymous):
    """Swagger UI's package ships more: the editor's bundles and source maps, megabytes each."""
    loaded = re.findall(r'(?:href|src)="docs/([^"]+)"', PAGE)
    assert sorted(loaded) == sorted(PAGE_FILES)
    for name in ("swagger-editor-es-bundle.js.map", "swagger-ui.js", "favicon-16x16.png"):
        assert (swagger_ui_assets() / name).is_file()
        for method in ("GET", "HEAD", "OPTIONS"):
            assert anonymous.simulate_request(method, f"/docs/{name}").status_code == 404


@pytest.mark.parametrize("path", ["/docs", "/docs/", "/docs/swagger-ui.css", "/docs/nothing.js"])
def test_head_answers_what_get_would_without_the_body(anonymous, path):
    assert_head_answers_as_get(anonymous, path)


def test_head_of_an_asset_leaves_no_file_open(anonymous):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert anonymous.simulate_head("/docs/swagger-ui-bundle.js").status_code == 200
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize(
    "path", ["/docs/nothing.js", "/docs/..%2Fsetup.cfg", "/docs/index.j2.missing"]
)
def test_a_file_that_is_not_there_is_404_with_the_error_body(anonymous, path):
    result = anonymous.simulate_get(path)
    assert result.status_code == 404
    assert result.headers["content-type"] == "application/json"
    assert result.json["error"] == 404
    assert result.json["message"]


@pytest.mark.parametrize(
    "path", ["/docs/nothing.js", "/docs/..%2Fsetup.cfg", "/docs/index.j2.missing"]
)
def test_options_on_a_file_that_is_not_there_is_404_as_get_is(anonymous, path):
    result = anonymous.simulate_options(path)
    assert result.status_code == 404
    assert result.json["error"] == 404


@pytest.mark.parametrize("path", ["/docs", "/docs/", "/docs/swagger-ui.css"])
def test_options_on_a_file_that_is_there_lists_its_methods(anonymous, path):
    result = anonymous.simulate_options(path)
    assert (result.status_code, result.text) == (204, "")
    assert result.headers["allow"] == "GET, HEAD, OPTIONS"


@pytest.mark.parametrize("path", ["/docs", "/docs/", "/docs/swagger-ui.css"])
def test_other_methods_are_405_naming_get_and_head(client, path):
    result = client.simulate_post(path, json={"id": 1, "name": "fern"})
    assert result.status_code == 405
    assert result.headers["allow"] == "GET, HEAD, OPTIONS"
    assert result.json["error"] == 405


def test_the_document_leaves_the_page_out(anonymous):
    """The page is for people: a client generated from the document has no use for it."""
    paths = anonymous.simulate_get("/openapi.json").json["paths"]
    assert not [path for path in paths if path.startswith("/docs")]
