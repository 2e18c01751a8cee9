"""The OpenAPI 3.1.0 document, generated from the marshmallow schemas so the two cannot drift."""

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from plantstore.schemas import ErrorSchema, JSONInteger, NewPlantSchema, PlantSchema

#: Each status `POST /plants` can answer besides 200, and when.
PLANT_ERRORS = {
    400: "The body is not valid JSON or not a valid NewPlant; the message names the field.",
    401: "No bearer token, or one that is not accepted.",
    409: "A plant with this id exists with other content; it is unchanged.",
    413: "The body is larger than the service accepts.",
    415: "The body is not JSON (Content-Type must be application/json).",
    500: "An unexpected failure; nothing internal is revealed.",
    503: "The store cannot serve right now; try again after `Retry-After` seconds.",
}

_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer"},
    }
}


def _error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": "Error"}}}


def _status(value: str) -> dict:
    """A body `{"status": value}`, as `/healthz` and `/readyz` answer."""
    return {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"status": {"type": "string", "const": value}},
                "required": ["status"],
            }
        }
    }


def build_document() -> dict:
    """Describe the service; `servers` is filled per request, from the address the client used."""
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
    spec.components.security_scheme("bearerAuth", {"type": "http", "scheme": "bearer"})
    spec.components.schema("Plant", schema=PlantSchema)
    spec.components.schema("NewPlant", schema=NewPlantSchema)
    spec.components.schema("Error", schema=ErrorSchema)

    unauthorized = _error(PLANT_ERRORS[401])
    unauthorized["headers"] = {
        "WWW-Authenticate": {
            "description": 'The challenge, e.g. `Bearer realm="plantstore"`.',
            "schema": {"type": "string"},
        }
    }
    spec.path(
        path="/plants",
        operations={
            "post": {
                "summary": "Create a plant",
                "description": "An identical repeat of a stored plant answers 200 again.",
                "operationId": "addPlant",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": "NewPlant"}},
                },
                "responses": {
                    200: {
                        "description": "The plant as stored.",
                        "content": {"application/json": {"schema": "Plant"}},
                    },
                    **{status: _error(text) for status, text in PLANT_ERRORS.items()},
                    401: unauthorized,
                    503: {**_error(PLANT_ERRORS[503]), "headers": _RETRY_AFTER},
                },
            }
        },
    )
    spec.path(
        path="/healthz",
        operations={
            "get": {
                "summary": "Tell whether the service is up",
                "operationId": "getHealth",
                "security": [],
                "responses": {200: {"description": "The service is up.", "content": _status("ok")}},
            }
        },
    )
    spec.path(
        path="/readyz",
        operations={
            "get": {
                "summary": "Tell whether the service can serve plants now",
                "operationId": "getReadiness",
                "security": [],
                "responses": {
                    200: {"description": "The store can serve.", "content": _status("ready")},
                    503: {
                        **_error("The store cannot serve right now."),
                        "headers": _RETRY_AFTER,
                    },
                },
            }
        },
    )
    spec.path(
        path="/openapi.json",
        operations={
            "get": {
                "summary": "This document",
                "operationId": "getOpenApi",
                "security": [],
                "responses": {
                    200: {
                        "description": "The OpenAPI document of the service.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    )
    return spec.to_dict()


class OpenApiDocument:
    """`/openapi.json`: the document, with `servers` naming the address the client reached.

    `req.prefix` is built from the scheme, Host and SCRIPT_NAME that gunicorn hands over, which
    honour a reverse proxy's X-Forwarded-Proto and SCRIPT_NAME only from `forwarded_allow_ips`.
    """

    auth_required = False

    def __init__(self) -> None:
        self._document = build_document()

    def on_get(self, req, resp):
        resp.media = {**self._document, "servers": [{"url": req.prefix}]}
