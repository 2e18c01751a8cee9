"""Delivering events to a real subscriber on loopback, which verifies every signature.

Time is driven by a clock the test moves on, and the deliverer is woken as a commit wakes
it: no test waits for a retry's real second.
"""

import base64
import contextlib
import logging
import queue
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import orjson
import psycopg
import pytest
import urllib3
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks import Webhook

from plantstore.api.schemas import PlantCreatedSchema, PlantDeletedSchema, PlantUpdatedSchema
from plantstore.core.events import subscriber_key
from plantstore.core.stores import StoreUnavailable
from plantstore.operations.metrics import process_metrics
from plantstore.stores.memory import MemoryStore
from plantstore.testing.gunicorn_server import ROOT, GunicornServer, server_environ
from plantstore.testing.webhook_receiver import SECRET, WebhookReceiver
from plantstore.webhooks.deliverer import SENDERS, Deliverer, backoff
from plantstore.webhooks.subscribers import origin
from tests.conftest import TOKEN
from tests.support.clients import service
from tests.support.workers import scrape_server, sqlite_workers

FERN = b'{"name":"fern","tag":"green"}'
ROSE = {"name": "rose", "tag": "red"}
#: Seconds any wait on a delivery gets: far more than one takes on loopback.
PATIENCE = 10.0


class Clock:
    """The real time, moved on by the test."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead

    def advance(self, seconds: float) -> None:
        self.ahead += seconds


def sample(client, name: str) -> float:
    """The value of a sample with no labels in the client's app's `/metrics`."""
    for family in text_string_to_metric_families(client.simulate_get("/metrics").text):
        for found in family.samples:
            if found.name == name:
                return found.value
    raise AssertionError(f"no {name}")


#: What the deliverer counts, in the process's metrics.
SENT, FAILED, GIVEN_UP = (
    f"plantstore_webhook_events_{outcome}_total" for outcome in ("sent", "failed", "given_up")
)


def wait_until(condition, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.005)


def keys(urls) -> list[str]:
    """The subscribers' keys, which a store is opened with, as `Runtime` opens it."""
    return [subscriber_key(url) for url in urls]


def waking(deliverer: threading.Event):
    """A store's `on_commit` that wakes the deliverer, as the runtime's does."""
    return lambda changes, events: deliverer.set()


class Running:
    """A memory store with an outbox, and a started deliverer sending what it holds."""

    def __init__(self, urls, timeout=2.0, give_up_after=3600.0) -> None:
        self.clock = Clock()
        self.wake = threading.Event()
        self._urls = urls
        self.store = MemoryStore(keys(urls), waking(self.wake))
        # The counters are the process's, which other tests added to: count from here.
        self._metrics = process_metrics()
        self._counted = {name: REGISTRY.get_sample_value(name) for name in (SENT, FAILED, GIVEN_UP)}
        self._timeout, self._give_up_after = timeout, give_up_after
        self.deliverer = self.start()

    def start(self) -> Deliverer:
        deliverer = Deliverer(
            self.store,
            self._urls,
            self.wake,
            Webhook(SECRET),
            self._timeout,
            self._give_up_after,
            clock=self.clock,
            jitter=lambda ceiling: ceiling,
            on_outcome=self._metrics.count_delivery,  # as `Runtime` counts them
        )
        deliverer.start()
        return deliverer

    def counted(self, name: str) -> float:
        """How much a webhook counter grew since this was made."""
        return REGISTRY.get_sample_value(name) - self._counted[name]

    def failed(self) -> float:
        return self.counted(FAILED)

    def wait_for_failures(self, count: int) -> None:
        wait_until(lambda: self.failed() >= count)

    def later(self, seconds: float) -> None:
        """Move the clock on, and wake the deliverer as the poll would."""
        self.clock.advance(seconds)
        self.wake.set()


@pytest.fixture
def running(request, receiver):
    """A deliverer to the receiver; `@pytest.mark.parametrize("running", [{...}], indirect=True)`
    gives other arguments.
    """
    arguments = {"urls": [receiver.url], **getattr(request, "param", {})}
    started = Running(**arguments)
    yield started
    started.deliverer.stop()


