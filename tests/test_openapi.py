"""Rule 7: the served OpenAPI document is valid and says what the schemas say."""

import pytest
from openapi_spec_validator import validate

from plantstore.openapi import PLANT_ERRORS
from plantstore.schemas import ErrorSchema, NewPlantSchema, PlantSchema


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
    assert document["components"]["securitySchemes"] == {
        "bearerAuth": {"type": "http", "scheme": "bearer"}
    }
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


def test_post_plants_lists_every_status_it_gives(document):
    operation = document["paths"]["/plants"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/NewPlant"
    responses = operation["responses"]
    assert set(responses) == {"200"} | {str(status) for status in PLANT_ERRORS}
    assert {"400", "401", "409", "413", "415", "500"} <= set(responses)
    assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Plant")
    for status in PLANT_ERRORS:
        schema = responses[str(status)]["content"]["application/json"]["schema"]
        assert schema["$ref"] == "#/components/schemas/Error"
    assert "WWW-Authenticate" in responses["401"]["headers"]


def test_servers_name_the_address_the_client_reached(anonymous):
    document = anonymous.simulate_get("/openapi.json", host="plants.example").json
    assert document["servers"] == [{"url": "http://plants.example"}]


def test_servers_honour_the_proxys_scheme_host_and_prefix(anonymous):
    document = anonymous.simulate_get(
        "/openapi.json",
        host="plants.example",
        protocol="http",
        extras={"SCRIPT_NAME": "/api", "wsgi.url_scheme": "https"},
    ).json
    assert document["servers"] == [{"url": "https://plants.example/api"}]


def test_readyz_is_described_without_security_and_with_its_503(document):
    operation = document["paths"]["/readyz"]["get"]
    assert operation["security"] == []
    assert set(operation["responses"]) == {"200", "503"}
    assert "Retry-After" in operation["responses"]["503"]["headers"]
    assert "Retry-After" in document["paths"]["/plants"]["post"]["responses"]["503"]["headers"]
