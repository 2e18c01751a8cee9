"""`/docs`: the API reference in a browser, Swagger UI rendering `/openapi.json`.

Swagger UI's own distribution files come from the `swagger-ui-py` package and are served by
the app, so the page needs no CDN and works offline. Every URL in the page is relative to
it, so behind a proxy that mounts the service under a path prefix the page still finds its
assets and the document, and "Try it out" calls the `servers` address the document names.
"""

from importlib.util import find_spec
from pathlib import Path

import falcon

from plantstore.api.routing import options_responder


def swagger_ui_assets() -> Path:
    """The directory of Swagger UI's files, as `swagger-ui-py` ships them.

    Found without importing the package: its integrations load jinja2 and more, which the
    service does not use, and every worker would pay for them at start.
    """
    (package,) = find_spec("swagger_ui").submodule_search_locations
    return Path(package) / "static"


#: The page: Swagger UI's bundle and style from `docs/`, the document from `openapi.json`,
#: both beside `/docs` wherever the service is mounted. No validator badge: Swagger UI would
#: fetch it from swagger.io.
PAGE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Plant Store API</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
<link rel="icon" type="image/png" href="docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({
  url: "openapi.json",
  dom_id: "#swagger-ui",
  validatorUrl: null,
});
</script>
</body>
</html>
"""


#: The files of Swagger UI's distribution that `PAGE` loads.
PAGE_FILES = frozenset({"swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png"})

#: What `OPTIONS` answers for a file of the page that exists, as the router answers elsewhere.
_answer_options = options_responder("GET, HEAD, OPTIONS")


class DocsPage:
    """`/docs`: the page that loads Swagger UI; readable without a token, like the document.

    "Try it out" sends the token the reader gives in Swagger UI's "Authorize" dialog, as the
    document's `bearerAuth` scheme asks.
    """

    auth_required = False

    def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_HTML
        resp.text = PAGE

    on_head = on_get


class DocsSlash:
    """`/docs/`, as people type it: a permanent redirect to the page, `/docs`.

    `Location` is relative, `../docs`: from `<prefix>/docs/` a client resolves it to
    `<prefix>/docs` whatever the prefix (`docs` alone would be `<prefix>/docs/docs`).
    """

    auth_required = False

    def on_get(self, req, resp):
        raise falcon.HTTPMovedPermanently("../docs")

    on_head = on_get


class DocsAssets:
    """`/docs/{name}`: Swagger UI's files, served by Falcon's own `StaticRoute`.

    The route is a resource rather than `app.add_static_route`, whose route serves the file to
    every method and leaves the file it opened for a HEAD unclosed (falcon#2337). Here HEAD goes
    with GET as everywhere else, other methods get Falcon's 405 with `Allow`, and a file that
    does not exist is Falcon's 404, in the `Error` body like every failure, to OPTIONS too.
    """

    auth_required = False

    def __init__(self, directory: Path) -> None:
        self._files = falcon.routing.StaticRoute("/docs", directory)

    def on_get(self, req, resp, name):
        _served(name)
        self._files(req, resp)

    def on_head(self, req, resp, name):
        """Answer GET's headers; close the file GET would have sent, as Falcon sends no body."""
        _served(name)
        self._files(req, resp)
        if resp.stream is not None:
            resp.stream.close()
            resp.stream = None

    def on_options(self, req, resp, name):
        """Answer as `plantstore.api.routing.Router` does on every path, for a file that exists."""
        _served(name)
        _answer_options(req, resp)


def _served(name: str) -> None:
    """Serve only the files the page loads: the package ships more (the editor's bundles, their
    source maps, megabytes each), which nobody needs from this service."""
    if name not in PAGE_FILES:
        raise falcon.HTTPNotFound()


def add_docs(app: falcon.App) -> None:
    """Serve the page at `/docs` and Swagger UI's files beside it, under `/docs/`."""
    app.add_route("/docs", DocsPage())
    app.add_route("/docs/", DocsSlash())
    app.add_route("/docs/{name}", DocsAssets(swagger_ui_assets()))
