"""The outbox contract: the same assertions against the memory, SQLite and PostgreSQL stores."""

import sqlite3
import threading
import time
from datetime import UTC, datetime

import orjson
import psycopg
import pytest

from plantstore.core.plants import ConditionFailed, Put
from plantstore.core.stores import StoreUnavailable
from plantstore.stores import open_store
from plantstore.stores.postgres import PostgresStore
from plantstore.testing.feed import events_of
from tests.support.concurrency import at_once

#: Subscribers' keys, as the deliverer names them (`subscriber_key`).
SUBSCRIBERS = ("3f2a9c1b0d4e5f67", "0123456789abcdef")
FERN = b'{"name":"fern","tag":"green"}'
RESPELLED_FERN = b'{"tag":"green","name":"fern"}'
ROSE = b'{"name":"rose"}'
#: Far enough ahead that nothing claimed in a test is due again before it ends.
LATER = 60.0


class Outboxes:
    """Stores with subscribers on one empty database, and the events they announced."""

    def __init__(self, store_url: str) -> None:
        self._url = store_url
        self._opened = []
        self.announced = threading.Semaphore(0)

    def open(self, subscribers=SUBSCRIBERS):
        store = open_store(self._url, subscribers, self._announce)
        self._opened.append(store)
        return store

    def _announce(self, changes: int, events: int) -> None:
        """A store's `on_commit`: each commit that wrote events is an announcement."""
        if events:
            self.announced.release()

    def close(self) -> None:
        for store in self._opened:
            store.close()

    def announcements(self) -> int:
        count = 0
        while self.announced.acquire(blocking=False):
            count += 1
        return count


@pytest.fixture
def outboxes(store_url):
    opened = Outboxes(store_url)
    yield opened
    opened.close()


@pytest.fixture
def outbox(outboxes):
    return outboxes.open()


def never(kept: bytes | None) -> bool:
    """A condition that never holds."""
    return False


def claim(outbox, now, lease_until, limit=1000):
    """Claim for each subscriber in turn."""
    return [d for key in SUBSCRIBERS for d in outbox.claim(key, now, lease_until, limit)]


def claim_all(outbox, now=None):
    now = time.time() if now is None else now
    return claim(outbox, now, now + LATER)