def test_events_arrive_signed_in_the_body_the_contract_gives(running, receiver):
    running.store.add(7, FERN)
    running.store.delete(7)
    assert receiver.wait_for(lambda got: len(got) == 2, PATIENCE)
    # Sent at once by two senders, they may arrive in either order.
    by_type = {delivery.event["type"]: delivery for delivery in receiver.deliveries}
    created, deleted = by_type["plant.created"], by_type["plant.deleted"]
    assert created.event == {
        "type": "plant.created",
        "timestamp": created.event["timestamp"],
        "data": {"id": 7, "name": "fern", "tag": "green"},
    }
    assert deleted.event == {
        "type": "plant.deleted",
        "timestamp": deleted.event["timestamp"],
        "data": {"id": 7},
    }
    assert created.webhook_id != deleted.webhook_id
    assert receiver.unverified == 0
    wait_until(lambda: running.counted(SENT) == 2)
    assert running.store.oldest() is None
    assert running.failed() == 0


def test_failures_are_retried_with_doubling_backoff_until_acknowledged(running, receiver, caplog):
    receiver.answer(500)
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    running.later(1.0)
    running.wait_for_failures(2)
    running.later(2.0)
    running.wait_for_failures(3)
    receiver.answer(200)
    running.later(4.0)
    assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    assert receiver.attempts == 4
    waits = [record.getMessage().rsplit("next in ", 1)[1] for record in caplog.records]
    assert waits == ["1.0 s", "2.0 s", "4.0 s"]
    assert "failed (answered 500), attempt 1;" in caplog.records[0].getMessage()
    assert {record.levelno for record in caplog.records} == {logging.WARNING}


def test_a_retry_waits_for_its_time(running, receiver):
    receiver.answer(503)
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    receiver.answer(200)
    running.later(0.5)
    running.store.add(2, FERN)
    assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    assert receiver.deliveries[0].event["data"]["id"] == 2
    running.later(0.5)
    assert receiver.wait_for(lambda got: len(got) == 2, PATIENCE)
    assert receiver.deliveries[1].event["data"]["id"] == 1


@pytest.mark.parametrize("status", [302, 400, 404, 410])
def test_only_a_2xx_acknowledges(running, receiver, status, caplog):
    receiver.answer(status)
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    assert f"answered {status}" in caplog.records[0].getMessage()
    assert running.store.oldest() is not None


def test_a_refused_connection_is_retried(running, receiver, caplog):
    receiver.refuse()
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    assert "could not connect" in caplog.records[0].getMessage()
    receiver.listen()
    running.later(1.0)
    assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)


@pytest.mark.parametrize("running", [{"timeout": 0.3}], indirect=True)
def test_an_answer_later_than_the_timeout_is_a_failure_retried(running, receiver, caplog):
    receiver.hold()
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    assert "timed out" in caplog.records[0].getMessage()
    receiver.release()
    running.later(1.0)
    wait_until(lambda: running.store.oldest() is None)
    # The attempt that timed out, once released, was heard too (maybe after the retry): the
    # subscriber tells it by its id.
    assert len(receiver.events()) == 1


