"""The served OpenAPI document is valid and says what the schemas say."""

import re
import time
from datetime import UTC
from urllib.parse import quote

import orjson
import pytest
from gunicorn.config import KNOWN_SETTINGS
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from plantstore.api.openapi.document import build_document
from plantstore.api.openapi.examples import EXAMPLES, FERN, SCHEMA_EXAMPLES, TREE_FERN
from plantstore.api.openapi.operation import PathItem
from plantstore.api.schemas import (
    MAX_PAGE_BYTES,
    ErrorSchema,
    NewPlantSchema,
    PageQuerySchema,
    PlantCreatedSchema,
    PlantDeletedSchema,
    PlantSchema,
)
from plantstore.core.events import Event, EventKind
from plantstore.testing.gunicorn_server import ROOT


@pytest.fixture
def document(anonymous):
    result = anonymous.simulate_get("/openapi.json")
    assert result.status_code == 200
    return result.json


def test_document_is_a_valid_openapi_3_1(document):
    validate(document)
    assert document["openapi"] == "3.1.0"


def test_info_names_the_service(document):
    info = document["info"]
    assert info["title"] == "Plant Store"
    assert info["version"] == "1.0.0"
    assert info["license"]["name"] == "MIT"
    assert "sample" in info["description"].lower()
    assert "demonstration" in info["description"].lower()


def test_bearer_auth_applies_globally_but_not_to_health_or_the_document(document):
    (scheme,) = document["components"]["securitySchemes"].values()
    assert {key: scheme[key] for key in ("type", "scheme")} == {"type": "http", "scheme": "bearer"}
    assert all(scope in scheme["description"] for scope in ("`read`", "`write`", "`metrics`"))
    assert document["security"] == [{"bearerAuth": []}]
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert document["paths"]["/openapi.json"]["get"]["security"] == []


@pytest.mark.parametrize(
    ("component", "schema"),
    [("Plant", PlantSchema), ("NewPlant", NewPlantSchema), ("Error", ErrorSchema)],
)
def test_components_match_the_schemas(document, component, schema):
    described = document["components"]["schemas"][component]
    fields = schema().fields
    assert set(described["properties"]) == set(fields)
    assert set(described["required"]) == {name for name, f in fields.items() if f.required}


def test_components_carry_the_contracts_types(document):
    schemas = document["components"]["schemas"]
    assert schemas["NewPlant"]["properties"]["id"] == {
        "type": "integer",
        "format": "int64",
        "minimum": -(2**63),
        "maximum": 2**63 - 1,
    }
    assert set(schemas["NewPlant"]["properties"]) == set(schemas["Plant"]["properties"]) | {"id"}
    assert schemas["Plant"]["properties"] == {"name": {"type": "string"}, "tag": {"type": "string"}}
    assert schemas["Error"]["properties"] == {
        "error": {"type": "integer", "format": "int32"},
        "message": {"type": "string"},
    }


def test_the_document_names_only_settings_there_are(document):
    """The service's own variables, and gunicorn's flags: 1.2's `GUNICORN_*` variables are
    gone from what it tells clients."""
    text = orjson.dumps(document).decode()
    flags = {flag for setting in KNOWN_SETTINGS for flag in setting.cli or ()}
    named_flags = set(re.findall(r"`(--[\w-]+)`", text))
    assert named_flags
    assert named_flags <= flags
    read = "".join(path.read_text() for path in (ROOT / "plantstore").rglob("*.py"))
    for variable in set(re.findall(r"\b[A-Z]+_[A-Z_]+\b", text)):
        assert f'"{variable}"' in read, variable
    assert "GUNICORN_" not in text


def statuses(document, path, method) -> set[int]:
    return {int(status) for status in document["paths"][path][method]["responses"]}


def response(document, answer: dict) -> dict:
    """A response, following its `$ref` into `components/responses`."""
    if "$ref" in answer:
        return document["components"]["responses"][answer["$ref"].rsplit("/", 1)[1]]
    return answer


@pytest.mark.parametrize(
    ("path", "method", "expected"),
    [
        ("/plants", "post", {200, 400, 401, 403, 409, 413, 415, 503}),
        ("/plants", "get", {200, 400, 401, 403, 503}),
        ("/plants", "head", {200, 400, 401, 403, 503}),
        ("/plants/{id}", "get", {200, 304, 400, 401, 403, 404, 412, 503}),
        ("/plants/{id}", "head", {200, 304, 400, 401, 403, 404, 412, 503}),
        ("/plants/{id}", "put", {200, 201, 400, 401, 403, 412, 413, 415, 503}),
        ("/plants/{id}", "delete", {204, 400, 401, 403, 404, 412, 503}),
        ("/readyz", "get", {200, 503}),
        ("/healthz", "head", {200}),
    ],
)
def test_each_operation_lists_every_status_it_gives(document, path, method, expected):
    """Besides what gunicorn may answer any request: 414, 431, and 500 for a bug."""
    assert statuses(document, path, method) == expected | {414, 431, 500}


