"""A plant as the service keeps it: its JSON document (UTF-8 bytes), the very body it answers.

That form is compact and is served as it is, with no parse and no dump. Here too is what a
change may ask of what an id holds (`Condition`), what it did (`Put`), and a page of plants.
"""

from collections.abc import Callable, Iterable
from enum import Enum
from typing import NamedTuple

import orjson


class ConditionFailed(Exception):
    """A change's condition did not hold for what the id held: nothing was changed."""


#: A change's condition: given what the id holds (None for nothing), whether the change may
#: go ahead. The store asks it in the same atomic step as the change.
Condition = Callable[[bytes | None], bool]


class Put(Enum):
    """What a `PlantStore.put` did."""

    #: The id held nothing: the plant is kept under it.
    CREATED = "created"
    #: The id held another plant: the new one replaced it.
    REPLACED = "replaced"
    #: The id held the same plant (`same_plant`): it is kept as it was, untouched.
    UNCHANGED = "unchanged"


def same_plant(kept: bytes, plant: bytes) -> bool:
    """Whether two plant documents hold the same plant: as JSON values, not as text.

    A plant kept by an earlier version, or by another JSON library, may be spelled otherwise
    (key order, escapes) and still be the same plant.
    """
    return kept == plant or orjson.loads(kept) == orjson.loads(plant)


class Page(NamedTuple):
    """A page of plants, as `PlantStore.page` gives it."""

    #: (id, plant) pairs, in ascending id order.
    plants: list[tuple[int, bytes]]
    #: Whether the page ended at its `limit`, or before a plant that did not fit in its bytes:
    #: then plants may follow it (none, at times); if not, none followed it when it was read.
    full: bool


def stored_plant(plant_id: int, plant: bytes) -> bytes:
    """Give the `StoredPlant` document of a kept `Plant` document: its id first, then its fields.

    The kept bytes are already `PlantSchema`'s dump of the plant, a JSON object with at least a
    name, so the id goes in after its `{`: loading and dumping the plant again would give the
    same fields in the same order. tests/api/test_schemas.py checks it against `StoredPlantSchema`.
    """
    return b'{"id":%d,%s' % (plant_id, plant[1:])


#: The most `stored_plant` adds to a plant: `"id":-9223372036854775808,`.
ID_BYTES = 26


def fill_page(pairs: Iterable[tuple[int, bytes]], limit: int, max_bytes: int) -> Page:
    """Take a page from `pairs` (at most `limit`, in ascending id order) that fits in `max_bytes`.

    Each pair counts as its plant and `ID_BYTES`, so that the page's `stored_plant` documents
    hold `max_bytes` at most; but the first pair is taken however large, so that every plant
    can be listed. A bound on the count alone would let a page of large plants grow `limit`
    times as large as one plant.

    It reads `pairs` no further than the first pair that does not fit: a store reading rows
    lazily from its database reads one row more than it answers, not every row up to `limit`.
    Otherwise it reads `pairs` to their end, so that a query's answer is read whole, as it ends.
    """
    plants: list[tuple[int, bytes]] = []
    for pair in pairs:
        max_bytes -= len(pair[1]) + ID_BYTES
        if max_bytes < 0 and plants:
            return Page(plants, full=True)
        plants.append(pair)
    return Page(plants, full=len(plants) == limit)
