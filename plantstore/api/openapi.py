"""The OpenAPI 3.1.0 document, generated from the marshmallow schemas so the two cannot drift."""

from copy import deepcopy
from http import HTTPStatus
from typing import NamedTuple
from urllib.parse import quote

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from plantstore.api.conditions import ENTITY_TAGS_PATTERN
from plantstore.api.schemas import (
    DecimalInteger,
    DeletedPlantSchema,
    ErrorSchema,
    JSONInteger,
    NewPlantSchema,
    PageQuerySchema,
    PlantCreatedSchema,
    PlantDeletedSchema,
    PlantIdSchema,
    PlantSchema,
    PlantUpdatedSchema,
    StoredPlantSchema,
)

#: The bodies, by the name the document gives each under `components/schemas`.
SCHEMAS = {
    "Plant": PlantSchema,
    "NewPlant": NewPlantSchema,
    "StoredPlant": StoredPlantSchema,
    "Error": ErrorSchema,
    "DeletedPlant": DeletedPlantSchema,
    "PlantCreated": PlantCreatedSchema,
    "PlantUpdated": PlantUpdatedSchema,
    "PlantDeleted": PlantDeletedSchema,
}

#: What each failing status means, whichever operation answers it.
ERRORS = {
    400: "The request is not valid; the message names each wrong field or parameter and why.",
    401: "No bearer token, or one that is not accepted.",
    404: "No plant has this id.",
    409: "A plant with this id exists with other content; it is unchanged.",
    412: "The plant is not as `If-Match` or `If-None-Match` requires: another client changed "
    "it, deleted it, or made it first. Nothing was changed; read it again to see it as it is.",
    413: "The body is larger than the service accepts.",
    414: "The request line (path and query) is longer than the server accepts: nginx's "
    "`large_client_header_buffers` as deployed, else gunicorn's `--limit-request-line`.",
    415: "The body is not JSON in UTF-8: Content-Type must be application/json (in any case), "
    "with no charset or charset=utf-8.",
    431: "The header fields are more or longer than the server accepts: nginx's "
    "`large_client_header_buffers` as deployed, else gunicorn's `--limit-request-fields` and "
    "`--limit-request-field_size`.",
    500: "An unexpected failure; nothing internal is revealed.",
    503: "The store cannot serve right now; try again after `Retry-After` seconds.",
}

_STRING = {"schema": {"type": "string"}}
#: Response headers, each described once under `components/headers`.
HEADERS = {
    "X-Request-ID": {
        "description": "The client's own X-Request-ID when it is 1 to 128 characters of "
        "`A-Za-z0-9._:@-`, else a fresh one; the access log names it.",
        **_STRING,
    },
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer"},
    },
    "WWW-Authenticate": {
        "description": 'The challenge, e.g. `Bearer realm="plantstore"`.',
        **_STRING,
    },
    "ETag": {
        "description": "The plant's strong validator, a quoted digest of it as stored: it "
        "changes whenever the plant does, and is the same from every server for the same "
        "plant. Send it back in `If-Match` to change the plant only as read, or in "
        "`If-None-Match` to read it only once it changed.",
        **_STRING,
    },
    "Location": {"description": "The path of the plant this request created.", **_STRING},
    "Link": {
        "description": "The next page, when this one is full (`limit` plants, or 1 MiB of "
        'them): `</plants?after=…>; rel="next"` (RFC 8288), a path that keeps the other '
        "parameters.",
        **_STRING,
    },
}


#: The Standard Webhooks headers every event is sent with, described once as parameters.
WEBHOOK_HEADERS = {
    "webhook-id": "The event's id, `msg_` and 32 hex digits: the same on every attempt and for "
    "every URL, so a subscriber can tell a repeat.",
    "webhook-timestamp": "The attempt's time, in seconds since the epoch; signed, so that a "
    "subscriber can refuse an old one replayed.",
    "webhook-signature": "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}."
    "{body}` under the secret (`PLANTSTORE_WEBHOOK_SECRET`), as Standard Webhooks signs it.",
}

