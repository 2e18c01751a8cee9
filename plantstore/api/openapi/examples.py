"""The document's examples: the documented session (the README's, then docs/interface.md's),
each request in turn on an empty store, and the service's answer to it.
tests/api/test_openapi.py sends every request to the app and compares the answers.

They are one session, not an example beside each responder: each answer is true only after the
requests before it (fern's `ETag`, the 409 of ivy), so they are kept, and replayed, in order.
"""

from copy import deepcopy
from typing import NamedTuple

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
#: The event of fern's renaming, as `GET /events` gives it (its id as PostgreSQL numbers it).
FERN_RENAMED = {
    "id": "51380224",
    "type": "plantUpdated",
    "plant_id": 1,
    "plant": TREE_FERN,
    "at": EVENT_TIME,
}


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

#: Each schema's example, from the same session; the events' as docs/interface.md shows them.
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
    "Event": FERN_RENAMED,
    "EventPage": {"events": [FERN_RENAMED], "after": FERN_RENAMED["id"]},
}


def show_examples(document: dict) -> None:
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
