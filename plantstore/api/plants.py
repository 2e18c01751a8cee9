"""`/plants` and `/plants/{id}`: they know the contract, not how plants are stored."""

import falcon
import orjson
from marshmallow import ValidationError

from plantstore.api.conditions import Conditions, etag_of, precondition_failed
from plantstore.api.media import require_json
from plantstore.api.openapi.operation import Operation, PathItem, answer
from plantstore.api.routing import mounted, next_page
from plantstore.api.schemas import (
    MAX_PAGE_BYTES,
    NewPlantSchema,
    PageQuerySchema,
    PlantIdSchema,
    PlantReplacementSchema,
    PlantSchema,
)
from plantstore.core.plants import ConditionFailed, Put, same_plant, stored_plant
from plantstore.core.stores import PlantStore

# Built once: a schema holds no state of one load or dump, so every thread can share it.
_NEW_PLANT = NewPlantSchema()
_PLANT = PlantSchema()
_PLANT_ID = PlantIdSchema()
_REPLACEMENT = PlantReplacementSchema()
_PAGE_QUERY = PageQuerySchema()

#: What a 404 tells its client, of the plant its request names.
NOT_FOUND = "No plant has id {plant_id}."
#: What a 409 tells its client, of the plant its request names.
CONFLICT = "Plant {plant_id} already exists with other content."

# The links of the document: generated clients and stateful fuzzers follow them from a plant's
# create, or its read, to its own path; a change carries the `ETag` it was read with.
_CREATED = {"id": "$request.body#/id"}
_READ = {"id": "$request.path.id"}
_AS_READ = {"header.If-Match": "$response.header.ETag"}
#: The path's `{id}`, as the document takes it from its schema.
_ID_PARAMETER = ({"in": "path", "schema": PlantIdSchema},)


class Plants:
    """`/plants`: create a plant under the id its client chose, and list them page by page."""

    openapi = PathItem("/plants", needs_store=True)

    def __init__(self, store: PlantStore) -> None:
        self._store = store

    @Operation(
        "addPlant",
        "Create a plant",
        {
            200: answer(
                "The plant as stored.",
                "Plant",
                "ETag",
                links={
                    "getPlant": _CREATED,
                    "updatePlant": {**_CREATED, **_AS_READ},
                    "deletePlant": _CREATED,
                },
            )
        },
        description="An identical repeat of a stored plant answers 200 again.",
        body="NewPlant",
        errors=(409,),
        scope="write",
    )
    @falcon.before(require_json)
    def on_post(self, req, resp):
        """Keep a new plant; an identical repeat answers the same, a different one 409.

        Plants are compared as JSON values (`same_plant`); the repeat answers the plant as it
        is kept.
        """
        new_plant = _NEW_PLANT.load(req.get_media())
        plant = orjson.dumps(_PLANT.dump(new_plant))
        kept = self._store.add(new_plant["id"], plant)
        if not same_plant(kept, plant):
            raise falcon.HTTPConflict(
                title="Conflict", description=CONFLICT.format(plant_id=new_plant["id"])
            )
        _answer_plant(resp, kept)

    @Operation(
        "listPlants",
        "List plants a page at a time, in ascending id order",
        {
            200: answer(
                "A page of plants, each with its id.",
                {"type": "array", "items": "StoredPlant"},
                "Link",
                "Events-After",
            )
        },
        description="Follow the `Link` header's `next` until there is none to see every plant "
        "once, even while others are created or deleted; then follow `GET /events` from the "
        "first page's `Events-After` to keep up with every change.",
        parameters=({"in": "query", "schema": PageQuerySchema},),
        scope="read",
    )
    def on_get(self, req, resp):
        """List a page of plants in ascending id order; a full page links to the next one.

        A page is full at `limit` plants, or at `MAX_PAGE_BYTES` of them. The next page starts
        after the last id of this one (a keyset, not an offset), so a client that follows
        `next` sees every plant once while others come and go.
        """
        query = _PAGE_QUERY.load(req.params)
        # Taken before the page is read: a change not in it is in the feed after this.
        resp.set_header("Events-After", str(self._store.head()))
        page = self._store.page(
            query.get("after"), query["limit"], query.get("tag"), MAX_PAGE_BYTES
        )
        resp.data = b"[%b]" % b",".join(stored_plant(*item) for item in page.plants)
        if page.full:
            given = {name: query[name] for name in ("limit", "tag") if name in req.params}
            resp.append_header("Link", next_page(req, {**given, "after": page.plants[-1][0]}))

    on_head = on_get


