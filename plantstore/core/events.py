"""The events of changes to plants, as the feed keeps them and the webhooks send them, and the
name the outbox gives each subscriber."""

import functools
import hashlib
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from enum import Enum
from itertools import repeat
from operator import floordiv, mod
from typing import NamedTuple

import orjson
from urllib3.util import Url, parse_url

from plantstore.core.plants import stored_plant


class EventKind(Enum):
    """What a change did; each names it in the feed and the webhooks."""

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
    """`at` (seconds since the epoch) in UTC to the millisecond, written with `Z`."""
    whole, millisecond = divmod(milliseconds(at), 1000)
    return (_RFC3339 % (_second(whole), millisecond)).decode()


def milliseconds(at: float) -> int:
    """`at` (seconds since the epoch) in whole milliseconds, as `datetime` writes a time: rounded
    to the microsecond, then cut to the millisecond."""
    fraction, whole = math.modf(at)
    return int(whole) * 1000 + round(fraction * 1_000_000) // 1000


@functools.lru_cache(maxsize=4096)
def _second(whole: int) -> bytes:
    """The date and time of a second: formatted once for all the events made in it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)).encode()


#: A time: its second's date and time, then its millisecond.
_RFC3339 = b"%b.%03dZ"

#: The kinds in a fixed order: a kind's place in it is the one byte that keeps it compactly.
KINDS = tuple(EventKind)
#: Each kind's `type` in the feed, in the order of `KINDS`.
_FEED_TYPES = tuple(kind.feed_type.encode() for kind in KINDS)
#: An `Event` document: the plant as stored, with no parse and no dump (the other fields are
#: numbers and names that JSON needs no escape for), the time as `rfc3339` writes it.
_DOCUMENT = b'{"id":"%d","type":"%b","plant_id":%d,"plant":%b,"at":"' + _RFC3339 + b'"}'
#: A missing plant (a delete's) as JSON, and any other as itself.
_NULL = {None: b"null"}


def feed_documents(
    positions: Iterable[int],
    kinds: Iterable[int],
    plant_ids: Iterable[int],
    plants: Iterable[bytes | None],
    times_ms: Sequence[int],
) -> Iterator[bytes]:
    """The `Event` documents of events given column by column: their positions, kinds (places
    in `KINDS`), plants' ids, plants, and times (as `milliseconds` gives them).

    Whole columns go through built-in functions, with no Python call an event, so that a
    store which keeps its events in columns makes a page of them, when it is read, at the cost
    of a page of plants.
    """
    return map(
        _DOCUMENT.__mod__,
        zip(
            positions,
            map(_FEED_TYPES.__getitem__, kinds),
            plant_ids,
            map(_NULL.get, plants, plants),
            map(_second, map(floordiv, times_ms, repeat(1000))),
            map(mod, times_ms, repeat(1000)),
            strict=True,
        ),
    )


def documents_of(events: Sequence[Event]) -> list[bytes]:
    """The `Event` document of each event, as `GET /events` gives it."""
    return list(
        feed_documents(
            [event.position for event in events],
            [KINDS.index(event.kind) for event in events],
            [event.plant_id for event in events],
            [event.plant for event in events],
            [milliseconds(event.at) for event in events],
        )
    )


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
