"""The events of changes to plants, as the feed keeps them and the webhooks send them, and the
name the outbox gives each subscriber."""

import functools
import hashlib
import math
import time
from enum import Enum
from typing import NamedTuple

import orjson
from urllib3.util import Url, parse_url

from plantstore.core.plants import stored_plant


class EventKind(Enum):
    """What a change did, as the database keeps it; each names it in the feed and the webhooks."""

    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"

    @property
    def feed_type(self) -> str:
        """`plantCreated`, as `GET /events` names it."""
        return f"plant{self.value.capitalize()}"

    @property
    def webhook_type(self) -> str:
        """`plant.created`, as a webhook's body names it."""
        return f"plant.{self.value}"


class Event(NamedTuple):
    """A change made to a plant, kept in the feed with its change and sent by webhook.

    Its `position` orders it in the feed, and names it there (its `id`) and in every webhook
    delivery of it (`webhook-id`): a subscriber that takes both tells a repeat by it.
    """

    position: int
    kind: EventKind
    plant_id: int
    #: The `Plant` document as stored; None for a delete.
    plant: bytes | None
    #: When the change was made, in seconds since the epoch.
    at: float

    @property
    def id(self) -> str:
        return str(self.position)

    def webhook_body(self) -> bytes:
        """The body every attempt to deliver it sends: its type, its time (UTC to the
        millisecond, with `Z`) and its data, the `NewPlant` (its id alone, for a delete)."""
        if self.plant is None:
            data: object = {"id": self.plant_id}
        else:
            data = orjson.Fragment(stored_plant(self.plant_id, self.plant))
        return orjson.dumps(
            {"type": self.kind.webhook_type, "timestamp": rfc3339(self.at), "data": data}
        )


def rfc3339(at: float) -> str:
    """`at` (seconds since the epoch) in UTC to the millisecond, written with `Z`: as `datetime`
    writes it (rounded to the microsecond, then cut to the millisecond), each second's date and
    time formatted once, since a page of events holds many of the same second."""
    fraction, whole = math.modf(at)
    micro = round(fraction * 1_000_000)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    return f"{_second(int(whole))}.{micro // 1000:03d}Z"


@functools.lru_cache(maxsize=4096)
def _second(whole: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


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
