"""The feed every store keeps (`PlantStore.events`): each change committed after a cursor comes
once, in the order of its plant's commits, from whatever cursor a follower resumes, page after
page; a cursor older than what is kept is `CursorGone`, never a silent gap."""

import sqlite3
import threading
import time
from contextlib import closing
from itertools import count

import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plantstore.api.schemas import INT64_MAX, INT64_MIN
from plantstore.core.events import Event, EventKind, documents_of, rfc3339
from plantstore.core.plants import ConditionFailed
from plantstore.core.stores import CursorGone, PlantStore
from plantstore.stores.memory import MemoryStore
from plantstore.stores.memory_feed import MemoryFeed
from plantstore.testing.feed import event_of, events_of
from tests.stores.test_store_contract import FERN, ROSE, document

#: Few ids, so that changes often meet a plant that an earlier one made, changed or deleted.
few_ids = st.integers(min_value=0, max_value=3)
names = st.sampled_from(["fern", "rose", "ivy"])
changes = st.lists(
    st.tuples(st.sampled_from(["add", "put", "put if taken", "delete"]), few_ids, names),
    max_size=12,
)
#: Each example's plants, under ids of their own, so that examples share a store but no plant.
ID_BLOCKS = count(0, 10)


def make(store: PlantStore, kind: str, plant_id: int, name: str, held: dict) -> tuple | None:
    """Make one change on `store` and on the model `held`; give the event it must make, if any."""
    plant = document(name)
    before = held.get(plant_id)
    try:
        if kind == "add":
            store.add(plant_id, plant)
        elif kind == "delete":
            store.delete(plant_id)
        else:
            store.put(
                plant_id, plant, (lambda kept: kept is not None) if kind == "put if taken" else None
            )
    except ConditionFailed:
        return None
    if kind == "delete":
        held.pop(plant_id, None)
        return None if before is None else (EventKind.DELETED, plant_id, None)
    if before is None:
        held[plant_id] = plant
        return EventKind.CREATED, plant_id, plant
    if kind == "add" or before == plant:
        return None
    held[plant_id] = plant
    return EventKind.UPDATED, plant_id, plant


def follow(store: PlantStore, after: int, limit: int) -> list:
    """Every event after `after`, page after page of `limit`, as a follower reads them."""
    events = []
    while True:
        page = store.events(after, limit)
        events += events_of(page)
        assert page.after >= after
        if not page.full:
            return events
        after = page.after


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(made=changes, limit=st.integers(min_value=1, max_value=4), data=st.data())
def test_every_store_gives_each_change_once_in_order_from_any_cursor(any_store, made, limit, data):
    base = next(ID_BLOCKS)
    start = any_store.head()
    held: dict = {}
    expected = [
        event
        for kind, plant_id, name in made
        if (event := make(any_store, kind, base + plant_id, name, held)) is not None
    ]
    events = follow(any_store, start, limit)
    assert [(event.kind, event.plant_id, event.plant) for event in events] == expected
    assert [event.position for event in events] == sorted({event.position for event in events})
    assert any_store.head() >= (events[-1].position if events else start)
    if events:
        resumed = data.draw(st.sampled_from(events), label="resumed after")
        later = [event for event in events if event.position > resumed.position]
        assert follow(any_store, resumed.position, limit) == later


def test_a_page_says_where_to_go_on_from_also_when_empty(any_store):
    head = any_store.head()
    empty = any_store.events(head, 10)
    assert (empty.documents, empty.full) == ([], False)
    assert empty.after >= head
    any_store.add(1, document("fern"))
    (created,) = events_of(any_store.events(empty.after, 10))
    assert (created.kind, created.plant_id, created.plant) == (
        EventKind.CREATED,
        1,
        document("fern"),
    )
    assert any_store.events(created.position, 10).documents == []


def test_the_head_taken_before_a_list_is_where_what_the_list_missed_begins(any_store):
    """List, then follow: a change committed after the head is in the feed after it."""
    any_store.add(1, document("fern"))
    head = any_store.head()
    any_store.add(2, document("rose"))
    any_store.delete(1)
    assert [(event.kind, event.plant_id) for event in follow(any_store, head, 10)] == [
        (EventKind.CREATED, 2),
        (EventKind.DELETED, 1),
    ]


def every_event(store: PlantStore) -> list:
    """Every event a fresh store keeps, from the oldest."""
    page = store.events(None, 1000)
    assert not page.full
    return events_of(page)


def test_an_event_is_stored_as_the_plant_was_and_when(any_store):
    """Byte for byte, beyond ASCII and with what JSON escapes: the event's document holds the
    plant as the bytes it was written as; its time is cut to the millisecond."""
    name = 'fougère "🌿" \\ 蕨'
    before = time.time()
    any_store.put(5, document(name, "green"))
    (written,) = any_store.events(None, 10).documents
    assert b'"plant":%b,' % document(name, "green") in written
    event = event_of(written)
    assert (event.kind, event.plant_id, event.plant) == (
        EventKind.CREATED,
        5,
        document(name, "green"),
    )
    assert before - 0.001 < event.at <= time.time()
    assert orjson.loads(event.webhook_body())["data"] == {"id": 5, "name": name, "tag": "green"}


