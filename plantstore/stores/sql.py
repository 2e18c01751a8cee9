"""What the SQLite and PostgreSQL stores share: the tag they index, schema steps, a page query."""

from collections.abc import Sequence
from typing import TypeVar

import orjson

from plantstore.stores import SchemaTooNew

_Step = TypeVar("_Step")


def tag_key(plant: bytes | str) -> bytes | None:
    """Name the plant's tag as the SQL stores index it: its UTF-8 bytes, or None for no tag.

    Read here as the memory store reads it, not by the databases' JSON functions: PostgreSQL's
    refuse a document holding `\\u0000` anywhere, and SQLite's `json_extract` ends a text at it.
    """
    tag = orjson.loads(plant).get("tag")
    return None if tag is None else tag.encode()


def steps_to_take(steps: Sequence[_Step], version: int, database: str) -> Sequence[_Step]:
    """Name the schema steps a database at `version` (the first `version` steps taken) lacks.

    Raises:
        SchemaTooNew: a newer plantstore took steps this one does not know.
    """
    if version > len(steps):
        raise SchemaTooNew(
            f"{database} has schema version {version}, but this plantstore knows versions up to "
            f"{len(steps)}: run a newer plantstore on it"
        )
    return steps[version:]


def page_query(
    after: int | None, limit: int, tag: str | None, *, plant: str, marker: str
) -> tuple[str, tuple]:
    """Write the query of a page and its values, selecting `plant` and binding with `marker`.

    Only the conditions asked for, so that it is answered from the primary key (or
    `plants_by_tag`) in id order, with no sort: ids are int64, so no bound stands in for a
    missing `after`.
    """
    conditions, values = [], []
    if tag is not None:
        conditions.append(f"tag = {marker}")
        values.append(tag.encode())
    if after is not None:
        conditions.append(f"id > {marker}")
        values.append(after)
    where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
    return f"SELECT id, {plant} FROM plants {where}ORDER BY id LIMIT {marker}", (*values, limit)
