"""The document's head and its reusable parts: schemas, headers, conditions and failures.

A failure the app words in one place is described in those words, taken from there: the
document says what a client will read.
"""

from http import HTTPStatus

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from plantstore.api.conditions import ENTITY_TAGS_PATTERN, PRECONDITION_FAILED
from plantstore.api.errors import CURSOR_GONE, store_unavailable
from plantstore.api.media import ACCEPTED
from plantstore.api.openapi.examples import SCHEMA_EXAMPLES
from plantstore.api.openapi.operation import answer
from plantstore.api.openapi.webhooks import WEBHOOK_HEADERS
from plantstore.api.plants import CONFLICT, NOT_FOUND
from plantstore.api.schemas import (
    DecimalInteger,
    DeletedPlantSchema,
    ErrorSchema,
    EventPageSchema,
    EventSchema,
    JSONInteger,
    NewPlantSchema,
    PlantCreatedSchema,
    PlantDeletedSchema,
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
    "Event": EventSchema,
    "EventPage": EventPageSchema,
}

#: The plant's id in a failure's message, as the path of `/plants/{id}` names it.
_PLANT_ID = "{id}"

#: What each failing status means, whichever operation answers it.
ERRORS = {
    400: "The request is not valid; the message names each wrong field or parameter and why.",
    401: "No bearer token, or one that is not accepted.",
    403: "The bearer token is accepted, but not for this: it lacks the scope the operation "
    'needs, which `WWW-Authenticate` names (`error="insufficient_scope", scope="write"`).',
    404: NOT_FOUND.format(plant_id=_PLANT_ID),
    409: f"{CONFLICT.format(plant_id=_PLANT_ID)} It is unchanged.",
    410: CURSOR_GONE,
    412: f"{PRECONDITION_FAILED.format(plant_id=_PLANT_ID)} Another client changed it, deleted "
    "it, or made it first: read it again to see it as it is.",
    413: "The body is larger than the service accepts.",
    414: "The request line (path and query) is longer than the server accepts: nginx's "
    "`large_client_header_buffers` as deployed, else gunicorn's `--limit-request-line`.",
    415: ACCEPTED,
    431: "The header fields are more or longer than the server accepts: nginx's "
    "`large_client_header_buffers` as deployed, else gunicorn's `--limit-request-fields` and "
    "`--limit-request-field_size`.",
    500: "An unexpected failure; nothing internal is revealed.",
    503: f"{store_unavailable().description} `Retry-After` says when, in seconds.",
}

#: The headers a failure carries besides X-Request-ID.
_ERROR_HEADERS = {401: ("WWW-Authenticate",), 403: ("WWW-Authenticate",), 503: ("Retry-After",)}

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
        "description": "The next page, when this one is full (`limit` plants or events, or 1 MiB "
        'of plants): `</plants?after=…>; rel="next"` (RFC 8288), a path that keeps the other '
        "parameters.",
        **_STRING,
    },
    "Events-After": {
        "description": "The cursor to follow the changes from (`GET /events?after=…`), taken "
        "before the page was read: a change the page does not show comes after it.",
        "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"},
    },
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


def error_name(status: int) -> str:
    """The name of a failing status's answer under `components/responses`: `NotFound`."""
    return HTTPStatus(status).phrase.replace(" ", "")


def spec_with_components() -> APISpec:
    """The document's head and its reusable parts, for the operations to refer to."""
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
    spec.components.security_scheme(
        "bearerAuth",
        {
            "type": "http",
            "scheme": "bearer",
            "description": "A token the service accepts, with the scope each operation names: "
            "`read`, `write` or `metrics` (a token without it is answered 403).",
        },
    )
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
    for status, description in ERRORS.items():
        headers = _ERROR_HEADERS.get(status, ())
        spec.components.response(error_name(status), answer(description, "Error", *headers))
    return spec
