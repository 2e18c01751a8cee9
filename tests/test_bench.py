"""The benchmark still runs and still checks every answer (so it cannot rot).

The benchmark itself (`python -m bench`) is not part of the suite: these run a few requests of
every case, on small stores. The parts over loopback run for a second each under `-m slow`.
"""

import random
import subprocess
import sys
from itertools import count
from types import SimpleNamespace

import falcon.testing
import pytest

from bench import inprocess, pages, webhooks
from bench.environs import (
    AUTHORIZED,
    CONFIG,
    READER,
    InvalidRun,
    Replayer,
    create,
    replay,
    tag_of,
)
from bench.load import Creates, python_load
from bench.loopback import choose_setup
from bench.server import ROOT, Server, server_environ
from bench.stock import Stock, document, fill_postgres, fill_sqlite
from plantstore.app import create_app
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from tests.webhook_receiver import Delivery

#: The floor, and every case the bench holds to a target.
CASES = ["floor", *inprocess.CASES]
#: Store sizes of the page cases: each compares two stores, of 1,000 or 20,000 plants and 30,000.
SMALL, BIG = 1_000, 30_000


def case_named(name: str) -> inprocess.Case:
    return next(case for case in inprocess.cases() if case.name == name)


def test_the_in_process_part_measures_every_case():
    medians = inprocess.measure(rounds=2, batch=5)
    assert set(medians) == set(CASES)
    assert all(microseconds > 0 for microseconds in medians.values())


@pytest.mark.parametrize("name", CASES)
def test_each_case_gets_the_status_it_is_measured_for(name):
    case = case_named(name)
    replay(case.app, case.environs(count(), 3), case.expected)


def test_an_answer_with_another_status_makes_the_run_invalid():
    unauthorized = case_named("401")
    with pytest.raises(InvalidRun, match="POST /plants answered 401, not 200"):
        replay(unauthorized.app, unauthorized.environs(count(), 3), 200)


def test_every_success_creates_a_plant_of_its_own():
    success = case_named("success")
    replay(success.app, success.environs(count(), 3), 200)
    other_content = Replayer(AUTHORIZED).environ(b'{"id": 2, "name": "other"}')
    replay(success.app, [other_content], 409)


def test_the_webhooks_case_keeps_every_event_for_a_subscriber_that_never_answers():
    subscribed = case_named("webhooks")

    def figures() -> dict[str, float]:
        client = falcon.testing.TestClient(subscribed.app)
        lines = client.simulate_get("/metrics", headers=READER).text.splitlines()
        pairs = (line.split() for line in lines if line.startswith("plantstore_webhook"))
        return {name: float(value) for name, value in pairs}

    # The counters are the process's, which other tests may have added to.
    sent = figures()["plantstore_webhook_events_sent_total"]
    replay(subscribed.app, subscribed.environs(count(), 3), 200)
    assert figures()["plantstore_webhook_oldest_pending_seconds"] > 0
    assert figures()["plantstore_webhook_events_sent_total"] == sent


def test_a_delay_runs_from_an_events_commit_to_its_first_receipt():
    def delivery(webhook_id: str, plant_id: int, received: float) -> Delivery:
        event = {"type": "plant.created", "timestamp": "2025-01-01T00:00:00.250Z"}
        return Delivery(webhook_id, {**event, "data": {"id": plant_id}}, received, "/hooks", None)

    committed = 1735689600.25
    receiver = SimpleNamespace(
        deliveries=[
            delivery("msg_warm_up", -1, committed + 9),
            delivery("msg_b", 11, committed + 0.5),
            delivery("msg_a", 10, committed + 0.125),
            delivery("msg_b", 11, committed + 7),
        ]
    )
    assert webhooks.commit_to_receipt(receiver, first_id=0) == [0.125, 0.5]


