import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from plantstore.schemas import (
    INT64_MAX,
    INT64_MIN,
    NewPlantSchema,
    PlantSchema,
    dump_plant,
    load_new_plant,
)

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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children),
    max_leaves=8,
)
new_plant_like = st.fixed_dictionaries(
    {},
    optional={
        "id": st.integers(min_value=INT64_MIN - 2, max_value=INT64_MAX + 2) | json_values,
        "name": st.text() | json_values,
        "tag": st.text() | json_values,
        "other": json_values,
    },
)


@settings(max_examples=500, derandomize=True)
@given(new_plant_like | json_values)
def test_the_shortcut_loads_exactly_what_the_schema_loads(body):
    try:
        expected = new_plant.load(body)
    except ValidationError as ex:
        with pytest.raises(ValidationError) as caught:
            load_new_plant(body)
        assert caught.value.messages == ex.messages
    else:
        loaded = load_new_plant(body)
        assert loaded == expected
        assert {key: type(value) for key, value in loaded.items()} == {
            key: type(value) for key, value in expected.items()
        }


valid_new_plants = st.fixed_dictionaries(
    {"id": st.integers(min_value=INT64_MIN, max_value=INT64_MAX), "name": st.text()},
    optional={"tag": st.text(), "other": json_values},
)


@settings(max_examples=200, derandomize=True)
@given(valid_new_plants)
def test_dump_plant_dumps_exactly_what_the_schema_dumps(body):
    loaded = new_plant.load(body)
    assert list(dump_plant(loaded).items()) == list(PlantSchema().dump(loaded).items())
