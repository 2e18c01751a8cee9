"""A store in a dict: fast, and gone with the process."""

import threading


class MemoryStore:
    """Plants in a dict, for one process; its threads share it safely.

    Keys are ints and values bytes, neither of which the garbage collector tracks, so a store
    of millions of plants adds nothing to collection pauses.
    """

    def __init__(self) -> None:
        self._plants: dict[int, bytes] = {}
        self._lock = threading.Lock()

    def add(self, plant_id: int, plant: bytes) -> bytes:
        # A copy of just its length: orjson's bytes keep the whole buffer it wrote into (4 KiB
        # at least), so kept as they are, a million plants would hold 4 GiB instead of 100 MiB.
        with self._lock:
            return self._plants.setdefault(plant_id, bytes(memoryview(plant)))
