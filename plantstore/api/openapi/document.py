"""`/openapi.json`: the document, made of the schemas and of what each resource says of itself."""

from collections.abc import Iterable
from urllib.parse import quote

from plantstore.api.openapi.components import spec_with_components
from plantstore.api.openapi.examples import show_examples
from plantstore.api.openapi.operation import Operation, PathItem, answer
from plantstore.api.openapi.paths import path_operations
from plantstore.api.openapi.webhooks import webhooks


def build_document(resources: Iterable[object]) -> dict:
    """Describe the service that serves `resources`, each at its `openapi` path.

    `servers` is left out: it is filled per request, from the address the client used.
    """
    spec = spec_with_components()
    for resource in resources:
        spec.path(path=resource.openapi.path, operations=path_operations(resource))
    # apispec writes no `webhooks` (OpenAPI 3.1): they go in beside its document.
    document = {**spec.to_dict(), "webhooks": webhooks()}
    show_examples(document)
    return document


#: How long a client or a shared cache may keep the document: it changes with the service's
#: version, and with nothing a request says.
CACHE_SECONDS = 300


class OpenApiDocument:
    """`/openapi.json`: the document, its `servers` the path the service is mounted at.

    The URL is relative: a client resolves it against the document's own address, so it names
    whatever host and scheme the client reached, without the document repeating a `Host` that a
    client wrote (`127.0.0.1@evil.example`) to every reader of a shared cache, whose "try it
    out" would then send their token there. The prefix is `SCRIPT_NAME`, which gunicorn takes
    only from a trusted proxy (`forwarded_allow_ips`).
    """

    auth_required = False
    openapi = PathItem("/openapi.json")

    def __init__(self, resources: Iterable[object]) -> None:
        """Describe `resources`, the app's other resources, and this one."""
        self._document = build_document([*resources, self])

    @Operation(
        "getOpenApi",
        "This document",
        {200: answer("The OpenAPI document of the service.", {"type": "object"})},
    )
    def on_get(self, req, resp):
        resp.media = {**self._document, "servers": [{"url": quote(req.root_path) or "/"}]}
        resp.cache_control = ["public", f"max-age={CACHE_SECONDS}"]

    on_head = on_get