def test_every_answer_is_described_with_its_body_and_headers(document):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, described in operation["responses"].items():
                answer = response(document, described)
                assert "X-Request-ID" in answer["headers"], (path, method, status)
                if status in ("200", "204"):
                    has_body = method != "head" and status == "200"
                    assert ("content" in answer) == has_body, (path, method, status)
                if status.startswith(("4", "5")) and "content" in answer:
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}
                if status == "401":
                    assert "WWW-Authenticate" in answer["headers"]
                if status == "503":
                    assert "Retry-After" in answer["headers"]


def test_the_bodies_are_the_schemas(document):
    plants, plant = document["paths"]["/plants"], document["paths"]["/plants/{id}"]
    body = plants["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/NewPlant"}
    assert plants["post"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Plant"
    }
    assert plant["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Plant"
    }
    assert plants["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "type": "array",
        "items": {"$ref": "#/components/schemas/StoredPlant"},
    }
    assert "Link" in plants["get"]["responses"]["200"]["headers"]


def test_every_operation_has_an_operation_id_of_its_own(document):
    ids = [
        operation["operationId"]
        for operations in document["paths"].values()
        for operation in operations.values()
    ]
    assert len(ids) == len(set(ids))
    assert {"addPlant", "listPlants", "getPlant", "deletePlant"} <= set(ids)


def test_a_created_plant_links_to_its_get_update_and_delete(document):
    links = document["paths"]["/plants"]["post"]["responses"]["200"]["links"]
    targets = {link["operationId"]: link["parameters"] for link in links.values()}
    assert targets == {
        "getPlant": {"id": "$request.body#/id"},
        "updatePlant": {"id": "$request.body#/id", "header.If-Match": "$response.header.ETag"},
        "deletePlant": {"id": "$request.body#/id"},
    }


def test_a_read_plant_links_to_its_update_with_the_etag_it_was_read_with(document):
    links = document["paths"]["/plants/{id}"]["get"]["responses"]["200"]["links"]
    assert {link["operationId"]: link["parameters"] for link in links.values()} == {
        "updatePlant": {"id": "$request.path.id", "header.If-Match": "$response.header.ETag"}
    }


