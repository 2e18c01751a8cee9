"""The page of plants the store contract asks for, worked out by hand: the stores' tests hold
every store to it, and the API's state machine holds the service's listings to it."""

from plantstore.core.plants import ID_BYTES


def expected_page(
    plants: list[tuple[int, bytes]], limit: int, max_bytes: int
) -> tuple[list[tuple[int, bytes]], bool]:
    """The page the contract asks for from `plants` (those after `after`, in id order): up to
    `limit`, each counted as its plant and ID_BYTES, within `max_bytes` but one at least; and
    whether it is full (at `limit`, or cut short by a plant that does not fit)."""
    taken, used = [], 0
    for plant_id, plant in plants[:limit]:
        used += len(plant) + ID_BYTES
        if taken and used > max_bytes:
            return taken, True
        taken.append((plant_id, plant))
    return taken, len(taken) == limit