#: The conditions a request may put on the plant it reads or changes (RFC 9110 §13.1), each
#: described once as a parameter.
CONDITIONS = {
    "If-Match": "Do it only if the plant's current `ETag` is one of these (`*`: only if the "
    "plant exists); else 412 and nothing changes. Weak tags (`W/`) never match.",
    "If-None-Match": "Do it only if the plant's current `ETag` is none of these (`*`: only if "
    "there is no plant, which makes a `PUT` create-only); else a read answers 304 and a change "
    "412.",
}

#: The events, by the name the document gives each under `webhooks`.
WEBHOOKS = {
    "plantCreated": (
        "PlantCreated",
        "A plant was kept",
        "Sent for each `POST /plants` that kept a new plant (not for an identical repeat, "
        "nor a 409), and each `PUT /plants/{id}` that made one; `data` is the `NewPlant`.",
    ),
    "plantUpdated": (
        "PlantUpdated",
        "A plant was replaced",
        "Sent for each `PUT /plants/{id}` that replaced a plant with another (not for one "
        "that stored the same plant again); `data` is the plant as it now is, with its id.",
    ),
    "plantDeleted": (
        "PlantDeleted",
        "A plant was deleted",
        "Sent for each `DELETE /plants/{id}` that deleted a plant; `data` holds its id.",
    ),
}


# The examples: the README's session, each request in turn on an empty store, and the service's
# answer to it. tests/test_openapi.py sends every request to the app and compares the answers.

FERN = {"name": "fern", "tag": "green"}
ROSE = {"name": "rose", "tag": "red"}
TREE_FERN = {"name": "tree fern", "tag": "green"}
#: fern's `ETag`, as `GET /plants/1` answers it before fern is renamed.
FERN_ETAG = '"ed56c992f4e2abb9e6660fe9c9a7c710"'
IVY_REFUSED = {"error": 409, "message": "Plant 1 already exists with other content."}
FERN_CHANGED = {
    "error": 412,
    "message": "Plant 1 is not as If-Match or If-None-Match requires; nothing was changed.",
}
EVENT_TIME = "2026-11-23T16:49:48.123Z"


class Example(NamedTuple):
    """A request of the session, by the operation it calls, and the service's answer to it.

    The document shows `body` among the operation's request examples, and `answer` among the
    status's, both under `name`: a reader pairs them by it. A body the service refuses as invalid
    (400) is no request the schema allows, so only its answer is shown. `headers` are sent and
    not shown: `summary` tells what they ask.
    """

    operation: str
    name: str
    summary: str
    path: str
    status: int
    answer: object
    body: object = None
    headers: dict[str, str] | None = None


EXAMPLES = (
    Example("addPlant", "fern", "Create fern, plant 1", "/plants", 200, FERN, {"id": 1, **FERN}),
    Example("addPlant", "rose", "Create rose, plant 2", "/plants", 200, ROSE, {"id": 2, **ROSE}),
    Example(
        "listPlants",
        "fernAndRose",
        "List the plants: fern and rose",
        "/plants",
        200,
        [{"id": 1, **FERN}, {"id": 2, **ROSE}],
    ),
    Example(
        "addPlant",
        "ivy",
        "Create ivy as plant 1, which fern is",
        "/plants",
        409,
        IVY_REFUSED,
        {"id": 1, "name": "ivy"},
    ),
    Example(
        "addPlant",
        "notAPlant",
        'Send `{"id": "one"}`, which is not a `NewPlant`',
        "/plants",
        400,
        {
            "error": 400,
            "message": "name: Missing data for required field.; id: Not a valid integer.",
        },
        {"id": "one"},
    ),
    Example("getPlant", "fern", "Read plant 1, fern", "/plants/1", 200, FERN),
    Example(
        "getPlant",
        "missing",
        "Read plant 3, which there is not",
        "/plants/3",
        404,
        {"error": 404, "message": "No plant has id 3."},
    ),
    Example(
        "updatePlant",
        "treeFern",
        "Rename fern as read: with `If-Match` and the `ETag` that its read answered",
        "/plants/1",
        200,
        TREE_FERN,
        TREE_FERN,
        {"If-Match": FERN_ETAG},
    ),
    Example(
        "updatePlant",
        "changedSinceRead",
        "Change fern as read before it was renamed: with `If-Match` and its old `ETag`",
        "/plants/1",
        412,
        FERN_CHANGED,
        {"name": "fern"},
        {"If-Match": FERN_ETAG},
    ),
    Example(
        "deletePlant",
        "changedSinceRead",
        "Delete fern as read before it was renamed: with `If-Match` and its old `ETag`",
        "/plants/1",
        412,
        FERN_CHANGED,
        headers={"If-Match": FERN_ETAG},
    ),
    Example(
        "updatePlant",
        "moss",
        "Create moss as plant 3, only if the id is free: with `If-None-Match: *`",
        "/plants/3",
        201,
        {"name": "moss"},
        {"name": "moss"},
        {"If-None-Match": "*"},
    ),
)