def test_a_connection_not_made_within_the_timeout_is_a_failure_retried(caplog):
    """A port whose queue of connections is full leaves a new one unanswered, as a host out of
    reach does: the attempt gives up connecting at its timeout."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        address = full.getsockname()
        # The one connection a backlog of 0 queues.
        with socket.create_connection(address):
            running = Running([f"http://127.0.0.1:{address[1]}/hooks"], timeout=0.5)
            try:
                started = time.monotonic()
                running.store.add(1, FERN)
                running.wait_for_failures(1)
                assert time.monotonic() - started < 0.5 + 1.0
            finally:
                running.deliverer.stop()
    assert "timed out" in caplog.records[0].getMessage()
    assert running.store.oldest() is not None


@pytest.mark.parametrize("running", [{"timeout": 0.5}], indirect=True)
def test_a_2xx_acknowledges_though_its_body_trickles_past_the_timeout(running, receiver):
    """The status is the answer: the body is read only until the timeout, however it keeps
    coming, then dropped with its connection, and the next delivery takes a new one."""
    receiver.answer(200, trickle=True)
    running.store.add(1, FERN)
    assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    arrived = time.monotonic()
    wait_until(lambda: running.store.oldest() is None)
    assert time.monotonic() - arrived < 0.5 + 1.0
    assert (running.failed(), receiver.attempts) == (0, 1)
    receiver.answer(200)
    running.store.add(2, FERN)
    assert receiver.wait_for(lambda got: len(got) == 2, PATIENCE)
    assert running.failed() == 0


@pytest.mark.parametrize("running", [{"give_up_after": 10.0}], indirect=True)
def test_a_delivery_failing_past_the_bound_is_given_up_with_an_error(running, receiver, caplog):
    receiver.answer(500)
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    running.later(10.0)
    wait_until(lambda: running.counted(GIVEN_UP) == 1)
    assert running.failed() == 2
    assert running.store.oldest() is None
    error = caplog.records[-1]
    assert error.levelno == logging.ERROR
    assert error.getMessage().startswith("webhooks: gave up event ")
    named = f"http://127.0.0.1:{receiver.port} (subscriber {subscriber_key(receiver.url)})"
    assert f"to {named} after 2 attempts" in error.getMessage()


def test_the_last_retry_comes_at_the_bound(receiver, caplog):
    """The backoff would wait 2 s more; the bound is 1.5 s after the event: the retry comes then."""
    running = Running([receiver.url], give_up_after=1.5)
    try:
        receiver.answer(500)
        running.store.add(1, FERN)
        running.wait_for_failures(1)
        running.later(1.0)
        running.wait_for_failures(2)
        wait = float(caplog.records[1].getMessage().rsplit("next in ", 1)[1].removesuffix(" s"))
        assert 0.3 <= wait <= 0.5
        running.later(0.5)
        wait_until(lambda: running.counted(GIVEN_UP) == 1)
        assert receiver.attempts == 3
    finally:
        running.deliverer.stop()


def test_logs_name_each_subscriber_by_origin_and_key_only(caplog):
    """Two URLs on one host, told apart by their keys; neither's path, query or password."""
    with WebhookReceiver() as receiver:
        urls = [
            f"http://user:hunter2@127.0.0.1:{receiver.port}/hooks?key=k3y",
            f"http://127.0.0.1:{receiver.port}/other",
        ]
        running = Running(urls, give_up_after=0.0)
        try:
            receiver.answer(500)
            running.store.add(1, FERN)
            running.wait_for_failures(2)
        finally:
            running.deliverer.stop()
    named = {
        record.getMessage().split(" to ", 1)[1].split(" after ")[0] for record in caplog.records
    }
    assert named == {
        f"http://127.0.0.1:{receiver.port} (subscriber {subscriber_key(url)})" for url in urls
    }
    for secret in ("hunter2", "user", "k3y", "/hooks", "other", SECRET.removeprefix("whsec_")):
        assert secret not in caplog.text


def test_a_urls_user_and_password_go_as_basic_authorization_to_it_alone(receiver):
    """Percent-decoded, as UTF-8, as curl sends them; not to another URL on the same host.

    Without them, a subscriber that asks for them answers 401 to every attempt, and each of
    its events is given up a day later.
    """
    with_credentials = f"http://us%C3%A9r:p%40ss:w%C3%B6rd@127.0.0.1:{receiver.port}/with"
    running = Running([with_credentials, f"http://127.0.0.1:{receiver.port}/without"])
    try:
        running.store.add(1, FERN)
        assert receiver.wait_for(lambda got: len(got) == 2, PATIENCE)
    finally:
        running.deliverer.stop()
    basic = base64.b64encode("usér:p@ss:wörd".encode()).decode()
    assert {delivery.path: delivery.authorization for delivery in receiver.deliveries} == {
        "/with": f"Basic {basic}",
        "/without": None,
    }


def outbox_of(store_url: str) -> list[tuple]:
    """Every row of a SQLite or PostgreSQL store's outbox."""
    if store_url.startswith("sqlite:"):
        path = store_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path)) as connection:
            return connection.execute("SELECT * FROM outbox").fetchall()
    with psycopg.connect(store_url) as connection:
        return connection.execute("SELECT * FROM outbox").fetchall()


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_the_outbox_keeps_a_subscribers_key_never_its_password(worker_app, receiver, store_url):
    url = f"http://user:hunter2@127.0.0.1:{receiver.port}/hooks"
    receiver.hold()
    client = service(worker_app, store_url, [url])
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
    waiting = outbox_of(store_url)
    assert [row[2] for row in waiting] == [subscriber_key(url)]
    assert "hunter2" not in repr(waiting)
    receiver.release()
    assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    basic = base64.b64encode(b"user:hunter2").decode()
    assert receiver.deliveries[0].authorization == f"Basic {basic}"