def test_pruned_events_are_gone_and_a_cursor_before_them_is_too(any_store):
    for plant_id in range(5):
        any_store.add(plant_id, document(f"plant {plant_id}"))
    events = every_event(any_store)
    assert len(events) == 5
    assert any_store.prune(events[-1].at + 1, 2) == 2
    assert events_of(any_store.events(None, 10)) == events[2:]
    assert any_store.prune(events[-1].at + 1, 100) == 3
    with pytest.raises(CursorGone):
        any_store.events(events[0].position, 10)
    assert any_store.events(None, 10).documents == []
    assert any_store.events(events[-1].position, 10).documents == []


def test_only_events_older_than_asked_are_pruned(any_store):
    any_store.add(1, document("fern"))
    (event,) = every_event(any_store)
    assert any_store.prune(event.at, 100) == 0
    assert every_event(any_store) == [event]


def test_a_cursor_of_another_run_of_the_memory_store_is_gone():
    """The memory store's plants go with its process: a follower must list them again."""
    earlier = MemoryStore()
    earlier.add(1, document("fern"))
    (event,) = events_of(earlier.events(None, 10))
    with pytest.raises(CursorGone):
        MemoryStore().events(event.position, 10)


def test_a_wait_ends_at_a_commit_of_the_process(any_store):
    woken = []
    waiting = threading.Thread(target=lambda: woken.append(any_store.wait_for_events(30)))
    began = time.monotonic()
    waiting.start()
    while waiting.is_alive() and time.monotonic() - began < 30:
        any_store.add(1, document("fern"))
        waiting.join(0.05)
    assert woken == [True]
    assert time.monotonic() - began < 10


def test_waits_end_at_once_when_the_process_stops(any_store):
    woken = []
    waiting = threading.Thread(target=lambda: woken.append(any_store.wait_for_events(30)))
    waiting.start()
    any_store.stop_waiting()
    waiting.join(10)
    assert woken == [False]
    assert any_store.wait_for_events(30) is False


@given(
    st.lists(
        st.tuples(
            st.sampled_from(EventKind),
            st.integers(INT64_MIN, INT64_MAX),
            st.text(),
            st.floats(min_value=0, max_value=2**35, allow_nan=False),
        ),
        max_size=20,
    )
)
def test_the_memory_feed_reads_the_documents_that_the_sql_stores_write(drawn):
    """The memory store makes a page's documents from its columns each time it is read, the
    SQL stores make each once, as its change is written: the same bytes for the same events,
    each telling its event, the plant as stored and the time as `rfc3339` writes it."""
    events = [
        Event(1 + n, kind, plant_id, None if kind is EventKind.DELETED else document(name), at)
        for n, (kind, plant_id, name, at) in enumerate(drawn)
    ]
    feed = MemoryFeed(first_position=1)
    feed.append(events)
    documents = documents_of(events)
    assert list(feed.after(0, len(events) + 1)) == documents
    for event, written in zip(events, documents, strict=True):
        assert orjson.loads(written) == {
            "id": event.id,
            "type": event.kind.feed_type,
            "plant_id": event.plant_id,
            "plant": None if event.plant is None else orjson.loads(event.plant),
            "at": rfc3339(event.at),
        }


def kept_documents(url: str) -> list[bytes]:
    """The documents of the events table of a SQLite or PostgreSQL store, in the feed's order."""
    query = "SELECT document FROM events ORDER BY position"
    if url.startswith("sqlite:///"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as connection:
            rows = connection.execute(query).fetchall()
    else:
        with psycopg.connect(url) as connection:
            rows = connection.execute(query).fetchall()
    return [kept for (kept,) in rows]


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_a_sql_stores_page_of_events_is_the_documents_kept_with_the_changes(any_store, store_url):
    """Each event's document is made once, in its change's transaction: a page reads them."""
    any_store.add(1, FERN)
    any_store.put(1, ROSE)
    any_store.delete(1)
    page = any_store.events(None, 10)
    assert len(page.documents) == 3
    assert page.documents == kept_documents(store_url)


def test_a_memory_page_is_what_the_feed_held_when_it_was_read():
    """The memory store makes a page's documents after letting go of its lock: they are those
    of the columns as they were, whatever prunes and appends came between."""
    feed = MemoryFeed(first_position=1)
    events = [Event(n, EventKind.CREATED, n, document(f"plant {n}"), 1e9 + n) for n in (1, 2, 3)]
    feed.append(events)
    made = feed.after(0, 3)
    feed.prune(float("inf"), 3)
    feed.append([Event(4, EventKind.DELETED, 1, None, 2e9)])
    assert list(made) == documents_of(events)


def test_the_memory_store_keeps_its_last_events_past_its_feeds_limit(monkeypatch):
    """Past `FEED_LIMIT` events it forgets the oldest, whatever their age, and goes on taking
    changes."""
    monkeypatch.setattr("plantstore.stores.memory.FEED_LIMIT", 3)
    store = MemoryStore()
    for plant_id in range(5):
        store.add(plant_id, document(f"plant {plant_id}"))
    kept = events_of(store.events(None, 10))
    assert [event.plant_id for event in kept] == [2, 3, 4]
    with pytest.raises(CursorGone):
        store.events(kept[0].position - 2, 10)
