"""What only the memory store promises; the store contract suite covers the rest."""

import gc
import tracemalloc

import orjson

from plantstore.api.schemas import MAX_PAGE_BYTES
from plantstore.stores.memory import MemoryStore
from tests.stores.test_store_contract import race_adds_and_deletes


def add_plants(store: MemoryStore, count: int) -> None:
    for plant_id in range(10**6, 10**6 + count):
        store.add(plant_id, orjson.dumps({"name": f"plant-{plant_id}", "tag": "tree"}))


def test_a_stored_plant_costs_its_own_size_not_its_serializers_buffer():
    store = MemoryStore()
    tracemalloc.start()
    try:
        add_plants(store, 10_000)
        per_plant = tracemalloc.get_traced_memory()[0] / 10_000
    finally:
        tracemalloc.stop()
    assert per_plant < 200


def test_stored_plants_add_next_to_nothing_for_the_garbage_collector_to_walk():
    """A collection's pause grows with the objects it tracks: plants must not add to them."""
    store = MemoryStore()
    add_plants(store, 10)
    gc.collect()
    before = len(gc.get_objects())
    add_plants(store, 10_000)
    gc.collect()
    assert len(gc.get_objects()) - before < 100


def test_its_lock_keeps_plants_and_their_indexes_in_step_under_racing_threads():
    """Its races are between a few bytecodes: they show in a run only over many rounds."""
    race_adds_and_deletes([MemoryStore()], rounds=400)


class NoScans(dict):
    """The plants' dict, refusing to be walked: a page must come from the sorted indexes."""

    def __iter__(self):
        raise AssertionError("a page walked every plant")

    keys = values = items = __iter__


def test_a_page_is_read_from_the_sorted_indexes_not_from_every_plant():
    store = MemoryStore()
    for plant_id in range(10):
        store.add(
            plant_id, orjson.dumps({"name": "fern", "tag": "odd" if plant_id % 2 else "even"})
        )
    store._plants = NoScans(store._plants)
    assert [plant_id for plant_id, _ in store.page(3, 2, None, MAX_PAGE_BYTES).plants] == [4, 5]
    assert [plant_id for plant_id, _ in store.page(3, 2, "odd", MAX_PAGE_BYTES).plants] == [5, 7]