@pytest.mark.parametrize("method", ["get", "head", "put", "delete"])
def test_a_plant_s_operations_take_its_conditions_and_answer_its_etag(document, method):
    operation = document["paths"]["/plants/{id}"][method]
    refs = [parameter["$ref"] for parameter in operation["parameters"] if "$ref" in parameter]
    conditions = [document["components"]["parameters"][ref.rsplit("/", 1)[1]] for ref in refs]
    assert [(c["in"], c["name"], c.get("required", False)) for c in conditions] == [
        ("header", "If-Match", False),
        ("header", "If-None-Match", False),
    ]
    for status, answer in operation["responses"].items():
        if status in ("200", "201", "304"):
            assert answer["headers"]["ETag"] == {"$ref": "#/components/headers/ETag"}
    if method == "put":
        assert "Location" in operation["responses"]["201"]["headers"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/Plant"}


def test_the_parameters_are_the_schemas(document):
    plant_id, *_ = document["paths"]["/plants/{id}"]["delete"]["parameters"]
    assert plant_id["in"] == "path"
    assert plant_id["name"] == "id"
    assert plant_id["schema"] == document["components"]["schemas"]["NewPlant"]["properties"]["id"]
    query = {p["name"]: p for p in document["paths"]["/plants"]["get"]["parameters"]}
    assert set(query) == set(PageQuerySchema().fields)
    assert query["limit"]["schema"] | {"format": None} == {
        "type": "integer",
        "format": None,
        "default": 100,
        "minimum": 1,
        "maximum": 1000,
    }
    assert query["tag"]["schema"] == {"type": "string"}
    assert not any(parameter["required"] for parameter in query.values())


def test_the_list_tells_that_a_page_holds_a_mebibyte_at_most(document):
    query = {p["name"]: p for p in document["paths"]["/plants"]["get"]["parameters"]}
    assert f"at most {MAX_PAGE_BYTES:,} bytes (1 MiB)" in query["limit"]["description"]
    assert "1 MiB" in document["components"]["headers"]["Link"]["description"]


#: Routes for people, not for clients: the docs page, its address with a slash, and its files
#: (see tests/api/test_docs_page.py).
UNDESCRIBED = {"/docs", "/docs/", "/docs/{id}"}


def test_every_route_of_the_app_is_described(app, document):
    routes = {
        re.sub(r"{\w+}", "{id}", node.uri_template)
        for node in app._router._roots
        for node in walk_routes(node)
        if node.resource is not None
    }
    assert routes == set(document["paths"]) | UNDESCRIBED


def test_every_get_goes_with_a_head_in_the_app_and_the_document(app, document):
    for root in app._router._roots:
        for node in walk_routes(root):
            if node.resource is not None:
                resource = node.resource
                assert hasattr(resource, "on_get") == hasattr(resource, "on_head"), resource
    for path, operations in document["paths"].items():
        assert ("get" in operations) == ("head" in operations), path


def test_a_responder_that_says_nothing_of_itself_is_refused():
    """The document would leave it out, and no test of the document's would see it."""

    class Undescribed:
        openapi = PathItem("/undescribed")

        def on_get(self, req, resp):
            resp.media = {}

    with pytest.raises(TypeError, match=r"Undescribed\.on_get has no Operation"):
        build_document([Undescribed()])


def walk_routes(node):
    yield node
    for child in node.children:
        yield from walk_routes(child)


def test_servers_is_a_path_that_no_host_header_can_change(anonymous):
    """A `Host` written to the document would reach every reader of a shared cache."""
    result = anonymous.simulate_get("/openapi.json", host="127.0.0.1:18000@evil.example")
    assert result.json["servers"] == [{"url": "/"}]
    assert "evil" not in result.text
    assert result.headers["cache-control"] == "public, max-age=300"


def test_servers_is_the_prefix_a_trusted_proxy_mounts_the_service_at(anonymous):
    document = anonymous.simulate_get(
        "/openapi.json",
        host="plants.example",
        extras={"SCRIPT_NAME": "/plant store", "wsgi.url_scheme": "https"},
    ).json
    assert document["servers"] == [{"url": "/plant%20store"}]


def test_readyz_is_described_without_security_and_with_its_503(document):
    operation = document["paths"]["/readyz"]["get"]
    assert operation["security"] == []
    assert "Retry-After" in response(document, operation["responses"]["503"])["headers"]


def test_the_events_are_declared_as_webhooks(document):
    webhooks = document["webhooks"]
    assert set(webhooks) == {"plantCreated", "plantUpdated", "plantDeleted"}
    for name in webhooks:
        schema = name[0].upper() + name[1:]
        post = webhooks[name]["post"]
        assert post["operationId"] == name
        assert post["requestBody"]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{schema}"
        }
        headers = [
            document["components"]["parameters"][ref["$ref"].rsplit("/", 1)[1]]
            for ref in post["parameters"]
        ]
        assert [(header["in"], header["name"], header["required"]) for header in headers] == [
            ("header", "webhook-id", True),
            ("header", "webhook-timestamp", True),
            ("header", "webhook-signature", True),
        ]
        assert "2XX" in post["responses"]
    schemas = document["components"]["schemas"]
    assert schemas["PlantCreated"]["properties"]["data"] == {
        "$ref": "#/components/schemas/NewPlant"
    }
    assert schemas["PlantUpdated"]["properties"]["data"] == {
        "$ref": "#/components/schemas/NewPlant"
    }
    assert schemas["PlantCreated"]["properties"]["type"]["enum"] == ["plant.created"]
    assert schemas["PlantUpdated"]["properties"]["type"]["enum"] == ["plant.updated"]
    assert schemas["PlantDeleted"]["properties"]["type"]["enum"] == ["plant.deleted"]
    assert schemas["DeletedPlant"]["properties"]["id"] == schemas["NewPlant"]["properties"]["id"]


def made_now(kind: EventKind, plant_id: int, plant: bytes | None = None) -> Event:
    return Event(1, kind, plant_id, plant, time.time())


@pytest.mark.parametrize(
    ("event", "schema", "data"),
    [
        (
            made_now(EventKind.CREATED, -7, b'{"name":"fern","tag":"green"}'),
            PlantCreatedSchema,
            {"id": -7, "name": "fern", "tag": "green"},
        ),
        (
            made_now(EventKind.CREATED, 2**63 - 1, b'{"name":"ivy"}'),
            PlantCreatedSchema,
            {"id": 2**63 - 1, "name": "ivy"},
        ),
        (made_now(EventKind.DELETED, -(2**63)), PlantDeletedSchema, {"id": -(2**63)}),
    ],
)
def test_the_events_sent_are_what_their_schemas_declare(event, schema, data):
    loaded = schema().load(orjson.loads(event.webhook_body()))
    assert loaded["data"] == data
    assert loaded["timestamp"].tzinfo == UTC
    assert abs(loaded["timestamp"].timestamp() - event.at) < 0.001
    assert orjson.loads(event.webhook_body())["timestamp"].endswith("Z")


