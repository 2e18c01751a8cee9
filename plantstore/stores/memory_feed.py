"""The feed of the memory store: compact columns, and nothing in them for the garbage collector
to track, however many events it keeps."""

from array import array
from collections.abc import Iterator

from plantstore.core.events import KINDS, Event, feed_documents, milliseconds


class MemoryFeed:
    """Events at positions that follow each other from `pruned_through + 1`: the event at a
    position is found by arithmetic, each in a few bytes of arrays (the plant's bytes are the
    store's own). What is pruned stays at the columns' head until it is half of them.

    A page's documents are made each time it is read, from the columns: made once as they are
    written, as the SQL stores keep them, they would take more memory than the plants.
    """

    def __init__(self, first_position: int) -> None:
        self.pruned_through = first_position - 1
        self._gone = 0
        self._kinds = bytearray()
        self._plant_ids = array("q")
        self._plants: list[bytes | None] = []
        self._times_ms = array("q")

    @property
    def head(self) -> int:
        """The last position given."""
        return self.pruned_through + len(self._kinds) - self._gone

    def append(self, events: list[Event]) -> None:
        for event in events:
            self._kinds.append(KINDS.index(event.kind))
            self._plant_ids.append(event.plant_id)
            self._plants.append(event.plant)
            self._times_ms.append(milliseconds(event.at))

    def after(self, position: int, limit: int) -> Iterator[bytes]:
        """The documents of up to `limit` events after `position`, which is kept (not before
        `pruned_through`): the columns are copied now, the documents made as they are taken,
        so that a reader can make them after it let go of the store's lock."""
        start = self._gone + position - self.pruned_through
        stop = min(start + limit, len(self._kinds))
        return feed_documents(
            range(position + 1, position + 1 + stop - start),
            self._kinds[start:stop],
            self._plant_ids[start:stop],
            self._plants[start:stop],
            self._times_ms[start:stop],
        )

    def prune(self, before: float, limit: int) -> int:
        """Forget up to `limit` of the oldest events made before `before` (to the millisecond);
        give how many."""
        before_ms = before * 1000  # a float: `before` may be infinite, to forget by count alone
        end, last = self._gone, min(self._gone + limit, len(self._kinds))
        while end < last and self._times_ms[end] < before_ms:
            end += 1
        pruned = end - self._gone
        self.pruned_through += pruned
        self._gone = end
        if self._gone > len(self._kinds) // 2:
            for column in (self._kinds, self._plant_ids, self._plants, self._times_ms):
                del column[: self._gone]
            self._gone = 0
        return pruned

    def __len__(self) -> int:
        return len(self._kinds) - self._gone