#: Each schema's example, from the same session; the events' as the README shows them.
SCHEMA_EXAMPLES = {
    "Plant": FERN,
    "NewPlant": {"id": 1, **FERN},
    "StoredPlant": {"id": 1, **FERN},
    "Error": IVY_REFUSED,
    "DeletedPlant": {"id": 2},
    "PlantCreated": {"type": "plant.created", "timestamp": EVENT_TIME, "data": {"id": 1, **FERN}},
    "PlantUpdated": {
        "type": "plant.updated",
        "timestamp": EVENT_TIME,
        "data": {"id": 1, **TREE_FERN},
    },
    "PlantDeleted": {"type": "plant.deleted", "timestamp": EVENT_TIME, "data": {"id": 2}},
}


def _header(name: str) -> dict:
    return {"$ref": f"#/components/headers/{name}"}


def _answer(description: str, schema=None, *headers: str) -> dict:
    """A response: its body's schema (none for an empty body) and headers besides X-Request-ID."""
    answer = {
        "description": description,
        "headers": {name: _header(name) for name in ("X-Request-ID", *headers)},
    }
    if schema is not None:
        answer["content"] = {"application/json": {"schema": schema}}
    return answer


def _error_name(status: int) -> str:
    """The name of a failing status's response under `components/responses`: `NotFound`."""
    return HTTPStatus(status).phrase.replace(" ", "")


def _error(status: int) -> dict:
    headers = {401: ("WWW-Authenticate",), 503: ("Retry-After",)}
    return _answer(ERRORS[status], "Error", *headers.get(status, ()))


#: What any request may get: nginx (or gunicorn, run alone) refuses a request line or headers
#: over its limits before the app sees them, and a bug is a bug.
_ANY = (414, 431, 500)


def _operation(
    operation_id: str, summary: str, success: dict, errors: tuple[int, ...], **more
) -> dict:
    """An operation behind the bearer token, which needs the store: also 401 and 503."""
    statuses = sorted({*errors, *_ANY, 401, 503})
    return {
        "summary": summary,
        "operationId": operation_id,
        # apispec expands parameters in place: each operation needs its own.
        **deepcopy(more),
        "responses": {**success, **{status: _error_name(status) for status in statuses}},
    }


def _public(operation_id: str, summary: str, responses: dict) -> dict:
    """An operation that needs no token."""
    return {
        "summary": summary,
        "operationId": operation_id,
        "security": [],
        "responses": {**responses, **{status: _error_name(status) for status in _ANY}},
    }


def _with_head(get: dict) -> dict:
    """A path's `get` and its `head`, which answers the same statuses and headers, no body."""
    head = {
        **deepcopy(get),
        "summary": f"{get['summary']}: the headers only",
        "operationId": f"{get['operationId']}Head",
        "responses": {
            status: {key: value for key, value in answer.items() if key != "content"}
            if isinstance(answer, dict)
            else answer
            for status, answer in get["responses"].items()
        },
    }
    return {"get": get, "head": head}


def _status(value: str) -> dict:
    """A body `{"status": value}`, as `/healthz` and `/readyz` answer."""
    return {
        "type": "object",
        "properties": {"status": {"type": "string", "const": value}},
        "required": ["status"],
    }


def build_document() -> dict:
    """Describe the service; `servers` is filled per request, from the address the client used."""
    spec = _spec_with_components()
    _describe_plants(spec)
    _describe_service(spec)
    # apispec writes no `webhooks` (OpenAPI 3.1): they go in beside its document.
    document = {**spec.to_dict(), "webhooks": _webhooks()}
    _show_examples(document)
    return document