@pytest.mark.slow
def test_the_start_names_each_subscriber_by_its_place_origin_and_key():
    """So that an operator can tell which URL a warning names: by its place in the list."""
    urls = ["http://user:hunter2@127.0.0.1:9/hooks?key=k3y", "http://127.0.0.1:9/elsewhere"]
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN,
            PLANTSTORE_WEBHOOK_URLS=",".join(urls),
            PLANTSTORE_WEBHOOK_SECRET=SECRET,
        )
    )
    try:
        server.wait_for_stderr(r"URL 2 is .*\n")
    finally:
        _, stderr = server.stop()
    for number, url in enumerate(urls, start=1):
        assert (
            f"plantstore: PLANTSTORE_WEBHOOK_URLS's URL {number} is http://127.0.0.1:9 "
            f"(subscriber {subscriber_key(url)})"
        ) in stderr
    for secret in ("hunter2", "k3y", "/hooks", "/elsewhere"):
        assert secret not in stderr


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://u:p@Shop.Example:8443/in?k=v#f", "https://shop.example:8443"),
        ("http://[::1]:9000/h", "http://[::1]:9000"),
        ("http://hooks.example/", "http://hooks.example"),
    ],
)
def test_origin(url, named):
    assert origin(url) == named


def test_a_slow_subscriber_holds_up_no_other(receiver):
    with WebhookReceiver() as slow:
        slow.hold()
        running = Running([slow.url, receiver.url], timeout=PATIENCE)
        try:
            for plant_id in range(3 * SENDERS):
                running.store.add(plant_id, FERN)
            assert receiver.wait_for(lambda got: len(got) == 3 * SENDERS, PATIENCE)
            assert running.failed() == 0
            assert slow.wait_for(lambda got: slow.attempts == SENDERS, PATIENCE)
            slow.release()
            assert slow.wait_for(lambda got: len(got) == 3 * SENDERS, PATIENCE)
        finally:
            running.deliverer.stop()
    assert receiver.events().keys() == slow.events().keys()


def test_senders_keep_their_connections(running, receiver):
    """A short answer's body is read, so that its connection carries the next delivery."""
    for plant_id in range(3 * SENDERS):
        running.store.add(plant_id, FERN)
    assert receiver.wait_for(lambda got: len(got) == 3 * SENDERS, PATIENCE)
    assert receiver.connections <= SENDERS


@pytest.mark.parametrize("running", [{"timeout": 0.5}], indirect=True)
def test_stop_ends_within_the_timeout_and_leaves_the_undelivered(running, receiver):
    receiver.hold()
    running.store.add(1, FERN)
    assert receiver.wait_for(lambda got: receiver.attempts == 1, PATIENCE)
    started = time.monotonic()
    running.deliverer.stop()
    assert time.monotonic() - started < 0.5 + 1.0
    assert running.store.oldest() is not None
    receiver.release()
    # The next start (its claim run out, as after a restart) delivers it.
    running.clock.advance(2 * 0.5 + 5.0)
    running.deliverer = running.start()
    wait_until(lambda: running.store.oldest() is None)
    # The attempt that timed out reached the subscriber too: it tells them apart by id.
    assert len(receiver.events()) == 1


def test_the_oldest_pending_event_is_measured(worker_app, receiver):
    client = service(worker_app, "memory://", [receiver.url])
    gauge = "plantstore_webhook_oldest_pending_seconds"
    assert sample(client, gauge) == 0
    receiver.hold()
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
    made = time.time()
    assert receiver.wait_for(lambda got: receiver.attempts == 1, PATIENCE)
    wait_until(lambda: sample(client, gauge) > 0)
    assert sample(client, gauge) <= time.time() - made + 1
    receiver.release()
    wait_until(lambda: sample(client, gauge) == 0)


