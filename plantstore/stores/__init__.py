"""Where plants are kept: the choice of a store by its `PLANTSTORE_STORE` URL, and its opening.

Every store implements `plantstore.core.stores.PlantStore` (and `Outbox`); the SQLite and
PostgreSQL modules are imported only when chosen, so the base install needs neither psycopg nor
anything else beyond the standard library.
"""

import time
from collections.abc import Callable, Sequence

from plantstore.config import store_kind
from plantstore.core.stores import PlantStore, StoreUnavailable

#: The database a service started with, where it can tell: a SQLite file's device and inode.
Started = tuple[int, int] | None


def open_store(
    url: str,
    subscribers: Sequence[str] = (),
    on_commit: Callable[[int, int], None] | None = None,
    started_with: Started = None,
) -> PlantStore:
    """Open the store a `PLANTSTORE_STORE` URL names (checked by `plantstore.config`).

    With `subscribers` (their keys), it is an `Outbox` too, which writes a delivery of each
    event to each of them with the change. It calls `on_commit` after each commit, with the
    numbers of changes it held and of events it wrote. A SQLite store answers only for the
    file the service `started_with`, when one is given (`prepare_store` gives it).

    The SQLite and PostgreSQL modules are imported only when chosen, so the base install
    needs neither psycopg nor anything else beyond the standard library.
    """
    kind = store_kind(url)
    if kind == "memory":
        from plantstore.stores.memory import MemoryStore

        return MemoryStore(subscribers, on_commit)
    if kind == "sqlite":
        from plantstore.stores.sqlite import SqliteStore

        path = url.removeprefix("sqlite:///")
        return SqliteStore(path, subscribers, on_commit, started_with=started_with)
    if kind == "postgresql":
        from plantstore.stores.postgres import PostgresStore

        return PostgresStore(url, subscribers, on_commit)
    # Not the URL itself: a mistyped PostgreSQL URL may hold a password.
    raise ValueError("PLANTSTORE_STORE names no store")


#: Seconds between a start's attempts to reach a store that cannot serve yet.
PREPARE_RETRY_SECONDS = 0.5


def prepare_store(
    url: str, wait: float, on_waiting: Callable[[StoreUnavailable], None] = lambda ex: None
) -> Started:
    """Reach the store a start names and bring its schema up to date, once, for every worker;
    give the database it started with, which every store opened for the service answers for.

    A store that cannot serve yet (a database starting, a lock held) is tried again until
    `wait` seconds have passed; `on_waiting` is told why the first attempt failed, once, when
    there is time left to try again, so that a start does not wait without a word.

    Raises:
        StoreUnavailable: it still could not serve after `wait` seconds; the message says why.
        StoreUnusable: it can never serve as it is.
        SchemaTooNew: a newer plantstore brought it to a schema this one does not know.
    """
    deadline = time.monotonic() + wait
    waited = False
    while True:
        try:
            if store_kind(url) == "postgresql":
                from plantstore.stores.postgres_schema import prepare

                prepare(url)
                return None
            open_store(url).close()
            if store_kind(url) == "sqlite":
                from plantstore.stores.sqlite_file import identity

                return identity(url.removeprefix("sqlite:///"))
            return None
        except StoreUnavailable as ex:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            if not waited:
                on_waiting(ex)
                waited = True
            time.sleep(min(PREPARE_RETRY_SECONDS, remaining))
