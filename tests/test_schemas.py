import pytest
from marshmallow import ValidationError

from plantstore.schemas import INT64_MAX, INT64_MIN, NewPlantSchema, PlantSchema

new_plant = NewPlantSchema()


@pytest.mark.parametrize(
    ("given", "loaded"),
    [
        (0, 0),
        (INT64_MIN, INT64_MIN),
        (INT64_MAX, INT64_MAX),
        (5.0, 5),
        (-5.0, -5),
        (1e3, 1000),
        (2.0**53, 2**53),
    ],
)
def test_id_is_any_int64_including_integral_floats(given, loaded):
    plant = new_plant.load({"id": given, "name": "fern"})
    assert plant["id"] == loaded
    assert type(plant["id"]) is int


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (True, "Not a valid integer."),
        (False, "Not a valid integer."),
        ("5", "Not a valid integer."),
        (5.5, "Not a valid integer."),
        (None, "Field may not be null."),
        ([5], "Not a valid integer."),
        (INT64_MAX + 1, "less than or equal to 9223372036854775807"),
        (INT64_MIN - 1, "greater than or equal to -9223372036854775808"),
        (2.0**53 + 2, "Not an exact integer"),
        (2.0**63 - 1024, "Not an exact integer"),
        (-(2.0**63), "Must be an int64"),
        (1e300, "Must be an int64"),
    ],
)
def test_id_rejects_what_is_not_an_int64(given, problem):
    with pytest.raises(ValidationError) as caught:
        new_plant.load({"id": given, "name": "fern"})
    assert list(caught.value.messages) == ["id"]
    assert problem in caught.value.messages["id"][0]


@pytest.mark.parametrize("field", ["name", "tag"])
@pytest.mark.parametrize("given", [None, 5, True, ["fern"], {"a": "b"}])
def test_name_and_tag_must_be_strings(field, given):
    with pytest.raises(ValidationError) as caught:
        new_plant.load({"id": 1, "name": "fern", field: given})
    assert list(caught.value.messages) == [field]


def test_id_and_name_are_required_and_tag_is_not():
    with pytest.raises(ValidationError) as caught:
        new_plant.load({"tag": "tree"})
    assert set(caught.value.messages) == {"id", "name"}
    assert new_plant.load({"id": 1, "name": "fern"}) == {"id": 1, "name": "fern"}


def test_other_fields_are_ignored():
    assert new_plant.load({"id": 1, "name": "fern", "colour": "green"}) == {"id": 1, "name": "fern"}


@pytest.mark.parametrize("body", [[], "fern", 1, None])
def test_new_plant_must_be_an_object(body):
    with pytest.raises(ValidationError) as caught:
        new_plant.load(body)
    assert caught.value.messages == {"_schema": ["Must be a JSON object."]}


def test_plant_dump_drops_the_id_and_a_missing_tag():
    assert PlantSchema().dump({"id": 1, "name": "fern"}) == {"name": "fern"}
    assert PlantSchema().dump({"id": 1, "name": "fern", "tag": "t"}) == {"name": "fern", "tag": "t"}