def test_each_event_is_signed_once_per_attempt_with_the_same_body(running, receiver):
    receiver.answer(500)
    running.store.add(1, FERN)
    running.wait_for_failures(1)
    receiver.answer(200)
    running.later(1.0)
    assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    (delivery,) = receiver.deliveries
    assert orjson.loads(running.store.add(1, FERN)) == {"name": "fern", "tag": "green"}
    assert delivery.event["data"] == {"id": 1, "name": "fern", "tag": "green"}


def test_the_service_tells_of_every_change_it_answered_and_only_those(
    worker_app, receiver, store_url
):
    client = service(worker_app, store_url, [receiver.url])
    sent, failed = sample(client, SENT), sample(client, FAILED)
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
    assert client.simulate_post("/plants", json={"id": 1, "name": "rose"}).status_code == 409
    assert client.simulate_delete("/plants/2").status_code == 404
    assert client.simulate_delete("/plants/1").status_code == 204
    assert receiver.wait_for(lambda got: len(got) == 2, PATIENCE)
    by_type = {delivery.event["type"]: delivery.event for delivery in receiver.deliveries}
    created, deleted = by_type["plant.created"], by_type["plant.deleted"]
    assert (created["type"], created["data"]) == ("plant.created", {"id": 1, "name": "fern"})
    assert (deleted["type"], deleted["data"]) == ("plant.deleted", {"id": 1})
    wait_until(lambda: sample(client, SENT) == sent + 2)
    assert sample(client, "plantstore_webhook_oldest_pending_seconds") == 0
    assert sample(client, FAILED) == failed


def test_a_put_tells_of_the_plant_it_made_or_changed_and_of_nothing_else(
    store_url, worker_app, receiver
):
    """Each event as its schema declares it, and a plant's events in the order of its changes
    by `timestamp`, as a subscriber orders them."""
    client = service(worker_app, store_url, [receiver.url])
    sent = sample(client, SENT)

    def put(plant, headers=None, status=200):
        result = client.simulate_put("/plants/1", json=plant, headers=headers)
        assert result.status_code == status
        return result.headers.get("etag")

    read = put({"name": "fern", "tag": "green"}, status=201)
    assert put({"name": "fern", "tag": "green"}) == read
    changed = put({"name": "rose", "tag": "red"}, {"If-Match": read})
    put({"name": "ivy"}, {"If-Match": read}, status=412)
    put({"name": "ivy"}, {"If-None-Match": "*"}, status=412)
    assert client.simulate_delete("/plants/1", headers={"If-Match": read}).status_code == 412
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 409
    assert client.simulate_post("/plants", json={"id": 1, **ROSE}).status_code == 200
    untagged = put({"name": "ivy"}, {"If-Match": changed})
    assert client.simulate_delete("/plants/1", headers={"If-Match": untagged}).status_code == 204
    assert client.simulate_post("/plants", json={"id": 2, "name": "fern"}).status_code == 200
    assert client.simulate_put("/plants/2", json={"name": "fern"}).status_code == 200

    wait_until(lambda: sample(client, SENT) == sent + 5)
    assert sample(client, "plantstore_webhook_oldest_pending_seconds") == 0
    events = list(receiver.events().values())
    assert len(events) == 5
    history = [
        (PlantCreatedSchema, {"id": 1, "name": "fern", "tag": "green"}),
        (PlantUpdatedSchema, {"id": 1, **ROSE}),
        (PlantUpdatedSchema, {"id": 1, "name": "ivy"}),
        (PlantDeletedSchema, {"id": 1}),
    ]
    loaded = [one_loaded(events, schema, data) for schema, data in history]
    stamps = [event["timestamp"] for event in loaded]
    assert stamps == sorted(stamps)
    one_loaded(events, PlantCreatedSchema, {"id": 2, "name": "fern"})


def one_loaded(events: list[dict], schema, data: dict) -> dict:
    """The one event of `events` with this `data` that `schema` loads, loaded."""
    (event,) = [event for event in events if event["data"] == data and not schema().validate(event)]
    return schema().load(event)


def test_a_request_never_waits_for_a_delivery(worker_app, receiver):
    receiver.hold()
    client = service(worker_app, "memory://", [receiver.url])
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
    assert receiver.wait_for(lambda got: receiver.attempts == 1, PATIENCE)
    assert client.simulate_post("/plants", json={"id": 2, "name": "ivy"}).status_code == 200
    assert client.simulate_delete("/plants/1").status_code == 204
    assert receiver.deliveries == []
    receiver.release()
    assert receiver.wait_for(lambda got: len(got) == 3, PATIENCE)