class Plant:
    """`/plants/{id}`: one plant, to read, replace or delete, each on the conditions the request
    sets with `If-Match` and `If-None-Match` on its `ETag`."""

    openapi = PathItem("/plants/{id}", needs_store=True)

    def __init__(self, store: PlantStore) -> None:
        self._store = store

    @Operation(
        "getPlant",
        "Read a plant",
        {
            200: answer(
                "The plant, as it is stored.",
                "Plant",
                "ETag",
                links={"updatePlant": {**_READ, **_AS_READ}},
            ),
            304: answer(
                "The plant is as the client has it: its `ETag` is one that `If-None-Match` names.",
                None,
                "ETag",
            ),
        },
        parameters=_ID_PARAMETER,
        conditional=True,
        errors=(404,),
        scope="read",
    )
    def on_get(self, req, resp, plant_id):
        """Answer the plant, byte for byte as it is kept; 304 when the client has it already."""
        plant_id = _load_plant_id(plant_id)
        conditions = Conditions.of(req)
        plant = self._store.get(plant_id)
        if not conditions.matches(plant):
            raise precondition_failed(plant_id)
        if plant is None:
            raise _not_found(plant_id)
        if conditions.none_matches(plant):
            resp.status = falcon.HTTP_304
            resp.etag = etag_of(plant)
            return
        _answer_plant(resp, plant)

    on_head = on_get

    @Operation(
        "updatePlant",
        "Create or replace a plant",
        {
            200: answer("The plant replaced the one stored, or was the same.", "Plant", "ETag"),
            201: answer("The plant is stored under a free id.", "Plant", "ETag", "Location"),
        },
        description="The whole plant is stored: one without `tag` keeps none. A body may also "
        "hold `id`, which must then be the path's. `If-Match` with the `ETag` of a read changes "
        "the plant only if nobody changed it since; `If-None-Match: *` only creates.",
        body="Plant",
        parameters=_ID_PARAMETER,
        conditional=True,
        scope="write",
    )
    @falcon.before(require_json)
    def on_put(self, req, resp, plant_id):
        """Keep the plant under this id, whether or not one was there: the whole plant, so a
        body without `tag` leaves it without one. A plant the same as the kept one changes
        nothing, and answers the kept one."""
        plant_id = _load_plant_id(plant_id)
        condition = Conditions.of(req).of_change()
        replacement = _REPLACEMENT.load(req.get_media())
        if replacement.get("id", plant_id) != plant_id:
            raise ValidationError({"id": [f"Must be the id of the path, {plant_id}, when given."]})
        plant = orjson.dumps(_PLANT.dump(replacement))
        try:
            done, kept = self._store.put(plant_id, plant, condition)
        except ConditionFailed:
            raise precondition_failed(plant_id) from None
        if done is Put.CREATED:
            resp.status = falcon.HTTP_201
            resp.location = mounted(req, f"/plants/{plant_id}")
        _answer_plant(resp, kept)

    @Operation(
        "deletePlant",
        "Delete a plant; its id is free again",
        {204: answer("The plant is deleted.")},
        parameters=_ID_PARAMETER,
        conditional=True,
        errors=(404,),
        scope="write",
    )
    def on_delete(self, req, resp, plant_id):
        """Forget the plant; its id is free again."""
        plant_id = _load_plant_id(plant_id)
        condition = Conditions.of(req).of_change()
        try:
            deleted = self._store.delete(plant_id, condition)
        except ConditionFailed:
            raise precondition_failed(plant_id) from None
        if not deleted:
            raise _not_found(plant_id)
        resp.status = falcon.HTTP_204


def _answer_plant(resp: falcon.Response, plant: bytes) -> None:
    """Answer a kept plant, with its `ETag`."""
    resp.data = plant
    resp.etag = etag_of(plant)


def _load_plant_id(text: str) -> int:
    """The `{id}` of the path, as `PlantIdSchema` reads it; a bad one is its 400 naming `id`."""
    return _PLANT_ID.load({"id": text})["id"]


def _not_found(plant_id: int) -> falcon.HTTPNotFound:
    return falcon.HTTPNotFound(title="Not Found", description=NOT_FOUND.format(plant_id=plant_id))
