"""`GET /events`: the feed over HTTP, its cursors and pages, its waits and their bound, and the
`Events-After` of a list of the plants."""

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import falcon.testing
import hypothesis
import pytest
from hypothesis import strategies as st

from plantstore.api.schemas import EventPageSchema
from plantstore.app import create_app
from plantstore.core.events import rfc3339
from tests.conftest import TOKEN

FERN = {"name": "fern", "tag": "green"}


def events_after(client, after, **params):
    result = client.simulate_get("/events", params={"after": after, **params})
    assert result.status_code == 200, result.json
    return result


def test_each_change_is_an_event_as_the_schema_says(client):
    head = client.simulate_get("/plants").headers["events-after"]
    client.simulate_post("/plants", json={"id": 1, **FERN})
    client.simulate_put("/plants/1", json={"name": "tree fern"})
    client.simulate_delete("/plants/1")
    page = events_after(client, head).json
    assert EventPageSchema().validate(page) == {}
    assert [(e["type"], e["plant_id"], e["plant"]) for e in page["events"]] == [
        ("plantCreated", 1, FERN),
        ("plantUpdated", 1, {"name": "tree fern"}),
        ("plantDeleted", 1, None),
    ]
    ids = [int(event["id"]) for event in page["events"]]
    assert ids == sorted(ids) and int(page["after"]) == ids[-1]
    for event in page["events"]:
        assert event["at"].endswith("Z")
        assert abs(datetime.fromisoformat(event["at"]).timestamp() - time.time()) < 60


def test_a_full_page_links_to_the_next_and_every_page_says_where_to_go_on(client):
    head = client.simulate_get("/plants").headers["events-after"]
    for plant_id in range(5):
        client.simulate_post("/plants", json={"id": plant_id, "name": f"plant {plant_id}"})
    first = events_after(client, head, limit=3)
    assert [e["plant_id"] for e in first.json["events"]] == [0, 1, 2]
    assert first.headers["link"] == f'</events?limit=3&after={first.json["after"]}>; rel="next"'
    rest = events_after(client, first.json["after"], limit=3)
    assert [e["plant_id"] for e in rest.json["events"]] == [3, 4]
    assert "link" not in rest.headers
    empty = events_after(client, rest.json["after"])
    assert empty.json["events"] == []
    assert int(empty.json["after"]) >= int(rest.json["after"])


def test_without_a_cursor_the_feed_is_read_from_its_oldest_event(client):
    client.simulate_post("/plants", json={"id": 1, **FERN})
    result = client.simulate_get("/events")
    assert [e["plant_id"] for e in result.json["events"]] == [1]


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"after": "abc"}, "after"),
        ({"after": "-1"}, "after"),
        ({"after": "1.5"}, "after"),
        ({"after": str(2**63)}, "after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"wait": "31"}, "wait"),
        ({"wait": "-1"}, "wait"),
        ({"wait": "soon"}, "wait"),
    ],
)
def test_a_bad_cursor_limit_or_wait_is_a_400_naming_it(client, params, named):
    result = client.simulate_get("/events", params=params)
    assert result.status_code == 400
    assert result.json["error"] == 400
    assert result.json["message"].startswith(f"{named}: ")


def test_a_cursor_older_than_the_feed_is_410_saying_to_list_again(client):
    """The memory store's feed starts with its run: a cursor of before is gone."""
    result = client.simulate_get("/events", params={"after": "0"})
    assert result.status_code == 410
    assert result.json == {
        "error": 410,
        "message": "The events after this cursor are no longer kept: list the plants again "
        "(GET /plants), then follow the events after the Events-After that list answers.",
    }


def test_every_page_of_the_list_tells_where_to_follow_from(client):
    for plant_id in range(3):
        client.simulate_post("/plants", json={"id": plant_id, **FERN})
    first = client.simulate_get("/plants", params={"limit": 2})
    after = first.headers["events-after"]
    client.simulate_delete("/plants/2")
    second = client.simulate_get("/plants", params={"limit": 2, "after": 1})
    assert int(second.headers["events-after"]) > int(after)
    assert second.json == []
    assert [e["type"] for e in events_after(client, after).json["events"]] == ["plantDeleted"]


def test_the_feed_needs_the_read_scope(config, store, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("writer scopes=write\n")
    app = create_app(dataclasses.replace(config, tokens_file=str(tokens)), store)
    writer = falcon.testing.TestClient(app, headers={"Authorization": "Bearer writer"})
    assert writer.simulate_get("/events").status_code == 403


@pytest.fixture
def waiting(store, monkeypatch):
    """Set once a request waits for an event on `store`."""
    entered = threading.Event()
    wait = store.wait_for_events

    def noted(timeout):
        entered.set()
        return wait(timeout)

    monkeypatch.setattr(store, "wait_for_events", noted)
    return entered


def test_a_wait_is_answered_once_a_change_is_committed(client, waiting):
    after = client.simulate_get("/plants").headers["events-after"]
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(events_after, client, after, wait=30)
        assert waiting.wait(10)
        began = time.monotonic()
        client.simulate_post("/plants", json={"id": 1, **FERN})
        result = answer.result(30)
    assert [e["plant_id"] for e in result.json["events"]] == [1]
    assert time.monotonic() - began < 5


def test_a_wait_with_nothing_to_wait_for_ends_empty_at_its_time(client):
    after = client.simulate_get("/plants").headers["events-after"]
    began = time.monotonic()
    result = events_after(client, after, wait=1)
    assert result.json["events"] == []
    assert 1 <= time.monotonic() - began < 5


def test_no_more_than_the_bound_of_requests_wait_at_once(config, store, waiting):
    """Past the worker's bound, a request with `wait` is answered at once, as without it."""
    app = create_app(dataclasses.replace(config, feed_waits=1), store)
    client = falcon.testing.TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})
    after = client.simulate_get("/plants").headers["events-after"]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(events_after, client, after, wait=30)
        assert waiting.wait(10)
        began = time.monotonic()
        assert events_after(client, after, wait=30).json["events"] == []
        assert time.monotonic() - began < 1
        assert not first.done()
        store.stop_waiting()
        assert first.result(10).json["events"] == []


def test_a_stopping_worker_ends_the_waits_with_an_empty_page(client, store, waiting):
    after = client.simulate_get("/plants").headers["events-after"]
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(events_after, client, after, wait=30)
        assert waiting.wait(10)
        began = time.monotonic()
        store.stop_waiting()
        result = answer.result(10)
    assert result.status_code == 200
    assert result.json["events"] == []
    assert time.monotonic() - began < 1


@hypothesis.given(
    st.floats(min_value=0, max_value=2**35, allow_nan=False)
    | st.integers(0, 2**34).map(lambda second: second + 0.9995)
    | st.integers(0, 2**34).map(lambda second: second + 0.9999996)
)
def test_an_events_time_is_written_as_datetime_writes_it(at):
    """To the millisecond, rounded to the microsecond first, whatever second it falls in."""
    written = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    assert rfc3339(at) == written.replace("+00:00", "Z")
