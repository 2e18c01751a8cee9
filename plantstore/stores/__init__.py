"""Where plants are kept: the interface every store implements.

A plant is kept as its JSON document (UTF-8 bytes): the very body the service answers for it.
That form is compact, compares byte for byte for the duplicate rule, and is served as it is.
"""

from typing import Protocol


class PlantStore(Protocol):
    def add(self, plant_id: int, plant: bytes) -> bytes:
        """Keep `plant` under `plant_id` unless the id is taken; return what the id now holds.

        Check and insert are one atomic step: of concurrent calls for a new id, exactly one keeps
        its plant and every call returns that plant.
        """
        ...
