"""The real gunicorn under a minute of concurrent creates: every answer 200, a quiet log, and
memory that grows by the stored plants alone."""

import re
import tracemalloc
from pathlib import Path

import pytest

from plantstore.stores.memory import MemoryStore
from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from plantstore.testing.wrk import generate_load

pytestmark = pytest.mark.slow

TOKEN = "load-token"
#: What allocators may add to the bytes of the stored plants (arenas, pages, dict tables left
#: behind by a resize), and a little more for buffers: a leak of 100 bytes a request is over it.
ALLOCATOR_OVERHEAD, MEMORY_SLACK = 1.5, 4 * 2**20


def plant(plant_id: int) -> bytes:
    """The document the service keeps for a plant of the load (`plantstore.testing.wrk`)."""
    return b'{"name":"plant-%d","tag":"tree"}' % plant_id


def store_growth(ids: list[int], kept: list[int]) -> int:
    """The bytes a MemoryStore holding `kept` grows by when it keeps `ids` as well."""
    store = MemoryStore()
    for plant_id in kept:
        store.add(plant_id, plant(plant_id))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for plant_id in ids:
            store.add(plant_id, plant(plant_id))
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def rss_bytes(pid: int) -> int:
    """The resident memory of a process, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for process {pid}")


def test_a_minute_of_creates(tmp_path, note_figure):
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN), log_dir=tmp_path)
    try:
        warm_up = generate_load(server.port, TOKEN, tmp_path, seconds=3)
        (worker,) = server.worker_pids()
        rss_before = rss_bytes(worker)
        load = generate_load(server.port, TOKEN, tmp_path, seconds=60)
        rss_after = rss_bytes(worker)
        assert server.worker_pids() == [worker]
    finally:
        access_log, error_log = server.stop()

    expected = store_growth(load.acked, kept=warm_up.acked)
    note_figure(
        f"load: {load.requests} creates in {load.seconds:.0f} s "
        f"({load.requests / load.seconds:.0f}/s, p99 {load.latency_p99_ms:.1f} ms), "
        f"{load.requests - len(load.acked)} not 200, socket errors {load.errors}; "
        f"worker RSS +{(rss_after - rss_before) / 2**20:.1f} MiB for "
        f"{expected / 2**20:.1f} MiB of plants"
    )
    assert load.requests > 0
    assert len(load.acked) == load.requests
    assert load.other_statuses == {}
    assert load.errors == {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    assert not re.search(r"\[(WARNING|ERROR|CRITICAL)\]|Traceback", error_log)
    statuses = re.findall(r" status=(\d+) ", access_log)
    assert set(statuses) == {"200"}
    assert len(statuses) >= len(warm_up.acked) + len(load.acked)
    assert rss_after - rss_before <= expected * ALLOCATOR_OVERHEAD + MEMORY_SLACK
