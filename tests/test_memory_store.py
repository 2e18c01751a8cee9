import gc
import threading
import tracemalloc

import orjson

from plantstore.stores.memory import MemoryStore


def test_add_keeps_the_first_plant_under_an_id():
    store = MemoryStore()
    assert store.add(1, b'{"name":"fern"}') == b'{"name":"fern"}'
    assert store.add(1, b'{"name":"rose"}') == b'{"name":"fern"}'
    assert store.add(2, b'{"name":"rose"}') == b'{"name":"rose"}'


def test_concurrent_adds_of_one_id_have_one_winner():
    store = MemoryStore()
    contenders = 16
    start = threading.Barrier(contenders)
    kept = []

    def contend(n):
        plant = b'{"name":"plant-%d"}' % n
        start.wait()
        kept.append((plant, store.add(7, plant)))

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [plant for plant, answer in kept if plant == answer]
    assert len(winners) == 1
    assert {answer for _, answer in kept} == set(winners)


def test_stored_plants_are_not_tracked_by_the_garbage_collector():
    store = MemoryStore()
    store.add(1, b'{"name":"fern"}')
    assert not any(gc.is_tracked(obj) for obj in (*store._plants, *store._plants.values()))


def test_a_plant_costs_its_own_size_not_its_serializers_buffer():
    store = MemoryStore()
    tracemalloc.start()
    try:
        for plant_id in range(1000):
            store.add(plant_id, orjson.dumps({"name": f"plant-{plant_id}"}))
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert used < 1000 * 200