def test_a_created_plant_is_an_event_for_each_subscriber(outboxes, outbox):
    before = time.time()
    outbox.add(7, FERN)
    deliveries = claim_all(outbox)
    assert [delivery.subscriber for delivery in deliveries] == list(SUBSCRIBERS)
    first, second = deliveries
    assert first.webhook_id == second.webhook_id
    (event,) = events_of(outbox.events(None, 10))
    assert first.webhook_id == event.id
    assert first.body == second.body
    assert (first.attempts, second.attempts) == (0, 0)
    assert first.created_at == second.created_at
    assert before <= first.created_at <= time.time()
    event = orjson.loads(first.body)
    assert event == {
        "type": "plant.created",
        "timestamp": event["timestamp"],
        "data": {"id": 7, "name": "fern", "tag": "green"},
    }
    stamp = datetime.strptime(event["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs(stamp.timestamp() - first.created_at) < 0.001
    assert outboxes.announcements() == 1


def test_a_deleted_plant_is_an_event_for_each_subscriber(outboxes, outbox):
    outbox.add(-5, ROSE)
    for delivery in claim_all(outbox):
        outbox.forget(delivery)
    outboxes.announcements()
    assert outbox.delete(-5) is True
    deliveries = claim_all(outbox)
    assert [delivery.subscriber for delivery in deliveries] == list(SUBSCRIBERS)
    assert {orjson.loads(delivery.body)["type"] for delivery in deliveries} == {"plant.deleted"}
    assert orjson.loads(deliveries[0].body)["data"] == {"id": -5}
    assert outboxes.announcements() == 1


def test_a_put_is_an_event_of_what_it_did_in_the_order_it_did_it(outboxes, outbox):
    """One that keeps a plant under a free id, one that replaces it, and a conditional delete."""
    assert outbox.put(7, FERN) == (Put.CREATED, FERN)
    assert outboxes.announcements() == 1
    assert outbox.put(7, ROSE, lambda kept: kept == FERN) == (Put.REPLACED, ROSE)
    assert outboxes.announcements() == 1
    assert outbox.delete(7, lambda kept: kept == ROSE) is True
    assert outboxes.announcements() == 1
    now = time.time()
    for subscriber in SUBSCRIBERS:
        deliveries = outbox.claim(subscriber, now, now + LATER, 10)
        events = [orjson.loads(delivery.body) for delivery in deliveries]
        assert [(event["type"], event["data"]) for event in events] == [
            ("plant.created", {"id": 7, "name": "fern", "tag": "green"}),
            ("plant.updated", {"id": 7, "name": "rose"}),
            ("plant.deleted", {"id": 7}),
        ]
        assert all(set(event) == {"type", "timestamp", "data"} for event in events)
        assert len({delivery.webhook_id for delivery in deliveries}) == 3


def test_what_changes_nothing_is_no_event(outboxes, outbox):
    """An identical repeat, another plant under a taken id (a 409), a delete of no plant, a put
    of the plant kept (however spelled), and changes whose condition fails."""
    outbox.add(1, FERN)
    for delivery in claim_all(outbox):
        outbox.forget(delivery)
    outboxes.announcements()
    assert outbox.add(1, FERN) == FERN
    assert outbox.add(1, ROSE) == FERN
    assert outbox.delete(2) is False
    assert outbox.put(1, FERN) == (Put.UNCHANGED, FERN)
    assert outbox.put(1, RESPELLED_FERN, lambda kept: kept == FERN) == (Put.UNCHANGED, FERN)
    for change in (
        lambda: outbox.put(1, ROSE, never),
        lambda: outbox.put(2, ROSE, never),
        lambda: outbox.delete(1, never),
        lambda: outbox.delete(2, never),
    ):
        with pytest.raises(ConditionFailed):
            change()
    assert claim_all(outbox) == []
    assert outbox.oldest() is None
    assert outboxes.announcements() == 0


def test_a_store_without_subscribers_writes_no_delivery(outboxes):
    silent = outboxes.open(subscribers=())
    silent.add(1, FERN)
    silent.delete(1)
    silent.put(1, FERN)
    silent.put(1, ROSE, lambda kept: kept == FERN)
    silent.delete(1, lambda kept: kept == ROSE)
    assert claim_all(outboxes.open()) == []


def test_a_claim_leases_its_deliveries_until_the_lease_runs_out(outbox):
    outbox.add(1, FERN)
    now = time.time()
    claimed = claim(outbox, now, now + 30)
    assert len(claimed) == 2
    assert claim(outbox, now, now + 30) == []
    assert claim(outbox, now + 29, now + 60) == []
    assert claim(outbox, now + 30, now + 60) == claimed


def test_a_claim_takes_at_most_its_limit_of_its_subscriber_in_id_order(outbox):
    for plant_id in range(3):
        outbox.add(plant_id, FERN)
    now = time.time()
    first = outbox.claim(SUBSCRIBERS[1], now, now + LATER, 2)
    rest = outbox.claim(SUBSCRIBERS[1], now, now + LATER, 2)
    assert (len(first), len(rest)) == (2, 1)
    assert outbox.claim(SUBSCRIBERS[1], now, now + LATER, 2) == []
    ids = [delivery.id for delivery in first + rest]
    assert ids == sorted(ids)
    assert {delivery.subscriber for delivery in first + rest} == {SUBSCRIBERS[1]}
    created = [orjson.loads(delivery.body)["data"]["id"] for delivery in first + rest]
    assert created == [0, 1, 2]
    assert len(outbox.claim(SUBSCRIBERS[0], now, now + LATER, 10)) == 3


def test_the_earliest_due_are_claimed_first(outbox):
    outbox.add(1, FERN)
    outbox.add(2, FERN)
    now = time.time()
    first, second = outbox.claim(SUBSCRIBERS[0], now, now + LATER, 10)
    outbox.retry(first, now + 2)
    outbox.retry(second, now + 1)
    assert outbox.claim(SUBSCRIBERS[0], now + 2, now + LATER, 1) == [second._replace(attempts=1)]


def test_a_retry_counts_the_attempt_and_is_due_at_its_time(outbox):
    outbox.add(1, FERN)
    now = time.time()
    delivery, _other = claim(outbox, now, now + LATER)
    outbox.retry(delivery, now + 5)
    assert claim(outbox, now + 4.9, now + LATER) == []
    (again,) = claim(outbox, now + 5, now + LATER)
    assert again.id == delivery.id
    assert again.attempts == 1
    assert (again.webhook_id, again.body, again.subscriber) == (
        delivery.webhook_id,
        delivery.body,
        delivery.subscriber,
    )
    outbox.retry(again, now + 6)
    assert claim(outbox, now + 6, now + LATER)[0].attempts == 2


def test_a_forgotten_delivery_is_gone_and_oldest_follows(outbox):
    assert outbox.oldest() is None
    outbox.add(1, FERN)
    first_made = claim_all(outbox)[0].created_at
    outbox.add(2, ROSE)
    assert outbox.oldest() == first_made
    for delivery in claim_all(outbox, now=time.time() + LATER):
        if orjson.loads(delivery.body)["data"]["id"] == 1:
            outbox.forget(delivery)
    assert outbox.oldest() > first_made
    for delivery in claim_all(outbox, now=time.time() + 2 * LATER):
        outbox.forget(delivery)
    assert outbox.oldest() is None
    assert claim_all(outbox, now=time.time() + 3 * LATER) == []


def test_claimers_at_once_never_share_a_delivery(outboxes, store_url):
    """Threads of one process, and with a shared database stores of several processes."""
    outboxes_count = 1 if store_url == "memory://" else 4
    stores = [outboxes.open() for _ in range(outboxes_count)]
    for plant_id in range(40):
        stores[0].add(plant_id, FERN)
    now = time.time()

    def claim_until_none(n: int) -> list[int]:
        store, key, claimed = stores[n % len(stores)], SUBSCRIBERS[n % 2], []
        while batch := store.claim(key, now, now + LATER, 3):
            claimed += [delivery.id for delivery in batch]
        return claimed

    claimed = [n for claims in at_once(8, claim_until_none) for n in claims]
    assert len(claimed) == len(set(claimed)) == 80


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_a_plant_and_its_event_commit_together_or_not_at_all(outboxes, store_url):
    """With the outbox gone, writing the event fails: the plant is not kept either."""
    store = outboxes.open()
    store.add(1, FERN)
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as connection:
            connection.execute("DROP TABLE outbox")
    else:
        with psycopg.connect(store_url, autocommit=True) as connection:
            connection.execute("DROP TABLE outbox")
    for change in (
        lambda: store.add(2, ROSE),
        lambda: store.delete(1),
        lambda: store.put(2, ROSE),
        lambda: store.put(1, ROSE, lambda kept: kept == FERN),
        lambda: store.delete(1, lambda kept: kept == FERN),
    ):
        with pytest.raises((StoreUnavailable, psycopg.Error)):
            change()
    assert store.get(2) is None
    assert store.get(1) == FERN
    # What writes no event goes on as before.
    assert store.put(1, FERN) == (Put.UNCHANGED, FERN)
    with pytest.raises(ConditionFailed):
        store.put(1, ROSE, never)
    assert store.get(1) == FERN
    assert outboxes.announcements() == 1


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_an_event_is_for_the_subscribers_listed_when_it_was_made(outboxes):
    """A subscriber added later gets the events made from then on; one dropped keeps its own."""
    before = outboxes.open(subscribers=SUBSCRIBERS[:1])
    before.add(1, FERN)
    after = outboxes.open(subscribers=SUBSCRIBERS[1:])
    after.add(2, FERN)
    made = before.oldest()
    assert after.oldest() == made
    now = time.time()
    (first,) = after.claim(SUBSCRIBERS[0], now, now + LATER, 10)
    (second,) = after.claim(SUBSCRIBERS[1], now, now + LATER, 10)
    assert orjson.loads(first.body)["data"]["id"] == 1
    assert orjson.loads(second.body)["data"]["id"] == 2
    assert first.created_at == made


def test_no_delivery_is_due_to_a_subscriber_never_listed(outbox):
    outbox.add(1, FERN)
    now = time.time()
    assert outbox.claim("ffffffffffffffff", now, now + LATER, 10) == []
    assert len(claim_all(outbox)) == 2


def test_postgresql_repeating_an_add_whose_commit_went_through_writes_no_second_event(
    postgres_url,
):
    """A client repeats a request answered 503 when the connection was lost, which may be
    after the commit, its answer lost: the repeat finds the plant, and makes no event."""
    store = PostgresStore(postgres_url, SUBSCRIBERS)
    try:
        assert store.add(1, FERN) == FERN
        assert store.add(1, FERN) == FERN
        assert store.delete(1) is True
        assert store.delete(1) is False
    finally:
        store.close()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        events = connection.execute("SELECT DISTINCT webhook_id FROM outbox").fetchall()
    assert len(events) == 2


def test_postgresql_a_claim_leases_no_more_than_its_limit_whatever_the_plan(postgres_url):
    """A claim polled on a drained outbox (its statistics as autovacuum leaves them) is
    prepared by psycopg with PostgreSQL's generic plan for an empty table. Written as
    `IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`, that plan runs the subquery again for
    each row and leases the whole backlog: the claim must lease what it hands out, no more."""
    store = PostgresStore(postgres_url, SUBSCRIBERS)
    try:
        store.add(0, FERN)
        now = time.time()
        for delivery in claim_all(store, now):
            store.forget(delivery)
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute("VACUUM ANALYZE outbox")
        for _ in range(30):  # polling: psycopg prepares, then PostgreSQL plans generically
            assert store.claim(SUBSCRIBERS[0], time.time(), time.time() + LATER, 4) == []
        for plant_id in range(1, 21):
            store.add(plant_id, FERN)
        now = time.time()
        handed = [store.claim(SUBSCRIBERS[0], now, now + LATER, 2) for _ in range(3)]
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            (leased,) = connection.execute(
                "SELECT count(*) FROM outbox WHERE subscriber = %s AND next_attempt_at > %s",
                (SUBSCRIBERS[0], now),
            ).fetchone()
    finally:
        store.close()
    assert [len(claimed) for claimed in handed] == [2, 2, 2]
    assert leased == 6
