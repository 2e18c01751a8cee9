"""The HTTP resources; they know the contract, not how plants are stored."""

import falcon
import orjson

from plantstore.schemas import dump_plant, load_new_plant
from plantstore.stores import PlantStore, StoreUnavailable


class Plants:
    """`/plants`: create a plant under the id its client chose."""

    def __init__(self, store: PlantStore) -> None:
        self._store = store

    def on_post(self, req, resp):
        """Keep a new plant; an identical repeat answers the same, a different one 409."""
        new_plant = load_new_plant(req.get_media())
        plant = orjson.dumps(dump_plant(new_plant))
        kept = self._store.add(new_plant["id"], plant)
        if kept != plant:
            raise falcon.HTTPConflict(
                title="Conflict",
                description=f"Plant {new_plant['id']} already exists with other content.",
            )
        resp.data = kept


class Health:
    """`/healthz`: the process is up and answering; it asks nothing of the store."""

    auth_required = False

    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


class Readiness:
    """`/readyz`: whether the store can serve now, so a balancer sends traffic only then."""

    auth_required = False

    def __init__(self, store: PlantStore) -> None:
        self._store = store

    def on_get(self, req, resp):
        if not self._store.ready():
            raise StoreUnavailable("not ready")
        resp.media = {"status": "ready"}