def examples_in(node, pointer=""):
    """Every example in the document, with the JSON pointer of the schema it must fit: a
    schema's own `examples` (a list), and a media type's (Example Objects by name)."""
    if isinstance(node, dict):
        assert "example" not in node, f"{pointer}: `example`, where OpenAPI 3.1 has `examples`"
        examples = node.get("examples")
        if isinstance(examples, list):
            yield from ((example, pointer) for example in examples)
        elif isinstance(examples, dict):
            yield from ((shown["value"], f"{pointer}/schema") for shown in examples.values())
        for key, value in node.items():
            if key != "examples":
                escaped = key.replace("~", "~0").replace("/", "~1")
                yield from examples_in(value, f"{pointer}/{escaped}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from examples_in(value, f"{pointer}/{index}")


def misfits(document) -> list[str]:
    """The schemas, by JSON pointer, that one of their examples does not fit."""
    registry = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(document))
    return [
        pointer
        for example, pointer in examples_in(document)
        if not Draft202012Validator(
            {"$ref": f"urn:openapi#{quote(pointer, safe='/~')}"}, registry=registry
        ).is_valid(example)
    ]


def test_every_example_fits_its_schema(document):
    assert misfits(document) == []
    assert len(list(examples_in(document))) == len(SCHEMA_EXAMPLES) + len(EXAMPLES) + sum(
        example.body is not None and example.status != 400 for example in EXAMPLES
    )


def test_an_example_that_does_not_fit_is_found(document):
    """The check validates, through `$ref`s, rather than pass what it is given."""
    document["components"]["schemas"]["NewPlant"]["examples"] = [{"id": "one", "name": "fern"}]
    answer = document["paths"]["/plants/{id}"]["put"]["responses"]["412"]
    (shown, *_) = answer["content"]["application/json"]["examples"].values()
    shown["value"] = {"error": "412", "message": "Plant 1 is not as If-Match requires."}
    assert set(misfits(document)) == {
        "/components/schemas/NewPlant",
        "/paths/~1plants~1{id}/put/responses/412/content/application~1json/schema",
    }


def media_examples(document) -> dict[tuple[str, str, str], object]:
    """Every example of the operations, by operation, where (`request` or a status) and name."""
    found = {}
    for operations in document["paths"].values():
        for operation in operations.values():
            described = {"request": operation.get("requestBody", {})}
            described |= {
                status: response(document, r) for status, r in operation["responses"].items()
            }
            for where, part in described.items():
                for name, shown in (
                    part.get("content", {}).get("application/json", {}).get("examples", {}).items()
                ):
                    found[operation["operationId"], where, name] = shown["value"]
    return found


def test_the_plants_operations_show_the_readmes_session(document):
    shown = media_examples(document)
    assert {operation for operation, _, _ in shown} == {
        "addPlant",
        "listPlants",
        "getPlant",
        "updatePlant",
        "deletePlant",
    }
    assert shown["addPlant", "request", "ivy"] == {"id": 1, "name": "ivy"}
    assert (
        shown["addPlant", "409", "ivy"]["message"] == "Plant 1 already exists with other content."
    )
    assert {where for _, where, _ in shown} >= {"request", "200", "201", "400", "404", "409", "412"}
    assert set(document["components"]["schemas"]) == set(SCHEMA_EXAMPLES)
    for schema in document["components"]["schemas"].values():
        assert len(schema["examples"]) == 1


def test_every_example_answer_is_what_the_app_answers_its_request(client, document):
    """The examples are a session: sent in turn to a new app, each request gets exactly the
    answer the document shows for it, and the document shows no other."""
    operations = {
        operation["operationId"]: (method, path)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    expected = {}
    for example in EXAMPLES:
        method, template = operations[example.operation]
        assert re.fullmatch(re.sub(r"{\w+}", "[^/]+", template), example.path), example
        result = client.simulate_request(
            method.upper(), example.path, json=example.body, headers=example.headers
        )
        assert (result.status_code, result.json) == (example.status, example.answer), example
        expected[example.operation, str(example.status), example.name] = example.answer
        if example.body is not None and example.status != 400:
            expected[example.operation, "request", example.name] = example.body
    assert media_examples(document) == expected


@pytest.mark.parametrize(
    ("schema", "event"),
    [
        ("PlantCreated", made_now(EventKind.CREATED, 1, orjson.dumps(FERN))),
        ("PlantUpdated", made_now(EventKind.UPDATED, 1, orjson.dumps(TREE_FERN))),
        ("PlantDeleted", made_now(EventKind.DELETED, 2)),
    ],
)
def test_the_events_examples_are_what_the_service_sends(document, schema, event):
    """But for the time it was sent."""
    (example,) = document["components"]["schemas"][schema]["examples"]
    sent = orjson.loads(event.webhook_body())
    assert sent | {"timestamp": example["timestamp"]} == example
