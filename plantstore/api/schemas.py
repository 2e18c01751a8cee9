"""The contract's bodies; the single source of truth for validation and the OpenAPI document.

marshmallow loads every input and dumps every `Plant`, through the schemas here: they decide
what is accepted and word every error. `JSONInteger` and `DecimalInteger` are custom fields,
marshmallow's way to teach it a type its own fields do not read as the contract does.
"""

import re

from marshmallow import EXCLUDE, Schema, fields, validate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The one wording of the int64 rule, wherever an id is checked: a body, a path, a query.
INT64_MESSAGE = f"Must be an int64, from {INT64_MIN} to {INT64_MAX}."
INT64 = validate.Range(min=INT64_MIN, max=INT64_MAX, error=INT64_MESSAGE)

#: Page sizes of `GET /plants`.
DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT = 100, 1000
#: The most bytes of `StoredPlant` documents on a page, whatever its `limit`: a page of large
#: plants is otherwise `limit` times as large as one, in the answer and in a worker's memory.
MAX_PAGE_BYTES = 1024 * 1024

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

    def _deserialize(self, value, attr, data, **kwargs):
        if type(value) is float and value.is_integer():
            if abs(value) >= 2**63:
                raise self.make_error("out_of_range")
            if abs(value) >= INEXACT_FLOAT_MAGNITUDE:
                raise self.make_error("inexact")
            value = int(value)
        return super()._deserialize(value, attr, data, **kwargs)


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


class PlantReplacementSchema(PlantSchema):
    """The body of `PUT /plants/{id}`: a `Plant`, which may hold the `id`, as a `NewPlant` or a
    `StoredPlant` does, so long as it is the path's."""

    id = JSONInteger(validate=INT64)


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

    def _deserialize(self, value, attr, data, **kwargs):
        decimal = _DECIMAL.fullmatch(value) if type(value) is str else None
        if decimal is None:
            raise self.make_error("invalid")
        return super()._deserialize(decimal[1], attr, data, **kwargs)


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
        metadata={
            "description": "The most plants on the page. A page also holds at most "
            f"{MAX_PAGE_BYTES:,} bytes (1 MiB) of `StoredPlant`s, but one plant always, "
            "however large: a page of large plants holds fewer, and links to the next page "
            "all the same."
        },
    )
    after = DecimalInteger(
        validate=INT64,
        metadata={"description": "Only plants with a greater id: the last id of the page before."},
    )
    tag = fields.String(metadata={"description": "Only plants with exactly this tag."})


#: The longest `GET /events` may wait for an event, in seconds.
MAX_FEED_WAIT = 30
#: The one wording of a cursor's rule.
CURSOR = validate.Range(
    min=0, max=INT64_MAX, error="Must be a cursor: an event's id, or the after of an answer."
)


class EventQuerySchema(Schema):
    """The query of `GET /events`: from where to follow the feed, how many, how long to wait."""

    class Meta:
        unknown = EXCLUDE

    after = DecimalInteger(
        validate=CURSOR,
        metadata={
            "description": "Only events after this cursor: the `id` of the last event handled, "
            "the `after` of the last answer, or the `Events-After` of a list of the plants. "
            "Without it, from the oldest event kept."
        },
    )
    limit = DecimalInteger(
        load_default=DEFAULT_PAGE_LIMIT,
        validate=validate.Range(min=1, max=MAX_PAGE_LIMIT),
        metadata={"description": "The most events on the page."},
    )
    wait = DecimalInteger(
        load_default=0,
        validate=validate.Range(min=0, max=MAX_FEED_WAIT),
        metadata={
            "description": "Seconds to wait for an event when there is none after the cursor: "
            "the answer comes as soon as one is committed, or empty once the time is up."
        },
    )


class EventSchema(Schema):
    """`Event`: a change to a plant, as the feed keeps it; its webhook has its `id` as
    `webhook-id`."""

    id = fields.String(
        required=True,
        metadata={
            "pattern": "^[0-9]{1,19}$",
            "description": "Names the event, and is a cursor: `after` it come the changes "
            "committed after it.",
        },
    )
    type = fields.String(
        required=True, validate=validate.OneOf(["plantCreated", "plantUpdated", "plantDeleted"])
    )
    plant_id = JSONInteger(required=True, validate=INT64)
    plant = fields.Nested(
        PlantSchema,
        required=True,
        allow_none=True,
        metadata={"description": "The plant as the change stored it; null for a delete."},
    )
    at = fields.DateTime(
        required=True, metadata={"description": "When the change was made, in UTC (with Z)."}
    )


class EventPageSchema(Schema):
    """`EventPage`: a page of the feed, and the cursor to go on from."""

    events = fields.List(fields.Nested(EventSchema), required=True)
    after = fields.String(
        required=True,
        metadata={
            "pattern": "^[0-9]{1,19}$",
            "description": "The cursor to ask with next, also when the page is empty.",
        },
    )


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


class PlantUpdatedSchema(_EventSchema):
    """`PlantUpdated`: the body of the `plant.updated` event, sent when a plant is replaced."""

    type = fields.String(required=True, validate=validate.OneOf(["plant.updated"]))
    data = fields.Nested(NewPlantSchema, required=True)


class PlantDeletedSchema(_EventSchema):
    """`PlantDeleted`: the body of the `plant.deleted` event, sent when a plant is deleted."""

    type = fields.String(required=True, validate=validate.OneOf(["plant.deleted"]))
    data = fields.Nested(DeletedPlantSchema, required=True)


class ErrorSchema(Schema):
    """`Error`: the body of every answer that is not a success."""

    error = fields.Integer(required=True, metadata={"format": "int32"})
    message = fields.String(required=True)
