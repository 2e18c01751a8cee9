"""A page of the feed read back into events, for the checks the tests and the bench make of
what a store keeps."""

from datetime import datetime

import orjson

from plantstore.core.events import Event, EventKind
from plantstore.core.stores import EventPage

_KINDS = {kind.feed_type: kind for kind in EventKind}


def event_of(document: bytes) -> Event:
    """The event an `Event` document tells: its plant as orjson writes it, which is how every
    store keeps one, and its time to the millisecond the document holds."""
    read = orjson.loads(document)
    plant = None if read["plant"] is None else orjson.dumps(read["plant"])
    at = datetime.fromisoformat(read["at"]).timestamp()
    return Event(int(read["id"]), _KINDS[read["type"]], read["plant_id"], plant, at)


def events_of(page: EventPage) -> list[Event]:
    return [event_of(document) for document in page.documents]
