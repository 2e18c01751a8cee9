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
        # Keep a right-sized copy: bytes made by orjson hold on to its whole 4 KiB buffer.
        compact = bytes(memoryview(plant))
        with self._lock:
            return self._plants.setdefault(plant_id, compact)

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to let go of: the plants go with the process."""
