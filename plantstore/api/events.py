"""`/events`: the feed of changes, a page at a time, and a wait for the next when asked."""

import threading
import time
from typing import Protocol

from plantstore.api.openapi.operation import Operation, PathItem, answer
from plantstore.api.routing import next_page
from plantstore.api.schemas import EventQuerySchema
from plantstore.core.stores import EventPage, PlantStore

_QUERY = EventQuerySchema()


class Gauge(Protocol):
    """What counts the requests waiting: a gauge of the metrics."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...


class Events:
    """`/events`: every change committed after a cursor, in the order of each plant's commits.

    A request with `wait` whose page would be empty waits for the next commit, woken by this
    worker's own and looking again for other processes' (the store says how often). At most
    `waits` requests of a worker wait at once, so they never hold the threads others need; one
    more is answered at once, as without `wait`. A stopping worker ends the waits with what
    they have, an empty page, rather than keep its restart waiting.
    """

    openapi = PathItem("/events", needs_store=True)

    def __init__(self, store: PlantStore, waits: int, waiting: Gauge) -> None:
        self._store = store
        self._waits = threading.BoundedSemaphore(waits)
        self._waiting = waiting

    @Operation(
        "listEvents",
        "Follow the changes: the events after a cursor, oldest first",
        {200: answer("A page of events, and the cursor to go on from.", "EventPage", "Link")},
        description="Each change committed after the cursor comes once, in the order of its "
        "plant's commits, whichever host made it. 410 when events after the cursor are no "
        "longer kept: list the plants again, then follow from the `Events-After` of that list.",
        parameters=({"in": "query", "schema": EventQuerySchema},),
        errors=(410,),
        scope="read",
    )
    def on_get(self, req, resp):
        query = _QUERY.load(req.params)
        page = self._store.events(query.get("after"), query["limit"])
        if not page.documents and query["wait"]:
            page = self._wait(page, query["limit"], query["wait"])
        events = b",".join(page.documents)
        resp.data = b'{"events":[%b],"after":"%d"}' % (events, page.after)
        if page.full:
            given = {name: query[name] for name in ("limit", "wait") if name in req.params}
            resp.append_header("Link", next_page(req, {**given, "after": page.after}))

    on_head = on_get

    def _wait(self, page: EventPage, limit: int, seconds: int) -> EventPage:
        """Wait up to `seconds` for an event after the page's cursor, if a wait is free."""
        if not self._waits.acquire(blocking=False):
            return page
        self._waiting.inc()
        try:
            deadline = time.monotonic() + seconds
            while not page.documents and (left := deadline - time.monotonic()) > 0:
                if not self._store.wait_for_events(left):
                    break
                page = self._store.events(page.after, limit)
        finally:
            self._waiting.dec()
            self._waits.release()
        return page
