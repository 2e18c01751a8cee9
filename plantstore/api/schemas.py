"""The contract's bodies; the single source of truth for validation and the OpenAPI document.

marshmallow decides every input that is not plainly valid, and words every error. The plain
valid cases take measured shortcuts past its field machinery, which costs more than the rest
of a request: loading a `NewPlant` (`load_new_plant`) or an `{id}` of digits (`load_plant_id`),
dumping a `Plant` (`dump_plant`) and writing a `StoredPlant` (`stored_plant`).
tests/test_schemas.py holds each shortcut to what its schema gives.
"""

import re

from marshmallow import EXCLUDE, Schema, fields, missing, validate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The one wording of the int64 rule, wherever an id is checked: a body, a path, a query.
INT64_MESSAGE = f"Must be an int64, from {INT64_MIN} to {INT64_MAX}."
INT64 = validate.Range(min=INT64_MIN, max=INT64_MAX, error=INT64_MESSAGE)

#: Page sizes of `GET /plants`.
DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT = 100, 1000

#: From this magnitude on, a float no longer tells which integer was written:
#: `9007199254740993.0` parses as 9007199254740992.0, the very float `9007199254740992.0` gives.
INEXACT_FLOAT_MAGNITUDE = 2**53


class JSONInteger(fields.Integer):
    """An integer as JSON Schema counts one: `5` and `5.0` are the integer 5.

    `true`, `"5"`, `5.5` and `null` are not integers. orjson's parse decides what arrives: an int
    for every integer literal from -2**63 to 2**64 - 1, a float for any other number (one written
    with a fraction part or an exponent, or an integer literal beyond those bounds). An integral
    float is accepted only below 2**53 in magnitude, where it names one integer. From 2**63 on it
    may be an integer literal beyond int64, so it is refused in the int64 rule's words.
    """

    default_error_messages = {
        "out_of_range": INT64_MESSAGE,
        "inexact": "Not an exact integer: from ±2**53 on, write it without a fraction part or "
        "exponent.",
    }

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)

    def _validated(self, value):
        if type(value) is float and value.is_integer():
            if abs(value) >= 2**63:
                raise self.make_error("out_of_range")
            if abs(value) >= INEXACT_FLOAT_MAGNITUDE:
                raise self.make_error("inexact")
            value = int(value)
        return super()._validated(value)


class PlantSchema(Schema):
    """`Plant`: what the service answers for a plant."""

    class Meta:
        unknown = EXCLUDE

    error_messages = {"type": "Must be a JSON object."}

    name = fields.String(required=True)
    tag = fields.String()


class NewPlantSchema(PlantSchema):
    """`NewPlant`: a `Plant` with the `id` a client chose for it; other fields are ignored."""

    id = JSONInteger(required=True, validate=INT64)


class StoredPlantSchema(NewPlantSchema):
    """`StoredPlant`: a `Plant` with the id it is kept under, as `GET /plants` lists it."""

    class Meta(NewPlantSchema.Meta):
        fields = ("id", "name", "tag")


_DECIMAL = re.compile(r"(-?[0-9]+)(?:\.0+)?")


class DecimalInteger(fields.Integer):
    """An integer written in decimal digits, as a path segment or a query parameter holds one.

    `5` and, as JSON Schema counts integers, `5.0`: a client that got an id as a JSON number
    may write it back either way. Nothing else: `int()` would also take `1_000`, ` 5` and
    other scripts' digits. The text is exact, so no digit is lost to a float.
    """

    default_error_messages = {"invalid": "Not a decimal integer."}

    def _validated(self, value):
        decimal = _DECIMAL.fullmatch(value) if type(value) is str else None
        if decimal is None:
            raise self.make_error("invalid")
        return super()._validated(decimal[1])


class PlantIdSchema(Schema):
    """The `{id}` of `/plants/{id}`."""

    id = DecimalInteger(required=True, validate=INT64)


