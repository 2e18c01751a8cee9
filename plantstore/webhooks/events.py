"""The events subscribers hear of, as the bytes every attempt to deliver one sends."""

import time
import uuid
from datetime import UTC, datetime
from typing import NamedTuple

import orjson

from plantstore.stores import stored_plant


class Event(NamedTuple):
    """A change to tell subscribers of, made once: every attempt and every URL get these bytes.

    `webhook_id` is the Standard Webhooks message id, the same for each URL and attempt, so
    a subscriber that heard an event already can tell a repeat by it.
    """

    webhook_id: str
    body: bytes
    created_at: float


def plant_created(plant_id: int, plant: bytes) -> Event:
    """`plant.created`, whose data is the `NewPlant`: the id and the plant's fields."""
    return _event("plant.created", orjson.Fragment(stored_plant(plant_id, plant)))


def plant_updated(plant_id: int, plant: bytes) -> Event:
    """`plant.updated`, whose data is the plant as it now is, with its id (a `NewPlant`)."""
    return _event("plant.updated", orjson.Fragment(stored_plant(plant_id, plant)))


def plant_deleted(plant_id: int) -> Event:
    """`plant.deleted`, whose data is the id the plant had."""
    return _event("plant.deleted", {"id": plant_id})


def _event(kind: str, data: object) -> Event:
    """An event of this kind with its data, happening now; its id is a fresh uuid4.

    The timestamp is UTC to the millisecond, written with `Z` as the event's schema says.
    """
    created_at = time.time()
    stamp = datetime.fromtimestamp(created_at, UTC).isoformat(timespec="milliseconds")
    body = orjson.dumps({"type": kind, "timestamp": stamp.replace("+00:00", "Z"), "data": data})
    return Event(f"msg_{uuid.uuid4().hex}", body, created_at)
