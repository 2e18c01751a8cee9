"""The events subscribers hear of, as the bytes every attempt to deliver one sends."""

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from plantstore.schemas import stored_plant


@dataclass(frozen=True)
class Event:
    """A change to tell subscribers of, made once: every attempt and every URL get these bytes.

    `webhook_id` is the Standard Webhooks message id, the same for each URL and attempt, so
    a subscriber that heard an event already can tell a repeat by it.
    """

    webhook_id: str
    body: bytes
    created_at: float


def plant_created(plant_id: int, plant: bytes) -> Event:
    """`plant.created`, whose data is the `NewPlant`: the id and the plant's fields."""
    return _event(b"plant.created", stored_plant(plant_id, plant))


def plant_deleted(plant_id: int) -> Event:
    """`plant.deleted`, whose data is the id the plant had."""
    return _event(b"plant.deleted", b'{"id":%d}' % plant_id)


def _event(kind: bytes, data: bytes) -> Event:
    created_at = time.time()
    stamp = datetime.fromtimestamp(created_at, UTC).isoformat(timespec="milliseconds")
    body = b'{"type":"%b","timestamp":"%bZ","data":%b}' % (
        kind,
        stamp.removesuffix("+00:00").encode(),
        data,
    )
    return Event(f"msg_{uuid.uuid4().hex}", body, created_at)
