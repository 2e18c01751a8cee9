"""/readyz costs the store one question a second per worker, and stays true under load."""

import sqlite3

import falcon
import falcon.testing
import pytest

from plantstore.core.stores import StoreUnavailable
from plantstore.operations.health import READY_ANSWER_SECONDS, Readiness, ReadinessCheck
from plantstore.stores import sqlite as sqlite_store
from plantstore.stores.memory import MemoryStore
from plantstore.stores.sqlite import SqliteStore
from tests.support.clock import Clock


class AskedStore(MemoryStore):
    """A memory store that counts how often it is asked whether it is ready, and can say no."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0
        self.failure: StoreUnavailable | None = None

    def check_ready(self) -> None:
        self.asked += 1
        if self.failure is not None:
            raise self.failure


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store():
    return AskedStore()


@pytest.fixture
def probe(store, clock):
    app = falcon.App()
    app.add_route("/readyz", Readiness(ReadinessCheck(store, clock)))
    client = falcon.testing.TestClient(app)
    return lambda: client.simulate_get("/readyz").status_code


def test_the_store_is_asked_once_a_second_however_often_probes_come(store, clock, probe):
    assert [probe() for _ in range(50)] == [200] * 50
    assert store.asked == 1
    clock.now += READY_ANSWER_SECONDS
    assert probe() == 200
    assert store.asked == 2


def test_a_store_that_stops_serving_is_not_ready_at_the_next_question(store, clock, probe, caplog):
    assert probe() == 200
    store.failure = StoreUnavailable("the disk is full")
    assert probe() == 200  # the answer of a moment ago
    clock.now += READY_ANSWER_SECONDS
    assert [probe(), probe()] == [503, 503]
    store.failure = None
    clock.now += READY_ANSWER_SECONDS
    assert probe() == 200
    assert [record.getMessage() for record in caplog.records] == [
        "not ready: the disk is full",
        "ready again",
    ]


def test_sqlite_busy_with_writes_is_ready_while_another_holds_the_lock(tmp_path, monkeypatch):
    """Under load the write lock is always someone's: not having it within the probe's time is
    no trouble while the store's own writes go through, or readiness would flap."""
    path = tmp_path / "plants.db"
    store = SqliteStore(str(path))
    other_process = sqlite3.connect(path, isolation_level=None)
    try:
        store.add(1, b'{"name":"fern"}')
        other_process.execute("BEGIN IMMEDIATE")
        store.check_ready()
        monkeypatch.setattr(sqlite_store, "WROTE_RECENTLY_SECONDS", 0)
        with pytest.raises(StoreUnavailable, match="database is locked"):
            store.check_ready()
    finally:
        other_process.close()
        store.close()
