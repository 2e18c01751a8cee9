"""The store contract: the same assertions against the memory, SQLite and PostgreSQL stores."""

import threading
from collections.abc import Callable

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plantstore.schemas import INT64_MAX, INT64_MIN, PlantSchema
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore

FERN = b'{"name":"fern"}'
ROSE = b'{"name":"rose","tag":"red"}'


def document(name: str, tag: str | None = None) -> bytes:
    """The plant as the service keeps it: its `Plant` body, as orjson writes it."""
    plant = {"name": name} if tag is None else {"name": name, "tag": tag}
    return orjson.dumps(PlantSchema().dump(plant))


def test_add_keeps_the_first_plant_under_an_id(any_store):
    assert any_store.add(1, FERN) == FERN
    assert any_store.add(1, ROSE) == FERN
    assert any_store.add(2, ROSE) == ROSE
    assert any_store.add(1, FERN) == FERN


@pytest.mark.parametrize("plant_id", [INT64_MIN, -1, 0, 1, INT64_MAX])
def test_every_int64_is_an_id_of_its_own(any_store, plant_id):
    assert any_store.add(plant_id, FERN) == FERN
    assert any_store.add(plant_id, ROSE) == FERN
    assert any_store.add(plant_id ^ 1, ROSE) == ROSE


@pytest.mark.parametrize(
    "text",
    [
        "\u0000",
        "Fußnote 🌿 日本 \u2028\u2029",
        "\ufeffbom",
        "עברית and العربية",
        "e\u0301 \U0010ffff",
        "'); DROP TABLE plants; --",
        '\\"quoted\\" \\\\ back',
        "x" * 60_000,
    ],
)
def test_any_unicode_comes_back_byte_for_byte(any_store, text):
    plant = document(text, tag=text)
    assert any_store.add(7, plant) == plant
    assert any_store.add(7, document(text)) == plant
    assert any_store.add(7, plant) == plant


def contend_for_one_id(add_for: Callable[[int], Callable[[int, bytes], bytes]]) -> None:
    """Let 16 threads add a plant of their own under one id at once; assert one won for all.

    Thread `n` adds through `add_for(n)`, so that contenders may use stores of their own.
    """
    contenders = 16
    start = threading.Barrier(contenders)
    kept = []

    def contend(n):
        plant = document(f"plant-{n}")
        start.wait()
        kept.append((plant, add_for(n)(42, plant)))

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [plant for plant, answer in kept if plant == answer]
    assert len(winners) == 1
    assert {answer for _, answer in kept} == set(winners)


def test_concurrent_adds_of_one_id_have_one_winner(any_store):
    contend_for_one_id(lambda n: any_store.add)


def test_a_store_that_can_serve_is_ready(any_store):
    assert any_store.ready()


new_plants = st.tuples(
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX) | st.integers(min_value=0, max_value=5),
    st.text(),
    st.none() | st.text(),
)


@pytest.fixture
def model():
    """What every store must answer: the memory store, the simplest that keeps the contract."""
    return MemoryStore()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests=st.lists(new_plants, max_size=8))
def test_every_store_answers_a_sequence_of_adds_as_the_model_does(any_store, model, requests):
    """Any valid plants, whatever unicode they hold, with ids that often repeat.

    The store and the model live for the whole test, so later examples meet earlier plants.
    """
    for plant_id, name, tag in requests:
        plant = document(name, tag)
        assert any_store.add(plant_id, plant) == model.add(plant_id, plant)


shared = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)


@shared
def test_plants_outlive_the_store_that_kept_them(store_url):
    first = open_store(store_url)
    first.add(1, FERN)
    first.close()
    again = open_store(store_url)
    try:
        assert again.add(1, ROSE) == FERN
    finally:
        again.close()


@shared
def test_stores_on_one_database_agree_on_one_winner(store_url):
    """As gunicorn's processes do: each has a store of its own on the same database."""
    stores = [open_store(store_url) for _ in range(4)]
    try:
        contend_for_one_id(lambda n: stores[n % len(stores)].add)
    finally:
        for store in stores:
            store.close()
