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


def test_stored_plants_are_not_tracked_by_the_garbage_collector():
    store = MemoryStore()
    add_plants(store, 10)
    assert not any(gc.is_tracked(obj) for obj in (*store._plants, *store._plants.values()))
