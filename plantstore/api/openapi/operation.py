"""How a resource describes itself to the OpenAPI document, beside the responders it describes.

A resource names the path the document gives it (`openapi = PathItem(...)`, a class attribute
like the `auth_required` that `BearerAuth` reads), and each responder says what it answers with
`@Operation`, as an endpoint declares its responses in flask-smorest or FastAPI. What follows
from the request an operation takes, or from where it is served, is not said again: the
document derives those failing statuses (`plantstore.api.openapi.paths`), in the words of the
code that answers them (`plantstore.api.openapi.components`).
"""

from typing import NamedTuple


class PathItem(NamedTuple):
    """Where the document describes a resource, and what all its operations share.

    Attributes:
        path: the path as the document writes it, each parameter named as its schema names it
            (`/plants/{id}`), where the route names it for the responders (`{plant_id}`).
        needs_store: every operation asks the store, so each answers 503 when it cannot serve.
    """

    path: str
    needs_store: bool = False


class Operation(NamedTuple):
    """What one responder answers, as the document tells clients; it decorates the responder.

    A `GET` responder that is also the resource's `on_head` describes the `HEAD` as well.

    Attributes:
        operation_id: its name, for generated clients and for the document's links.
        summary: what it does, in one line.
        answers: its answers but the failures, by status (see `answer`).
        description: what a client must know beyond the summary.
        body: the schema of the JSON body it takes, by its name under `components/schemas`.
        parameters: its path and query parameters, each as apispec reads them from a schema.
        conditional: it takes `If-Match` and `If-None-Match`.
        errors: the failing statuses it answers besides those the document derives: 400 for
            parameters, conditions or a body; 412 for conditions; 413 and 415 for a body; 401
            behind the token, and 403 with a scope; 503 where the store is asked; and what any
            request may get.
        scope: what a token must be allowed to do to call it (`read`, `write`, `metrics`), as
            `plantstore.api.auth.BearerAuth` asks it of the request's token.
    """

    operation_id: str
    summary: str
    answers: dict[int, dict]
    description: str | None = None
    body: str | None = None
    parameters: tuple[dict, ...] = ()
    conditional: bool = False
    errors: tuple[int, ...] = ()
    scope: str | None = None

    def __call__(self, responder):
        """Describe `responder`: the document finds this as its `openapi`."""
        responder.openapi = self
        return responder


def answer(
    description: str,
    schema: str | dict | None = None,
    *headers: str,
    links: dict[str, dict[str, str]] | None = None,
    media_type: str = "application/json",
) -> dict:
    """An answer of an operation, with X-Request-ID and `headers`, each under `components/headers`.

    Args:
        description: what the answer means.
        schema: its body's schema, by name under `components/schemas` or as a JSON Schema; None
            for an empty body.
        headers: the headers it carries besides X-Request-ID.
        links: the operations a client may go on to, by operationId, each with the parameters
            it takes from this request and answer.
        media_type: the type of its body.
    """
    described = {
        "description": description,
        "headers": {
            name: {"$ref": f"#/components/headers/{name}"} for name in ("X-Request-ID", *headers)
        },
    }
    if schema is not None:
        described["content"] = {media_type: {"schema": schema}}
    if links:
        described["links"] = {
            target: {"operationId": target, "parameters": parameters}
            for target, parameters in links.items()
        }
    return described
