import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from plantstore.api.schemas import (
    INT64_MAX,
    INT64_MESSAGE,
    INT64_MIN,
    NewPlantSchema,
    PageQuerySchema,
    PlantIdSchema,
    PlantSchema,
    StoredPlantSchema,
)
from plantstore.core.plants import stored_plant

new_plant = NewPlantSchema()
plant = PlantSchema()
plant_id = PlantIdSchema()
page_query = PageQuerySchema()


@pytest.mark.parametrize(
    ("given", "loaded"),
    [
        (0, 0),
        (INT64_MIN, INT64_MIN),
        (INT64_MAX, INT64_MAX),
        (5.0, 5),
        (-5.0, -5),
        (1e3, 1000),
        (2.0**53 - 1, 2**53 - 1),
        (-(2.0**53) + 1, -(2**53) + 1),
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
        (INT64_MAX + 1, INT64_MESSAGE),
        (INT64_MIN - 1, INT64_MESSAGE),
        (2.0**53, "Not an exact integer"),
        (-(2.0**53), "Not an exact integer"),
        (2.0**53 + 2, "Not an exact integer"),
        (2.0**63 - 1024, "Not an exact integer"),
        (-(2.0**63), INT64_MESSAGE),
        (1e300, INT64_MESSAGE),
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
    assert plant.dump({"id": 1, "name": "fern"}) == {"name": "fern"}
    assert plant.dump({"id": 1, "name": "fern", "tag": "t"}) == {"name": "fern", "tag": "t"}


def test_plant_dump_writes_name_then_tag():
    """The order of the kept document, and so of every answer that holds a plant."""
    assert list(plant.dump({"tag": "t", "id": 1, "name": "fern"})) == ["name", "tag"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children),
    max_leaves=8,
)
valid_new_plants = st.fixed_dictionaries(
    {"id": st.integers(min_value=INT64_MIN, max_value=INT64_MAX), "name": st.text()},
    optional={"tag": st.text(), "other": json_values},
)


@settings(max_examples=200, derandomize=True)
@given(valid_new_plants)
def test_a_new_plant_of_an_int64_and_strings_loads_as_itself_without_other_fields(body):
    loaded = new_plant.load(body)
    assert loaded == {key: value for key, value in body.items() if key != "other"}
    assert type(loaded["id"]) is int


@pytest.mark.parametrize(
    ("text", "loaded"),
    [
        ("5", 5),
        ("-5", -5),
        ("0", 0),
        ("-0", 0),
        ("007", 7),
        ("5.0", 5),
        ("-5.000", -5),
        (str(INT64_MAX), INT64_MAX),
        (str(INT64_MIN), INT64_MIN),
        (f"{INT64_MAX}.0", INT64_MAX),
        ("9007199254740993.0", 2**53 + 1),
    ],
)
def test_a_plant_id_is_read_exactly_from_its_decimal_digits(text, loaded):
    assert plant_id.load({"id": text}) == {"id": loaded}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("abc", "Not a decimal integer."),
        ("1.5", "Not a decimal integer."),
        ("1.01", "Not a decimal integer."),
        ("1.", "Not a decimal integer."),
        ("1_000", "Not a decimal integer."),
        ("٣", "Not a decimal integer."),
        ("9223372036854775808", INT64_MESSAGE),
        ("-9223372036854775809", INT64_MESSAGE),
        ("9" * 5000, "Not a decimal integer."),
        ("", "Not a decimal integer."),
        ("-", "Not a decimal integer."),
        ("+5", "Not a decimal integer."),
        (" 5", "Not a decimal integer."),
        ("5 ", "Not a decimal integer."),
        ("1e3", "Not a decimal integer."),
        ("0x1f", "Not a decimal integer."),
    ],
)
def test_a_plant_id_is_a_decimal_int64(text, problem):
    with pytest.raises(ValidationError) as caught:
        plant_id.load({"id": text})
    assert list(caught.value.messages) == ["id"]
    assert problem in caught.value.messages["id"][0]


@pytest.mark.parametrize(
    ("params", "loaded"),
    [
        ({}, {"limit": 100}),
        ({"limit": "1", "after": "-5", "tag": ""}, {"limit": 1, "after": -5, "tag": ""}),
        ({"limit": "1000", "colour": "red"}, {"limit": 1000}),
        ({"after": str(INT64_MIN)}, {"limit": 100, "after": INT64_MIN}),
        ({"after": "9007199254740993.0", "limit": "7.00"}, {"limit": 7, "after": 2**53 + 1}),
    ],
)
def test_a_page_query_has_a_limit_and_maybe_after_and_tag(params, loaded):
    assert page_query.load(params) == loaded


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": ["1", "2"]}, "limit"),
        ({"after": str(INT64_MAX + 1)}, "after"),
        ({"after": "1.5"}, "after"),
        ({"tag": ["a", "b"]}, "tag"),
    ],
)
def test_a_bad_page_query_names_the_parameter(params, field):
    with pytest.raises(ValidationError) as caught:
        page_query.load(params)
    assert list(caught.value.messages) == [field]


@pytest.mark.parametrize("beyond", [INT64_MIN - 1, INT64_MAX + 1])
def test_the_int64_rule_has_one_wording_for_a_body_a_path_and_a_query(beyond):
    with pytest.raises(ValidationError) as body:
        new_plant.load(orjson.loads(b'{"id": %d, "name": "fern"}' % beyond))
    with pytest.raises(ValidationError) as path:
        plant_id.load({"id": str(beyond)})
    with pytest.raises(ValidationError) as query:
        page_query.load({"after": str(beyond)})
    assert body.value.messages == path.value.messages == {"id": [INT64_MESSAGE]}
    assert query.value.messages == {"after": [INT64_MESSAGE]}


@settings(max_examples=200, derandomize=True)
@given(valid_new_plants)
def test_a_listed_plant_is_exactly_the_stored_plant_schemas_dump(body):
    loaded = new_plant.load(body)
    kept = orjson.dumps(plant.dump(loaded))
    listed = stored_plant(loaded["id"], kept)
    assert listed == orjson.dumps(StoredPlantSchema().dump(loaded))
    assert list(orjson.loads(listed)) == ["id", *plant.dump(loaded)]
