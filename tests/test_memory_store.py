"""What only the memory store promises; the store contract suite covers the rest."""

import gc
import tracemalloc

import orjson

from plantstore.stores.memory import MemoryStore


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
