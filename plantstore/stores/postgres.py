"""A store in PostgreSQL: durable, and shared by every process on every machine."""

from collections.abc import Callable
from functools import partial
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from plantstore.stores import StoreUnavailable

#: Connections a worker may hold: one per thread of the default `GUNICORN_THREADS`.
POOL_SIZE = 8
#: Seconds a request waits for a connection (or a connection attempt waits for the server)
#: before the store is reported unavailable.
WAIT_SECONDS = 3.0
#: Seconds the pool keeps retrying a lost connection in the background, backing off; after
#: that it gives up and the next request that needs a connection starts a fresh attempt, so
#: the store is never more than a few seconds late in noticing that the server is back.
RECONNECT_SECONDS = 10.0

_T = TypeVar("_T")

#: Held while the table is made, so that workers starting together do not race to make it.
_CREATE_TABLE_LOCK = 0x706C616E7473
# `json` keeps the document's exact text (`jsonb` would reorder it and refuse `\u0000`), so
# what comes back compares byte for byte with what a repeat sends.
_CREATE_TABLE = "CREATE TABLE IF NOT EXISTS plants (id bigint PRIMARY KEY, plant json NOT NULL)"


def _create_table(connection: psycopg.Connection) -> None:
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_TABLE_LOCK,))
        connection.execute(_CREATE_TABLE)


class PostgresStore:
    """Plants in a PostgreSQL table, through a pool of connections opened in this process.

    Open it after gunicorn forks (the app is not preloaded, so `create_app` runs in each
    worker): a connection inherited across a fork would be shared by accident. The pool
    connects in the background, so a worker starts even while the database is down, and it
    replaces a connection that broke; meanwhile `add` raises `StoreUnavailable`.

    The database's primary key decides who wins an id, in one statement, so the duplicate rule
    holds across processes and machines. Each statement commits on its own (autocommit), and
    with the server's default `synchronous_commit = on` a plant answered with 200 is on disk.

    Args:
        url: a libpq URL; what it leaves out comes from the usual `PG*` variables.
    """

    def __init__(self, url: str) -> None:
        self._pool = ConnectionPool(
            url,
            kwargs={"autocommit": True, "connect_timeout": round(WAIT_SECONDS)},
            min_size=1,
            max_size=POOL_SIZE,
            configure=_create_table,
            timeout=WAIT_SECONDS,
            reconnect_timeout=RECONNECT_SECONDS,
            name="plantstore",
            open=True,
        )

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._on_a_connection(partial(_add, plant_id=plant_id, plant=plant))

    def ready(self) -> bool:
        try:
            self._on_a_connection(_ping)
        except StoreUnavailable:
            return False
        return True

    def close(self) -> None:
        self._pool.close()

    def _on_a_connection(self, work: Callable[[psycopg.Connection], _T]) -> _T:
        """Do `work` on a pooled connection; on one the server dropped, do it again on another.

        A pooled connection the server dropped while idle (it restarted) fails only when used;
        each is then thrown away, so a restart costs no request. `work` is safe to repeat: a
        plant is only inserted where the id holds none.
        """
        for _ in range(POOL_SIZE + 1):
            connection = None
            try:
                with self._pool.connection() as connection:
                    return work(connection)
            except psycopg.OperationalError as ex:
                if connection is None or not connection.broken:
                    raise StoreUnavailable(f"PostgreSQL: {ex}") from ex
                lost = ex
        raise StoreUnavailable(f"PostgreSQL: {lost}") from lost


def _add(connection: psycopg.Connection, plant_id: int, plant: bytes) -> bytes:
    inserted = connection.execute(
        "INSERT INTO plants (id, plant) VALUES (%s, %s::json) ON CONFLICT (id) DO NOTHING",
        (plant_id, plant.decode()),
    ).rowcount
    if inserted:
        return plant
    (kept,) = connection.execute(
        "SELECT plant::text FROM plants WHERE id = %s", (plant_id,)
    ).fetchone()
    return kept.encode()


def _ping(connection: psycopg.Connection) -> None:
    connection.execute("SELECT 1")