def _show_examples(document: dict) -> None:
    """Show each of `EXAMPLES` in its operation: the request's body, and the answer.

    An answer whose status is described once under `components/responses` gets a copy of its
    own there, to hold the example.
    """
    operations = {
        operation["operationId"]: operation
        for path in document["paths"].values()
        for operation in path.values()
    }
    for example in EXAMPLES:
        operation = operations[example.operation]
        shown = {"summary": example.summary}
        if example.body is not None and example.status != 400:
            request = _json(operation["requestBody"]).setdefault("examples", {})
            request[example.name] = {**shown, "value": example.body}
        responses = operation["responses"]
        status = str(example.status)
        if "$ref" in responses[status]:
            name = responses[status]["$ref"].rsplit("/", 1)[1]
            responses[status] = deepcopy(document["components"]["responses"][name])
        answers = _json(responses[status]).setdefault("examples", {})
        answers[example.name] = {**shown, "value": example.answer}


def _json(described: dict) -> dict:
    """The `application/json` media type of a request body or a response."""
    return described["content"]["application/json"]


def _spec_with_components() -> APISpec:
    """The document's head and its reusable parts: schemas, headers and error answers."""
    marshmallow = MarshmallowPlugin()
    spec = APISpec(
        title="Plant Store",
        version="1.0.0",
        openapi_version="3.1.0",
        plugins=[marshmallow],
        info={
            "description": "A sample interface for demonstration: a store that keeps plants.",
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        security=[{"bearerAuth": []}],
    )
    marshmallow.map_to_openapi_type(JSONInteger, "integer", "int64")
    marshmallow.map_to_openapi_type(DecimalInteger, "integer", "int64")
    spec.components.security_scheme("bearerAuth", {"type": "http", "scheme": "bearer"})
    # apispec merges what `component` holds into what the plugin makes of the schema.
    for name, schema in SCHEMAS.items():
        spec.components.schema(name, {"examples": [SCHEMA_EXAMPLES[name]]}, schema=schema)
    for name, description in WEBHOOK_HEADERS.items():
        spec.components.parameter(
            name, "header", {"required": True, "description": description, **_STRING}
        )
    for name, description in CONDITIONS.items():
        schema = {"type": "string", "pattern": ENTITY_TAGS_PATTERN}
        spec.components.parameter(name, "header", {"description": description, "schema": schema})
    for name, header in HEADERS.items():
        spec.components.header(name, header)
    for status in ERRORS:
        spec.components.response(_error_name(status), _error(status))
    return spec


def _describe_plants(spec: APISpec) -> None:
    """`/plants` and `/plants/{id}`: the plant's whole life."""
    # Generated clients and stateful fuzzers follow these from a plant's create, or its read,
    # to its own path; a change carries the `ETag` it was read with.
    created, read = {"id": "$request.body#/id"}, {"id": "$request.path.id"}
    as_read = {"header.If-Match": "$response.header.ETag"}
    spec.path(
        path="/plants",
        operations={
            "post": _operation(
                "addPlant",
                "Create a plant",
                {
                    200: {
                        **_answer("The plant as stored.", "Plant", "ETag"),
                        "links": {
                            "getPlant": {"operationId": "getPlant", "parameters": created},
                            "updatePlant": {
                                "operationId": "updatePlant",
                                "parameters": {**created, **as_read},
                            },
                            "deletePlant": {"operationId": "deletePlant", "parameters": created},
                        },
                    }
                },
                (400, 409, 413, 415),
                description="An identical repeat of a stored plant answers 200 again.",
                requestBody={
                    "required": True,
                    "content": {"application/json": {"schema": "NewPlant"}},
                },
            ),
            **_with_head(
                _operation(
                    "listPlants",
                    "List plants a page at a time, in ascending id order",
                    {
                        200: _answer(
                            "A page of plants, each with its id.",
                            {"type": "array", "items": "StoredPlant"},
                            "Link",
                        )
                    },
                    (400,),
                    description="Follow the `Link` header's `next` until there is none to see "
                    "every plant once, even while others are created or deleted.",
                    parameters=[{"in": "query", "schema": PageQuerySchema}],
                )
            ),
        },
    )
    plant_id = [{"in": "path", "schema": PlantIdSchema}]
    conditional = [*plant_id, *CONDITIONS]
    spec.path(
        path="/plants/{id}",
        operations={
            **_with_head(
                _operation(
                    "getPlant",
                    "Read a plant",
                    {
                        200: {
                            **_answer("The plant, as it is stored.", "Plant", "ETag"),
                            "links": {
                                "updatePlant": {
                                    "operationId": "updatePlant",
                                    "parameters": {**read, **as_read},
                                }
                            },
                        },
                        304: _answer(
                            "The plant is as the client has it: its `ETag` is one that "
                            "`If-None-Match` names.",
                            None,
                            "ETag",
                        ),
                    },
                    (400, 404, 412),
                    parameters=conditional,
                )
            ),
            "put": _operation(
                "updatePlant",
                "Create or replace a plant",
                {
                    200: _answer(
                        "The plant replaced the one stored, or was the same.", "Plant", "ETag"
                    ),
                    201: _answer(
                        "The plant is stored under a free id.", "Plant", "ETag", "Location"
                    ),
                },
                (400, 412, 413, 415),
                description="The whole plant is stored: one without `tag` keeps none. A body "
                "may also hold `id`, which must then be the path's. `If-Match` with the `ETag` "
                "of a read changes the plant only if nobody changed it since; `If-None-Match: *` "
                "only creates.",
                requestBody={
                    "required": True,
                    "content": {"application/json": {"schema": "Plant"}},
                },
                parameters=conditional,
            ),
            "delete": _operation(
                "deletePlant",
                "Delete a plant; its id is free again",
                {204: _answer("The plant is deleted.")},
                (400, 404, 412),
                parameters=conditional,
            ),
        },
    )


def _describe_service(spec: APISpec) -> None:
    """The paths that serve operators and tools rather than plants; none needs a token."""
    spec.path(
        path="/healthz",
        operations=_with_head(
            _public(
                "getHealth",
                "Tell whether the service is up",
                {200: _answer("The service is up.", _status("ok"))},
            )
        ),
    )
    spec.path(
        path="/readyz",
        operations=_with_head(
            _public(
                "getReadiness",
                "Tell whether the service can serve plants now",
                {
                    200: _answer("The store can serve.", _status("ready")),
                    503: _answer(
                        "The store cannot serve right now.",
                        "Error",
                        "Retry-After",
                    ),
                },
            )
        ),
    )
    spec.path(
        path="/openapi.json",
        operations=_with_head(
            _public(
                "getOpenApi",
                "This document",
                {200: _answer("The OpenAPI document of the service.", {"type": "object"})},
            )
        ),
    )
    metrics = _answer("Every worker's metrics.")
    metrics["content"] = {"text/plain": {"schema": {"type": "string"}}}
    spec.path(
        path="/metrics",
        operations=_with_head(
            {
                "summary": "Metrics in Prometheus' text format",
                "operationId": "getMetrics",
                "description": "Needs no token when `PLANTSTORE_METRICS_PUBLIC=1`.",
                "responses": {
                    200: metrics,
                    **{status: _error_name(status) for status in sorted({401, *_ANY})},
                },
            }
        ),
    )


def _webhooks() -> dict:
    """The events the service sends to `PLANTSTORE_WEBHOOK_URLS`, signed, as `POST`s."""
    return {
        name: {
            "post": {
                "summary": summary,
                "operationId": name,
                "description": f"{description} Retried until a 2xx answer, or given up "
                "`PLANTSTORE_WEBHOOK_GIVE_UP_AFTER` seconds after the event.",
                "security": [],
                "parameters": [
                    {"$ref": f"#/components/parameters/{header}"} for header in WEBHOOK_HEADERS
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}
                    },
                },
                "responses": {
                    "2XX": {"description": "Acknowledged: the event is not sent again."},
                    "default": {
                        "description": "Not acknowledged: sent again later, with backoff. So "
                        "is an event not answered within `PLANTSTORE_WEBHOOK_TIMEOUT` seconds."
                    },
                },
            }
        }
        for name, (schema, summary, description) in WEBHOOKS.items()
    }


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

    def __init__(self) -> None:
        self._document = build_document()

    def on_get(self, req, resp):
        resp.media = {**self._document, "servers": [{"url": quote(req.root_path) or "/"}]}
        resp.cache_control = ["public", f"max-age={CACHE_SECONDS}"]

    on_head = on_get