def test_without_urls_no_delivery_runs_and_no_event_is_kept(worker_app):
    before = set(threading.enumerate())
    client = service(worker_app, "memory://", [])
    assert client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
    started = [thread.name for thread in set(threading.enumerate()) - before]
    assert not [name for name in started if name.startswith("plantstore-webhooks")]
    assert "plantstore_webhook_oldest_pending_seconds 0.0" in client.simulate_get("/metrics").text


class RetriesNoted(MemoryStore):
    """A memory store that notes the time each retry is put off until."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.retries: list[float] = []

    def retry(self, delivery, at: float) -> None:
        self.retries.append(at)
        super().retry(delivery, at)


def test_a_retry_waits_a_random_time_up_to_the_backoff(receiver):
    """Full jitter, by default: each wait is drawn from [0, backoff], so that deliveries that
    failed together (a subscriber's outage) do not all come back at once."""
    receiver.answer(500)
    wake = threading.Event()
    store = RetriesNoted(keys([receiver.url]), waking(wake))
    # The clock stands still, a second ahead: every event made now is due, each wait is
    # exactly its retry's time less `now`, and no retry comes due.
    now = time.time() + 1.0
    deliverer = Deliverer(
        store,
        [receiver.url],
        wake,
        Webhook(SECRET),
        timeout=2.0,
        give_up_after=3600.0,
        clock=lambda: now,
    )
    deliverer.start()
    try:
        for plant_id in range(20):
            store.add(plant_id, FERN)
        wait_until(lambda: len(store.retries) == 20)
    finally:
        deliverer.stop()
    waits = [at - now for at in store.retries]
    assert all(0 <= wait <= backoff(1) for wait in waits)
    # All 20 in one half of the range would come once in half a million runs.
    assert min(waits) < backoff(1) / 2 < max(waits)


@pytest.mark.parametrize(
    ("attempts", "ceiling"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (12, 2048.0), (13, 3600.0), (10**6, 3600.0)],
)
def test_the_backoff_doubles_up_to_an_hour(attempts, ceiling):
    assert backoff(attempts) == ceiling


def documented_subscriber() -> str:
    """The subscriber the interface page's Webhooks section shows."""
    page = (ROOT / "docs/interface.md").read_text()
    section = re.split(r"^## Webhooks\n", page, flags=re.M)[1]
    return re.search(r"```python\n(.+?)```", section, flags=re.S)[1]


@pytest.mark.slow
def test_the_documented_subscriber_verifies_each_event_and_refuses_a_forgery(worker_app):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    code = documented_subscriber().replace('("127.0.0.1", 9000)', f'("127.0.0.1", {port})')
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
    ) as subscriber:
        lines = queue.SimpleQueue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in subscriber.stdout])
        reader.start()
        try:
            client = service(worker_app, "memory://", [f"http://127.0.0.1:{port}/"])
            assert (
                client.simulate_post("/plants", json={"id": 1, "name": "fern"}).status_code == 200
            )
            assert client.simulate_delete("/plants/1").status_code == 204
            printed = {lines.get(timeout=PATIENCE), lines.get(timeout=PATIENCE)}
            assert printed == {
                "plant.created {'id': 1, 'name': 'fern'}\n",
                "plant.deleted {'id': 1}\n",
            }
            forged = urllib3.request(
                "POST",
                f"http://127.0.0.1:{port}/",
                body=b'{"type":"plant.deleted","data":{"id":2}}',
                headers={
                    "webhook-id": "msg_1",
                    "webhook-timestamp": str(int(time.time())),
                    "webhook-signature": "v1,Zm9yZ2Vk",
                },
                retries=False,
            )
            assert forged.status == 400
        finally:
            subscriber.kill()
            reader.join()
    assert lines.empty()


class FlakyStore(MemoryStore):
    """A memory store whose outbox cannot be read while `down`: it raises `failure`."""

    def __init__(self, failure: Exception, *args) -> None:
        super().__init__(*args)
        self.failure = failure
        self.down = True
        self.refused = 0

    def claim(self, *args):
        if self.down:
            self.refused += 1
            raise self.failure
        return super().claim(*args)