def test_the_pages_part_measures_every_case_on_two_stores():
    medians = pages.in_process(SMALL, BIG, rounds=2, batch=3)
    assert list(medians) == [case.name for case in pages.CASES]
    assert [[plants for plants, _ in both] for both in medians.values()] == [
        [SMALL, BIG],
        [SMALL, BIG],
        [pages.TAG_PLANTS, BIG],
        [pages.TAG_PLANTS, BIG],
    ]
    assert all(microseconds > 0 for both in medians.values() for _, microseconds in both)


def test_a_page_short_of_the_limit_makes_the_run_invalid():
    app = create_app(CONFIG, MemoryStore())
    create(app, 0, pages.LIMIT - 1)
    with pytest.raises(InvalidRun, match="99 plants, not 200 with 100"):
        pages.check_pages(app, Stock(pages.LIMIT - 1), {"first page": ["limit=100"]})


def test_deep_pages_start_all_over_the_store():
    afters = [
        int(query.rpartition("after=")[2])
        for query in pages.CASES[1].queries(Stock(100_000), 1_000, random.Random(0))
    ]
    assert min(afters) < 10_000 and max(afters) > 90_000
    assert max(afters) < 100_000 - pages.LIMIT


def test_a_stocked_plant_is_what_the_service_keeps_for_it():
    store = MemoryStore()
    create(create_app(CONFIG, store), 0, 200)
    assert [(i, store.get(i)) for i in range(200)] == list(Stock(200).documents())
    assert {tag_of(i) for i in range(200)} == {f"t{i}" for i in range(100)}


def test_a_tag_fills_two_pages_of_the_small_store_of_its_pages():
    assert len(Stock(pages.TAG_PLANTS).ids(pages.TAG)) == 2 * pages.LIMIT


def assert_filled_like_the_service(url: str, stock: Stock) -> None:
    """The service answers every page case, full, and the plants as it would have made them."""
    store = open_store(url)
    try:
        app = create_app(CONFIG, store)
        rng = random.Random(0)
        pages.check_pages(app, stock, {c.name: c.queries(stock, 20, rng) for c in pages.CASES})
        ends = (0, stock.count - 1)
        assert [(i, store.get(i)) for i in ends] == [(i, document(i, tag_of(i))) for i in ends]
    finally:
        store.close()


def test_sqlite_is_filled_as_the_service_would_fill_it(tmp_path):
    path = tmp_path / "plants.db"
    fill_sqlite(str(path), Stock(pages.TAG_PLANTS))
    assert_filled_like_the_service(f"sqlite:///{path}", Stock(pages.TAG_PLANTS))


def test_postgresql_is_filled_as_the_service_would_fill_it(postgres_url):
    fill_postgres(postgres_url, Stock(pages.TAG_PLANTS))
    assert_filled_like_the_service(postgres_url, Stock(pages.TAG_PLANTS))


@pytest.mark.slow
def test_a_paced_load_sends_at_its_rate():
    with Server(None, server_environ(), "bench.floor:app") as server:
        server.warm_up(Creates(-10), requests=10)
        paced = python_load(server.port, Creates(0), seconds=1, connections=4, rate=50)
    assert paced.valid
    assert paced.requests in (50, 51)


@pytest.mark.slow
def test_every_event_of_a_paced_load_arrives_and_is_timed():
    setup = choose_setup("python")
    for store, delivery in webhooks.delivery(setup, rate=50, seconds=1, connections=4).items():
        assert delivery.valid, store
        assert len(delivery.delays) == delivery.paced.requests > 0, store
        assert 0 < delivery.delays[0] <= delivery.delays[-1] < 5, store
        assert delivery.delivered_per_second > 0, store


@pytest.mark.slow
def test_the_parts_over_loopback_run_and_every_answer_is_200():
    """Every server, load and check, for one second each, with the Python load generator."""
    arguments = ["--parts", "loopback", "loopback-webhooks", "delivery", "loopback-pages", "tail"]
    arguments += ["--generator", "python"]
    arguments += ["--loopback-rounds", "1", "--seconds", "1", "--plants", "30000"]
    done = subprocess.run(
        [sys.executable, "-m", "bench", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "INVALID" not in done.stdout
