"""Changes to plants as data, and what a batch of them does when made one after another: the
rules of a change, for every store.

A store reads what the ids of its changes hold (a durable one in the batch's transaction and
under its locks, plantstore/stores/group_commit.py), and `plan` makes each change on that
copy, in order, as if one at a time: each change gets the answer it would get alone,
conditions and conflicts included, and each change made gets its event, at the next position
of the feed. What the store then writes is the difference between what the ids held and what
they hold after the last change, and the events: one statement a kind of write, whatever the
number of changes.
"""

import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from plantstore.core.events import Event, EventKind
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
    #: The events of the changes made, in their order, at positions from the first given.
    events: list[Event]


def plan(changes: Sequence[Change], kept: Mapping[int, bytes], first_position: int) -> Plan:
    """Make `changes` one after another on what their ids hold (`kept`: absent, nothing); their
    events take the feed's positions from `first_position` on.

    Conditions are asked here, of what each id holds when its change comes: with `kept` read
    under the batch's locks, that is what the database holds then.
    """
    held = {change.plant_id: kept.get(change.plant_id) for change in changes}
    made = _Events(first_position)
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
    return Plan(outcomes, inserts, updates, deletes, made.events)


class _Events:
    """The events of a plan, each at the next position, all at the time the plan is made."""

    def __init__(self, first_position: int) -> None:
        self.events: list[Event] = []
        self._next = first_position
        self._at = time.time()

    def note(self, kind: EventKind, plant_id: int, plant: bytes | None) -> None:
        self.events.append(Event(self._next, kind, plant_id, plant, self._at))
        self._next += 1


def _make(change: Change, held: dict[int, bytes | None], made: _Events) -> object:
    """Make one change on `held`, and note its event in `made`; give its answer."""
    plant_id = change.plant_id
    kept = held[plant_id]
    if isinstance(change, Add):
        if kept is not None:
            return kept
        held[plant_id] = change.plant
        made.note(EventKind.CREATED, plant_id, change.plant)
        return change.plant
    if change.condition is not None and not change.condition(kept):
        raise ConditionFailed
    if isinstance(change, Remove):
        if kept is None:
            return False
        held[plant_id] = None
        made.note(EventKind.DELETED, plant_id, None)
        return True
    if kept is None:
        held[plant_id] = change.plant
        made.note(EventKind.CREATED, plant_id, change.plant)
        return Put.CREATED, change.plant
    if same_plant(kept, change.plant):
        return Put.UNCHANGED, kept
    held[plant_id] = change.plant
    made.note(EventKind.UPDATED, plant_id, change.plant)
    return Put.REPLACED, change.plant