class PageQuerySchema(Schema):
    """The query of `GET /plants`: which page of the plants, in ascending id order."""

    class Meta:
        unknown = EXCLUDE

    limit = DecimalInteger(
        load_default=DEFAULT_PAGE_LIMIT,
        validate=validate.Range(min=1, max=MAX_PAGE_LIMIT),
        metadata={"description": "The most plants on the page."},
    )
    after = DecimalInteger(
        validate=INT64,
        metadata={"description": "Only plants with a greater id: the last id of the page before."},
    )
    tag = fields.String(metadata={"description": "Only plants with exactly this tag."})


class DeletedPlantSchema(Schema):
    """The data of a `plant.deleted` event: the id the plant had."""

    class Meta:
        unknown = EXCLUDE

    id = JSONInteger(required=True, validate=INT64)


class _EventSchema(Schema):
    """What every webhook event holds: its type, when it happened, and its data.

    A subscriber should ignore fields it does not know: events may gain some.
    """

    class Meta:
        unknown = EXCLUDE

    timestamp = fields.DateTime(
        required=True,
        metadata={"description": "When the change was made, in UTC (ISO 8601, with Z)."},
    )


class PlantCreatedSchema(_EventSchema):
    """`PlantCreated`: the body of the `plant.created` event, sent when a plant is kept."""

    type = fields.String(required=True, validate=validate.OneOf(["plant.created"]))
    data = fields.Nested(NewPlantSchema, required=True)


class PlantDeletedSchema(_EventSchema):
    """`PlantDeleted`: the body of the `plant.deleted` event, sent when a plant is deleted."""

    type = fields.String(required=True, validate=validate.OneOf(["plant.deleted"]))
    data = fields.Nested(DeletedPlantSchema, required=True)


class ErrorSchema(Schema):
    """`Error`: the body of every answer that is not a success."""

    error = fields.Integer(required=True, metadata={"format": "int32"})
    message = fields.String(required=True)


_NEW_PLANT = NewPlantSchema()
_PLANT_FIELDS = tuple(PlantSchema().fields)
_PLANT_ID = PlantIdSchema()
_PAGE_QUERY = PageQuerySchema()
#: Decimal ids of up to 18 digits, which are all int64s: the schema's answer, without its cost.
_PLAIN_ID = re.compile(r"-?[0-9]{1,18}")


def load_new_plant(data: object) -> dict:
    """Give what `NewPlantSchema().load(data)` gives, taking a shortcut where that is plain.

    marshmallow's field machinery costs more than all the rest of a request (about 85k of 190k
    instructions). A body whose fields already hold what loading them gives (an int64 `id`,
    string `name` and `tag`) needs none of it; anything else goes through the schema, which alone
    decides and words the errors. tests/test_schemas.py checks that both ways agree.
    """
    if type(data) is dict:
        plant_id, name, tag = data.get("id"), data.get("name"), data.get("tag", missing)
        if (
            type(plant_id) is int
            and INT64_MIN <= plant_id <= INT64_MAX
            and type(name) is str
            and (tag is missing or type(tag) is str)
        ):
            new_plant = {"id": plant_id, "name": name}
            if tag is not missing:
                new_plant["tag"] = tag
            return new_plant
    return _NEW_PLANT.load(data)


def dump_plant(new_plant: dict) -> dict:
    """Give what `PlantSchema().dump(new_plant)` gives: the loaded plant without its `id`.

    Plant's fields are strings, which dump as themselves, so taking them over is the whole dump,
    at a tenth of the cost of marshmallow's machinery. tests/test_schemas.py checks both agree.
    """
    return {name: new_plant[name] for name in _PLANT_FIELDS if name in new_plant}


def load_plant_id(text: str) -> int:
    """Give what `PlantIdSchema().load({"id": text})["id"]` gives, quickly for a plain id.

    tests/test_schemas.py checks that both ways agree.
    """
    if _PLAIN_ID.fullmatch(text):
        return int(text)
    return _PLANT_ID.load({"id": text})["id"]


def load_page_query(params: dict) -> dict:
    """Read the query of `GET /plants`: `limit` always, `after` and `tag` when given."""
    return _PAGE_QUERY.load(params)
