"""The events subscribers hear of, as the bytes every attempt to deliver one sends, and the
name the outbox gives each subscriber."""

import hashlib
import time
import uuid
from datetime import UTC, datetime
from typing import NamedTuple

import orjson
from urllib3.util import Url, parse_url

from plantstore.core.plants import stored_plant


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


def subscriber_key(url: str) -> str:
    """Name the subscriber at `url` without telling its URL: the first 16 hex digits of the
    SHA-256 of the URL without its user and password (as urllib3 writes it).

    The same in every worker and every run, so a delivery waiting in the outbox finds its URL
    again after a restart; and the same when only the password changes. Nothing of the
    password goes into it, so a key in a log line is no help in guessing one.
    """
    return hashlib.sha256(without_credentials(url).encode()).hexdigest()[:16]


def without_credentials(url: str) -> str:
    """`url` without its user and password, as urllib3 writes it."""
    parsed = parse_url(url)
    return Url(
        scheme=parsed.scheme,
        host=parsed.host,
        port=parsed.port,
        path=parsed.path,
        query=parsed.query,
        fragment=parsed.fragment,
    ).url