def flaky(running: Running, failure: Exception, url: str) -> None:
    """Run the deliverer on a flaky store instead."""
    running.deliverer.stop()
    running.store = FlakyStore(failure, keys([url]), waking(running.wake))
    running.deliverer = running.start()


def test_an_unexpected_failure_to_claim_is_logged_once_and_delivery_goes_on(receiver, caplog):
    running = Running([receiver.url])
    flaky(running, sqlite3.DatabaseError("database disk image is malformed"), receiver.url)
    try:
        for times in range(1, 3):
            running.wake.set()
            wait_until(lambda times=times: running.store.refused >= times)
        running.store.down = False
        running.store.add(1, FERN)
        assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    finally:
        running.deliverer.stop()
    first, back = caplog.records
    assert first.getMessage() == "webhooks: the outbox cannot be read"
    assert "database disk image is malformed" in caplog.text
    assert back.getMessage() == "webhooks: the outbox can be read again"


def test_an_outbox_out_of_reach_is_logged_once_and_its_return_too(receiver, caplog):
    running = Running([receiver.url])
    flaky(running, StoreUnavailable("PostgreSQL: connection refused"), receiver.url)
    try:
        for times in range(1, 4):
            running.wake.set()
            wait_until(lambda times=times: running.store.refused >= times)
        running.store.down = False
        running.store.add(1, FERN)
        assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    finally:
        running.deliverer.stop()
    assert [record.getMessage() for record in caplog.records] == [
        "webhooks: the outbox cannot be read now: PostgreSQL: connection refused",
        "webhooks: the outbox can be read again",
    ]


def test_urls_on_one_host_keep_a_connection_for_each_sender(receiver, caplog):
    """Else urllib3 would warn that its pool is full, and drop connections it could keep."""
    running = Running([receiver.url, f"{receiver.url}?list=2"])
    try:
        receiver.hold()
        for plant_id in range(SENDERS):
            running.store.add(plant_id, FERN)
        assert receiver.wait_for(lambda got: receiver.attempts == 2 * SENDERS, PATIENCE)
        receiver.release()
        assert receiver.wait_for(lambda got: len(got) == 2 * SENDERS, PATIENCE)
        wait_until(lambda: running.store.oldest() is None)
    finally:
        running.deliverer.stop()
    assert caplog.records == []


@pytest.mark.slow
def test_under_gunicorn_the_webhook_metrics_count_every_worker(tmp_path, receiver):
    """Two workers share a SQLite outbox; a scrape, whichever answers it, counts both."""
    server, _ = sqlite_workers(
        tmp_path,
        2,
        PLANTSTORE_WEBHOOK_URLS=receiver.url,
        PLANTSTORE_WEBHOOK_SECRET=SECRET,
    )
    plants = 12
    try:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        for n in range(plants):
            body = orjson.dumps({"id": n, "name": "fern"})
            assert server.request("POST", "/plants", body, headers=headers)[0] == 200
        assert receiver.wait_for(lambda got: len(got) == plants, PATIENCE)
        wait_until(
            lambda: scrape_server(server)[("plantstore_webhook_events_sent_total",)] == plants
        )
        samples = scrape_server(server)
        assert samples[("plantstore_webhook_oldest_pending_seconds",)] == 0
        assert samples[("plantstore_webhook_events_failed_total",)] == 0
    finally:
        server.stop()
    assert len(receiver.events()) == plants


@pytest.mark.slow
def test_at_debug_level_the_log_names_no_subscribers_path_or_query(tmp_path, receiver):
    """urllib3 logs each request's path and query at debug level; a query may hold a secret."""
    url = f"{receiver.url}?token=querysecret"
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN,
            PLANTSTORE_WEBHOOK_URLS=url,
            PLANTSTORE_WEBHOOK_SECRET=SECRET,
        ),
        "--log-level=debug",
    )
    try:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        body = orjson.dumps({"id": 1, "name": "fern"})
        assert server.request("POST", "/plants", body, headers=headers)[0] == 200
        assert receiver.wait_for(lambda got: len(got) == 1, PATIENCE)
    finally:
        _, stderr = server.stop()
    assert "[DEBUG]" in stderr
    assert "querysecret" not in stderr
    assert "/hooks" not in stderr
