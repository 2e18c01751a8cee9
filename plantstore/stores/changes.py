"""Changes to plants as data, and what a batch of them does when made one after another.

A durable store makes a worker's changes in batches (plantstore/stores/group_commit.py). It
reads what the batch's ids hold, in the batch's transaction and under its locks, and `plan`
makes each change on that copy, in order, as the store would one at a time: each change gets
the answer it would get alone, conditions and conflicts included. What the batch then writes
is the difference between what the ids held and what they hold after the last change: one
statement a kind of write (or one in all), whatever the number of changes.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from plantstore.core.events import Event, plant_created, plant_deleted, plant_updated
from plantstore.core.plants import Condition, ConditionFailed, Put, same_plant


class Add(NamedTuple):
    """`PlantStore.add`: keep the plant unless the id is taken; answer what the id holds."""

    plant_id: int
    plant: bytes


class Replace(NamedTuple):
    """`PlantStore.put`: keep the plant whatever the id held, if the condition holds."""

    plant_id: int
    plant: bytes
    condition: Condition | None


class Remove(NamedTuple):
    """`PlantStore.delete`: forget the plant, if the condition holds; answer whether one was."""

    plant_id: int
    condition: Condition | None


Change = Add | Replace | Remove
#: The kinds of change, for `isinstance`.
CHANGES = (Add, Replace, Remove)


class Plan(NamedTuple):
    """What a batch does: each change's outcome, in order, and what it writes."""

    #: Each change's answer, or the `ConditionFailed` it is refused with.
    outcomes: list[object]
    #: Plants to keep under ids that held none.
    inserts: dict[int, bytes]
    #: Plants to keep in place of those the ids held.
    updates: dict[int, bytes]
    #: Ids that held a plant and hold none.
    deletes: list[int]
    #: The events of the changes made, in their order (none when none is wanted).
    events: list[Event]


def plan(changes: Sequence[Change], kept: Mapping[int, bytes], events: bool) -> Plan:
    """Make `changes` one after another on what their ids hold (`kept`: absent, nothing).

    Conditions are asked here, of what each id holds when its change comes: with `kept` read
    under the batch's locks, that is what the database holds then.
    """
    held = {change.plant_id: kept.get(change.plant_id) for change in changes}
    made: list[Event] | None = [] if events else None
    outcomes: list[object] = []
    for change in changes:
        try:
            outcomes.append(_make(change, held, made))
        except ConditionFailed as refused:
            outcomes.append(refused)
    inserts, updates, deletes = {}, {}, []
    for plant_id, plant in held.items():
        before = kept.get(plant_id)
        if before is None and plant is not None:
            inserts[plant_id] = plant
        elif before is not None and plant is None:
            deletes.append(plant_id)
        elif plant is not before and plant != before:
            updates[plant_id] = plant
    return Plan(outcomes, inserts, updates, deletes, made or [])


def _make(change: Change, held: dict[int, bytes | None], made: list[Event] | None) -> object:
    """Make one change on `held`, and its event in `made` (None: no event is wanted); give
    its answer."""
    plant_id = change.plant_id
    kept = held[plant_id]
    if isinstance(change, Add):
        if kept is not None:
            return kept
        held[plant_id] = change.plant
        _note(made, plant_created, plant_id, change.plant)
        return change.plant
    if change.condition is not None and not change.condition(kept):
        raise ConditionFailed
    if isinstance(change, Remove):
        if kept is None:
            return False
        held[plant_id] = None
        _note(made, plant_deleted, plant_id)
        return True
    if kept is None:
        held[plant_id] = change.plant
        _note(made, plant_created, plant_id, change.plant)
        return Put.CREATED, change.plant
    if same_plant(kept, change.plant):
        return Put.UNCHANGED, kept
    held[plant_id] = change.plant
    _note(made, plant_updated, plant_id, change.plant)
    return Put.REPLACED, change.plant


def _note(made: list[Event] | None, make: Callable[..., Event], *args: object) -> None:
    if made is not None:
        made.append(make(*args))
